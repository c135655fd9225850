"""Sizes: choosing them so that every dim can be recovered, and recovering dims from them.

Pure Python (no torch, no SymPy). A traced graph holds concrete sizes (``105``) and
constants (``0.3779…``); the spec must say ``3 * n_embd`` and ``1 / sqrt(head_dim)``.
When the tool chooses the sizes, each atomic dim is a distinct prime of at least 5, so a
size factors into dims in exactly one way (``105 = 3 · 5 · 7`` is ``3 * n_head *
head_dim``) and the literal factors 2 and 3 (halves, ``3 * n_embd``) stay literal.
With sizes the user gave, a recovery may be ambiguous: :meth:`Dims.scale` then prefers
the contracted width and says which other dims had that size.
"""

from __future__ import annotations

import math
from itertools import combinations, combinations_with_replacement
import re
from dataclasses import dataclass, field

#: The factors code writes as numbers (`3 * n_embd`, `chunk(2)`, `view(B, T, 4, ...)`).
LITERAL_FACTORS = (2, 3, 4)
#: Sizes the tool gives to atomic dims: primes, none of them a literal factor (2, 3, 4).
PRIMES: tuple[int, ...] = (5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71,
                           73, 79, 83, 89, 97, 101, 103, 107, 109, 113, 127, 131)
#: Example sizes for the symbolic batch and sequence axes (never a dim's size).
BATCH_SIZE, SEQUENCE_SIZE = 9, 15
#: Example sizes for symbolic axes named by a function's annotations, one per name (two
#: names of one size could be read as one).
SYMBOLIC_SIZES: tuple[int, ...] = (BATCH_SIZE, SEQUENCE_SIZE, 21, 25, 27, 33, 35, 39)

# A factory's one-letter dims, as specs name them (`factory(D, H, G, d)`): H heads, G kv
# heads (groups), d the head width, D the width.
_HEADS = re.compile(r"(^|_)(n_?heads?|num_heads|num_attention_heads|heads|nhead|n_head|"
                    r"head_count|num_head)$|^[Hh]$")
_KV_HEADS = re.compile(r"(kv_heads?|key_value_heads|n_kv_head|num_kv)$|^G$")
_HEAD_DIM = re.compile(r"^(?!all_|inner_|total_)(.*_)?(head_dim|head_size|d_head|dim_head|d_k|hs|"
                       r"attention_head_size|key_size|d_kv|dim_per_head|size_per_head)$|^d$")
WIDTH = re.compile(r"(n_embd|embed_dim|d_model|dim|hidden_size|hidden|width|n_state|emb_dim|"
                    r"d_embed|model_dim|channels|n_embed)$|^D$")


#: widths that are not the model's: a feed-forward's, a convolution's channels
_NOT_MODEL = re.compile(r"(mlp|ffn|intermediate|hidden_dim|hidden_features|channels)")


def is_size_name(name: str) -> bool:
    """A name of heads, kv heads, a head width or a width (``num_attention_heads``,
    ``head_dim``, ``hidden_size``)."""
    return any(p.search(name) for p in (_HEADS, _KV_HEADS, _HEAD_DIM, WIDTH))


def is_width(name: str) -> bool:
    """A model width (``n_embd``, ``hidden_size``, ``dim``), not a head's (``head_dim``)."""
    return bool(WIDTH.search(name)) and not any(p.search(name) for p in (_HEADS, _KV_HEADS,
                                                                          _HEAD_DIM))


@dataclass
class Chosen:
    """Sizes chosen for a factory's int parameters, and the relations that make them."""

    sizes: dict[str, int]
    atomic: dict[str, int]            # dim name -> prime
    derived: dict[str, tuple[str, ...]]  # dim name -> the atomic dims it is the product of


