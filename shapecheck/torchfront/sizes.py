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
import re
from dataclasses import dataclass, field
from itertools import combinations_with_replacement

#: Sizes the tool gives to atomic dims: primes, none of them a literal factor (2, 3, 4).
PRIMES: tuple[int, ...] = (5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71,
                           73, 79, 83, 89, 97, 101, 103, 107, 109, 113, 127, 131)
#: Example sizes for the symbolic batch and sequence axes (never a dim's size).
BATCH_SIZE, SEQUENCE_SIZE = 9, 15

_HEADS = re.compile(r"(^|_)(n_?heads?|num_heads|num_attention_heads|heads|nhead|n_head)$")
_KV_HEADS = re.compile(r"(kv_heads?|key_value_heads|n_kv_head|num_kv|groups|n_groups)$")
_HEAD_DIM = re.compile(r"(head_dim|head_size|d_head|dim_head|d_k|hs|attention_head_size)$")
_WIDTH = re.compile(r"(n_embd|embed_dim|d_model|dim|hidden_size|hidden|width|n_state|emb_dim|"
                    r"d_embed|model_dim|channels|n_embed)$")


@dataclass
class Chosen:
    """Sizes chosen for a factory's int parameters, and the relations that make them."""

    sizes: dict[str, int]
    atomic: dict[str, int]            # dim name -> prime
    derived: dict[str, tuple[str, ...]]  # dim name -> the atomic dims it is the product of


def choose(parameters: list[str], given: dict[str, int], *, even_heads: bool = False) -> Chosen:
    """Sizes for a factory's int ``parameters`` (``given`` fixes some). Heads, kv heads and
    head widths get primes; a width is heads × head width (a kv-head count divides the
    heads: heads = kv × group); any other int gets a prime of its own, larger than the
    example sequence length. ``even_heads`` makes the head width ``2 · prime`` (rotary
    halves)."""
    pool = iter(p for p in PRIMES if p not in given.values() and p not in (BATCH_SIZE,
                                                                        SEQUENCE_SIZE))
    atomic: dict[str, int] = {}
    derived: dict[str, tuple[str, ...]] = {}
    sizes: dict[str, int] = {}
    heads = next((p for p in parameters if _HEADS.search(p) and not _KV_HEADS.search(p)), None)
    kv = next((p for p in parameters if _KV_HEADS.search(p)), None)
    head_dim = next((p for p in parameters if _HEAD_DIM.search(p)), None)
    width = next((p for p in parameters if _WIDTH.search(p) and p not in (heads, kv, head_dim)),
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
        derived[width] = (*_factors(heads, derived), *_factors(head_dim or "", derived))
    for name in parameters:
        if name not in given and name not in atomic and name not in derived:
            atomic[name] = max(next(pool), 67)
    for name, value in given.items():
        sizes[name] = value
    for name, prime in atomic.items():
        sizes[name] = prime
    for name, parts in derived.items():
        sizes[name] = math.prod(int(part) if part.isdigit() else atomic[part] for part in parts)
    return Chosen({k: v for k, v in sizes.items() if k in parameters}, atomic, derived)


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

    def value(self, name: str) -> int:
        if name in self.atomic:
            return self.atomic[name]
        factor, parts = self.derived[name]
        return factor * math.prod(self.value(p) for p in parts)

    def size(self, n: int) -> str:
        """A concrete size written with the dims: a named dim of that size, else the
        product of atomic dims (and a literal factor) that makes it, else the number."""
        if n in (1, 0) or n < 0:
            return str(n)
        for name in (*self.derived, *self.atomic):
            if self.value(name) == n:
                self.used.add(name)
                return name
        found = self._monomial(n)
        if found is None:
            half = next((name for name, size in self.atomic.items() if size == 2 * n), None)
            if half is None:
                return str(n)
            # Half of a free dim (rotary halves of head_dim): the dim becomes 2 * its half.
            del self.atomic[half]
            self.atomic[f"{half}_half"] = n
            self.derived[half] = (2, (f"{half}_half",))
            return self.size(n)
        factor, parts = found
        words = self._group(list(parts))
        self.used.update(w for w in words)
        text = " * ".join(words)
        return f"{factor} * {text}" if factor != 1 else text

    def _monomial(self, n: int) -> tuple[int, tuple[str, ...]] | None:
        """The fewest atomic dims whose product times a small factor (1..4) is ``n``."""
        names = sorted(self.atomic, key=lambda k: -self.atomic[k])
        for count in range(1, 5):
            for parts in combinations_with_replacement(names, count):
                product = math.prod(self.atomic[p] for p in parts)
                if n % product == 0 and n // product in (1, 2, 3, 4):
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
            self.notes.append(f"the scale 1/sqrt({rounded}) is read as 1/sqrt({chosen}); "
                              f"{', '.join(others)} also equal {rounded}")
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
        free += [name for name in self.atomic if name in needed]
        if free:
            lines.append("dim " + ", ".join(free))
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


def spec_name(name: str) -> str:
    """A parameter's name as a dim of the spec: a reserved word or builtin gets a ``_``."""
    from ..builtins import BUILTINS

    reserved = {"dim", "constraint", "input", "param", "output", "assert", "bool", "inf",
                "row", "col", "true", "false", "True", "False"}
    return f"{name}_" if name in reserved or name in BUILTINS else name


def from_chosen(chosen: Chosen, rename: dict[str, str]) -> Dims:
    """The dims of sizes the tool chose (``rename``: ``--init n_head=H``)."""
    rename = {**{n: spec_name(n) for n in (*chosen.atomic, *chosen.derived)}, **rename}
    dims = Dims()
    for name, prime in chosen.atomic.items():
        dims.atomic[rename.get(name, name)] = prime
    for name, parts in chosen.derived.items():
        factor = math.prod(int(p) for p in parts if p.isdigit())
        dims.derived[rename.get(name, name)] = (
            factor, tuple(rename.get(p, p) for p in parts if not p.isdigit()))
    return dims


def from_given(named: dict[str, int]) -> Dims:
    """The dims of sizes the user gave (a factory's module attributes, ``n_head=4``):
    a dim whose size is the product of smaller ones is derived from them; the others
    are free. Ties keep the first name."""
    dims = Dims()
    by_size = sorted(((size, name) for name, size in named.items() if size >= 2),
                     key=lambda item: item[0])
    seen_sizes: dict[int, str] = {}
    for size, name in by_size:
        name = spec_name(name)
        if size in seen_sizes:
            continue
        seen_sizes[size] = name
        found = _product_of(size, dims.atomic)
        if found is not None and len(found) > 1:
            dims.derived[name] = (1, found)
        else:
            dims.atomic[name] = size
    return dims


def _product_of(size: int, atomic: dict[str, int]) -> tuple[str, ...] | None:
    names = list(atomic)
    for count in (2, 3):
        for parts in combinations_with_replacement(names, count):
            if math.prod(atomic[p] for p in parts) == size:
                return parts
    return None