def choose(parameters: list[str], given: dict[str, int], *, even_heads: bool = False,
           avoid: frozenset[int] = frozenset()) -> Chosen:
    """Sizes for a factory's int ``parameters`` (``given`` fixes some). Heads, kv heads and
    head widths get primes; a width is heads × head width (a kv-head count divides the
    heads: heads = kv × group); any other int gets a prime of its own, larger than the
    example sequence length. ``even_heads`` makes the head width ``2 · prime`` (rotary
    halves). No size in ``avoid`` is chosen (an input's fixed axes: a 5 × 7 image read as
    5 heads)."""
    pool = iter(p for p in PRIMES if p not in given.values() and p not in (BATCH_SIZE,
                                                                        SEQUENCE_SIZE)
                and p not in avoid)
    atomic: dict[str, int] = {}
    derived: dict[str, tuple[str, ...]] = {}
    sizes: dict[str, int] = {}
    heads = next((p for p in parameters if _HEADS.search(p) and not _KV_HEADS.search(p)), None)
    kv = next((p for p in parameters if _KV_HEADS.search(p)), None)
    head_dim = next((p for p in parameters if _HEAD_DIM.search(p)), None)
    width = next((p for p in parameters if WIDTH.search(p) and p not in (heads, kv, head_dim)),
                 None)
    if heads is not None and heads not in given:
        if kv is not None and kv not in given:
            atomic[kv] = next(pool)
            atomic["group"] = next(pool)
            derived[heads] = (kv, "group")
        else:
            atomic[heads] = next(pool)
    if head_dim is None and heads is not None and width is not None and width not in given:
        head_dim = "head_dim"
    if head_dim is not None and head_dim not in given:
        if even_heads:
            atomic[f"{head_dim}_half"] = next(pool)
            derived[head_dim] = ("2", f"{head_dim}_half")
        else:
            atomic[head_dim] = next(pool)
    if width is not None and width not in given and heads is not None and heads not in given:
        # heads × head width, the head width by its name even when it is `2 * half` (an
        # even head width): `dim n_embd = n_head * head_dim`, and `3 * n_embd` then reads
        # as one
        derived[width] = (*_factors(heads, derived), *([head_dim] if head_dim else []))
    # other ints: primes of their own above the sequence length, each distinct (two taking
    # `max(prime, 67)` once shared 67: a window read as the width)
    larger = (p for p in pool if p >= 67)
    for name in parameters:
        if name not in given and name not in atomic and name not in derived:
            atomic[name] = next(larger)
    for name, value in given.items():
        sizes[name] = value
    for name, prime in atomic.items():
        sizes[name] = prime
    for name in derived:
        sizes[name] = _chosen_value(name, atomic, derived)
    return Chosen({k: v for k, v in sizes.items() if k in parameters}, atomic, derived)


def _chosen_value(part: str, atomic: dict[str, int], derived: dict[str, tuple[str, ...]]) -> int:
    """A chosen dim's size: a literal factor, an atomic dim's prime, or the product of a
    derived dim's parts (which may be derived: a width of heads × `2 * half`)."""
    if part.isdigit():
        return int(part)
    if part in derived:
        return math.prod(_chosen_value(p, atomic, derived) for p in derived[part])
    return atomic[part]


def _factors(name: str, derived: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    return derived.get(name, (name,)) if name else ()


@dataclass
class Dims:
    """The named dims of one extraction and how to write a concrete size with them.

    ``atomic`` dims are free (``dim n_head, head_dim``); ``derived`` ones are products
    of atomic dims and literal factors (``dim n_embd = n_head * head_dim``); ``symbolic``
    are torch's symbols for the dynamic axes (``s27`` -> ``T``).
    """

    atomic: dict[str, int] = field(default_factory=dict)
    derived: dict[str, tuple[int, tuple[str, ...]]] = field(default_factory=dict)
    symbolic: dict[str, str] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    #: the free dims are declared at their sizes (`dim head_dim = 8`): sizes the user gave
    #: that numbers alone cannot tell apart (two dims of size 2, 4 dividing 8)
    fixed: bool = False
    #: sizes written as numbers: no dim (or product of dims) has them
    unnamed: set[int] = field(default_factory=set)
    #: conventions an API documents for a dim (HF's `sliding_window`: `window exclusive`):
    #: such a dim is declared free with them (docs/language.md §10.3)
    conventions: dict[str, str] = field(default_factory=dict)
    #: dims read off the others' sizes, which no name in the code gives (a head width
    #: `dim // num_heads` kept in a local): an input axis of that size is not theirs
    inferred: set[str] = field(default_factory=set)

    def value(self, name: str) -> int:
        if name in self.atomic:
            return self.atomic[name]
        factor, parts = self.derived[name]
        return factor * math.prod(self.value(p) for p in parts)

    def value_at(self, name: str, bindings: dict[str, int]) -> int:
        """The size of a dim where the atomic dims have ``bindings`` (others as traced)."""
        if name in self.atomic:
            return bindings.get(name, self.atomic[name])
        factor, parts = self.derived[name]
        return factor * math.prod(self.value_at(p, bindings) for p in parts)

    def parts(self, name: str) -> set[str]:
        """The atomic dims a dim is made of (itself, when atomic)."""
        if name in self.atomic:
            return {name}
        return {p for part in self.derived[name][1] for p in self.parts(part)}

    def size(self, n: int) -> str:
        """A concrete size written with the dims: a named dim of that size, else the
        product of atomic dims (and a literal factor) that makes it, else the number."""
        if n in (1, 0) or n < 0:
            return str(n)
        for name in (*self.derived, *self.atomic):
            if self.value(name) == n:
                self.used.add(name)
                return name
        if n in LITERAL_FACTORS:
            # `reshape(B, N, 3, H, -1)`, `chunk(2)`: the code's own factor, never half of a
            # dim that happens to be twice it (BEiT's head width 6 read as 2 * a half of 3,
            # and then its scale as another dim's)
            self.unnamed.add(n)
            return str(n)
        half = next((name for name, size in self.atomic.items() if size == 2 * n
                     and _HEAD_DIM.search(name)), None)
        if half is not None:
            # Half of a head width (rotary halves): the dim becomes 2 * its half.
            del self.atomic[half]
            self.atomic[f"{half}_half"] = n
            self.derived[half] = (2, (f"{half}_half",))
            return self.size(n)
        found = self._monomial(n)
        if found is None:
            # a small multiple of a derived dim whose own factor the atomic dims' monomial
            # cannot take (`3 * n_embd`, n_embd = n_head * head_dim, head_dim = 2 * half)
            multiple = next((name for name in sorted(self.derived, key=self.value, reverse=True)
                             if n % self.value(name) == 0 and n // self.value(name) in (2, 3, 4)),
                            None)
            if multiple is not None:
                self.used.add(multiple)
                return f"{n // self.value(multiple)} * {multiple}"
            half = next((name for name, size in self.atomic.items() if size == 2 * n), None)
            if half is None:
                self.unnamed.add(n)
                return str(n)
            del self.atomic[half]
            self.atomic[f"{half}_half"] = n
            self.derived[half] = (2, (f"{half}_half",))
            return self.size(n)
        factor, parts = found
        words = self._group(list(parts))
        self.used.update(w for w in words)
        text = " * ".join(words)
        return f"{factor} * {text}" if factor != 1 else text

    def writes(self, n: int) -> bool:
        """Whether the dims write the size ``n``: a dim of it, or a product of dims (and a
        small factor)."""
        return any(self.value(name) == n for name in (*self.derived, *self.atomic)) \
            or self._monomial(n) is not None

    def _monomial(self, n: int) -> tuple[int, tuple[str, ...]] | None:
        """The fewest atomic dims whose product times a small factor (1..4) is ``n``."""

        names = sorted(self.atomic, key=lambda k: -self.atomic[k])
        # a product of distinct dims with no literal factor first (OpenFold's 24 at 4 heads
        # of 6 is `c_hidden * no_heads`, not `4 * c_hidden`), then with a factor; a square
        # is the last reading (XCiT's 144 at 4 heads of 12 is `3 * dim`, not `head_dim ** 2`)
        for choose in (combinations, combinations_with_replacement):
            for factors in ((1,), (1, 2, 3, 4)):
                for count in range(1, 5):
                    for parts in choose(names, count):
                        product = math.prod(self.atomic[p] for p in parts)
                        if n % product == 0 and n // product in factors:
                            return n // product, parts
        return None

    def _group(self, parts: list[str]) -> list[str]:
        """Replace a derived dim's factors by its name (``n_head * head_dim`` -> ``n_embd``)."""
        words: list[str] = []
        for name, (factor, factors) in self.derived.items():
            if factor != 1:
                continue
            remaining = list(parts)
            try:
                for f in factors:
                    remaining.remove(f)
            except ValueError:
                continue
            words.append(name)
            parts = remaining
        return words + parts

    def scale(self, value: float, contracted: str | None) -> str | None:
        """A scale constant as a dim expression: ``0.377…`` -> ``sqrt(head_dim)`` when the
        scores are divided by it (the text is what they are divided by), or None.

        The contracted width wins an ambiguous recovery; the other candidates are noted.
        """
        if value <= 0 or value >= 1:
            return None
        inverse_fourth = value ** -4
        fourth = round(inverse_fourth)
        if fourth >= 2 and abs(inverse_fourth - fourth) < 1e-6 * fourth \
                and abs(math.sqrt(fourth) - round(math.sqrt(fourth))) > 1e-9:
            # a split scale (q and k each by width ** -0.25)
            written = self.size(fourth)
            return f"{written} ** 0.25" if written != str(fourth) else None
        inverse_square = 1.0 / (value * value)
        rounded = round(inverse_square)
        if rounded < 2 or abs(inverse_square - rounded) > 1e-6 * rounded:
            inverse = 1.0 / value
            whole = round(inverse)
            if whole >= 2 and abs(inverse - whole) < 1e-9 * whole:
                return self.size(whole) if self.size(whole) != str(whole) else None
            return None
        candidates = [name for name in (*self.derived, *self.atomic) if self.value(name) == rounded]
        if contracted is not None and self._value_of(contracted) == rounded:
            chosen = contracted
        else:
            chosen = self.size(rounded)
            if chosen == str(rounded):
                return f"sqrt({rounded})"
        others = [c for c in candidates if c != chosen]
        if others:
            from .errors import MESSAGES

            self.notes.append(MESSAGES["scale_note"].format(size=rounded, chosen=chosen,
                                                            others=", ".join(others)))
        self.used.update(n for n in re.findall(r"[A-Za-z_]\w*", chosen) if n in self.atomic
                         or n in self.derived)
        return f"sqrt({chosen})"

    def _value_of(self, text: str) -> int | None:
        """The value of a product written by :meth:`size` (None if it has a symbolic dim)."""
        total = 1
        for word in (w.strip() for w in text.split("*")):
            if word.isdigit():
                total *= int(word)
            elif word in self.atomic or word in self.derived:
                total *= self.value(word)
            else:
                return None
        return total

    def declarations(self) -> list[str]:
        """The `dim` lines: symbolic dims, then atomic, then derived ones."""
        lines: list[str] = []
        free = [*dict.fromkeys(self.symbolic.values())]
        needed = set(self.used)
        for _ in range(3):  # a derived dim's parts may be derived (head_dim = 2 * half)
            for name in list(needed):
                if name in self.derived:
                    needed.update(self.derived[name][1])
        atomic = [name for name in self.atomic if name in needed]
        stated = [name for name in atomic if name in self.conventions]
        atomic = [name for name in atomic if name not in stated]
        if not self.fixed:
            free += atomic
        if free:
            lines.append("dim " + ", ".join(free))
        if self.fixed:
            lines.extend(f"dim {name} = {self.atomic[name]}" for name in atomic)
        lines.extend(f"dim {name} {self.conventions[name]}" for name in stated)
        for name, (factor, parts) in sorted(self.derived.items(),
                                            key=lambda item: self._depth(item[0])):
            if name in needed:
                words = ([str(factor)] if factor != 1 else []) + list(parts)
                lines.append(f"dim {name} = {' * '.join(words)}")
        return lines

    def _depth(self, name: str) -> int:
        if name not in self.derived:
            return 0
        return 1 + max((self._depth(p) for p in self.derived[name][1]), default=0)

    def bindings(self) -> dict[str, int]:
        """The traced sizes of the atomic dims (conformance fixes them)."""
        return {name: size for name, size in self.atomic.items()}


def annotation_words(text: str) -> list[str]:
    """A jaxtyping dim string's names (``"*batch h t d"``); empty when it has a form this
    does not read (``...``, an expression)."""
    words = [w.lstrip("*#").split("=")[0] for w in text.split()]
    return words if all(w.isidentifier() or w.isdigit() for w in words) else []


def head_width(dims: Dims) -> int | None:
    """The size of the head width among the dims (``head_dim``, ``d_k``), if one is."""
    name = next((n for n in (*dims.derived, *dims.atomic) if _HEAD_DIM.search(n)), None)
    return None if name is None else dims.value(name)


def spec_name(name: str) -> str:
    """A parameter's name as a dim of the spec: a reserved word or builtin gets a ``_``."""
    from ...check.builtins import BUILTINS

    reserved = {"dim", "constraint", "input", "param", "output", "assert", "bool", "inf",
                "row", "col", "true", "false", "True", "False"}
    return f"{name}_" if name in reserved or name in BUILTINS else name


def _spec_names(chosen: Chosen, rename: dict[str, str]) -> dict[str, str]:
    """Each chosen name's dim in the spec (``rename``: ``--init n_head=H``)."""
    return {**{n: spec_name(n) for n in (*chosen.atomic, *chosen.derived)}, **rename}


def from_chosen(chosen: Chosen, rename: dict[str, str]) -> Dims:
    """The dims of sizes the tool chose (``rename``: ``--init n_head=H``)."""
    rename = _spec_names(chosen, rename)
    dims = Dims()
    for name, prime in chosen.atomic.items():
        dims.atomic[rename.get(name, name)] = prime
    for name, parts in chosen.derived.items():
        factor = math.prod(int(p) for p in parts if p.isdigit())
        dims.derived[rename.get(name, name)] = (
            factor, tuple(rename.get(p, p) for p in parts if not p.isdigit()))
    return dims


def parameter_sizes(chosen: Chosen, rename: dict[str, str],
                    bindings: dict[str, int]) -> dict[str, int]:
    """The parameters' sizes at other sizes of the spec's dims (``bindings``, by their spec
    names; a dim not bound keeps its chosen size): how a module is built again there."""
    names = _spec_names(chosen, rename)

    def value(name: str) -> int:
        if name.isdigit():
            return int(name)
        if name in chosen.derived:
            return math.prod(value(part) for part in chosen.derived[name])
        return bindings.get(names.get(name, name), chosen.atomic.get(name, 0))

    sizes: dict[str, int] = {}
    for name, size in chosen.sizes.items():
        if name in chosen.derived:
            sizes[name] = value(name)
        else:
            sizes[name] = bindings.get(names.get(name, name), size)
    return sizes


_GROUPS = re.compile(r"(groups|n_rep|num_key_value_groups|group_size)$")


def is_structural(name: str) -> bool:
    """A head width, a kv head count, a head count or a group count (by its name)."""
    return _category(name) < 4


def _category(name: str) -> int:
    """The order dims are settled in: head widths, kv heads, heads, groups, then the rest."""
    # Heads before groups: of two dims of one size, the first name is the one written
    # (grouped-query sizes always divide each other, so they are declared at their sizes).
    for rank, pattern in enumerate((_HEAD_DIM, _KV_HEADS, _HEADS, _GROUPS)):
        if pattern.search(name):
            return rank
    return 4


def from_given(named: dict[str, int]) -> Dims:
    """The dims of sizes the user gave (a factory's module attributes, ``num_heads=4``).

    Head widths, kv heads and groups are free; heads are kv heads × groups when they are;
    any other size that is a product of settled dims (``hidden_size = num_heads *
    head_dim``) is derived from them, others are free. Settling by kind rather than by
    size keeps powers of two from being read as each other (128 is `head_dim`, not
    `num_heads * 4`). Ties keep the first name."""
    dims = Dims()
    widened = _with_head_width(named)
    if widened is not named:
        # a head width read off the numbers is as sure as they are: traced apart, or
        # declared at their sizes
        dims.fixed = True
        dims.inferred = set(widened) - set(named)
    named = widened
    order = sorted(((name, size) for name, size in named.items() if size >= 2),
                   key=lambda item: (_category(item[0]), item[1]))
    seen_sizes: set[int] = set()
    for name, size in order:
        name = spec_name(name)
        if size in seen_sizes:
            # Two dims of one size: both are declared at it, only their numbers are sure;
            # the first name is the one a size is written with.
            dims.fixed = True
            if _category(name) < 4:
                dims.atomic[name] = size
            continue
        seen_sizes.add(size)
        if _category(name) < 3:
            dims.atomic[name] = size
            continue
        found = _product_of(size, dims.atomic)
        if found is not None:
            dims.derived[name] = (1, found)
        else:
            dims.atomic[name] = size
    sizes = sorted(dims.atomic.values())
    if any(big % small == 0 for i, small in enumerate(sizes) for big in sizes[i + 1:]):
        dims.fixed = True  # 4 divides 8: a product could be read two ways
    return dims


def _with_head_width(named: dict[str, int]) -> dict[str, int]:
    """A head width where the sizes name heads and a width they divide but no head width
    (XCiT's `ClassAttention(dim, num_heads)` with `head_dim = dim // num_heads` a local):
    the width is then heads × head width, as the code's `C // num_heads` reads it, not a
    multiple of the head count."""
    if any(_HEAD_DIM.search(name) for name in named):
        return named
    heads = {size for name, size in named.items() if _category(name) == 2 and size >= 2}
    # the model's width, not a feed-forward's or a convolution's (`FeedForward(dim,
    # hidden_dim)` among a wrapper's parts): one size, or no head width is read
    widths = {size for name, size in named.items()
              if is_width(name) and not _NOT_MODEL.search(name)}
    if len(heads) != 1 or len(widths) != 1:
        return named
    (width,), (count,) = widths, heads
    if width % count or width // count < 2:
        return named
    return {**named, "head_dim": width // count}


def _product_of(size: int, atomic: dict[str, int]) -> tuple[str, ...] | None:
    """Two or three distinct free dims whose product is ``size``, head widths first."""
    names = list(atomic)
    for count in (2, 3):
        for parts in combinations(names, count):
            if math.prod(atomic[p] for p in parts) == size:
                return parts
    return None
