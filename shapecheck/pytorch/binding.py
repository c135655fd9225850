"""The binding of a real PyTorch module to a spec: its state, its arguments, its outputs.

One entry point per job, each reading what the checked program declares:

- :func:`decide` matches every spec name that is not passed as an argument (params,
  and inputs held as state: a KV-cache buffer, a fixed matrix) to a parameter, buffer
  or tensor attribute of the module — by a documented name normalisation
  (``W_Q``, ``wq``, ``q_proj.weight``, ``query.weight`` all mean *the query weight*),
  by shape, and with the orientation the layer type stores (``nn.Linear`` and other
  ``*Linear`` layers ``[out, in]``, GPT-2's ``Conv1D`` ``[in, out]``); a packed
  projection (``c_attn``, ``in_proj_weight``, ``qkv_proj``, ``wkv``) is sliced along its
  packed axis in the spec's order and widths. ``--param SPEC=KEY`` (or ``KEY.T``) decides
  one by hand. The matching is decided once, at the first binding, and reported; a name
  that cannot be matched is a :class:`BindingError` listing the candidates and the flag.
- :meth:`Matching.write` writes the spec's values into the matched tensors in place (a slice of
  a packed tensor is a view into it), so each binding runs with the spec's fresh weights
  and never with uninitialised storage.
- :func:`parse_expression` / :func:`evaluate` read ``--arg``/``--init`` values (spec names,
  dims, literals, tuples, arithmetic on dims) without evaluating any Python.
- :func:`convert_mask` passes a spec's bool mask in the module's convention.

torch is imported only inside the functions that touch tensors.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..i18n import Table

MESSAGES: Table = Table("binding", "MESSAGES", {
    "no_match": "the spec's {kind} `{name}` {shape} matches no tensor of the module "
    "({candidates}); name one with --param {name}=KEY (KEY.T for its transpose)",
    "ambiguous": "the spec's {kind} `{name}` {shape} could be any of {candidates}; "
    "choose with --param {name}={first}",
    "no_key": "--param {name}={key}: the module has no parameter, buffer or tensor attribute "
    "`{key}` (it has: {keys})",
    "key_shape": "--param {name}={key}: `{key}` has shape {got}, but the spec's `{name}` is "
    "{expected} here",
    "write_shape": "`{key}` has shape {got} at {bindings}, but the spec's `{name}` needs {expected} "
    "there (an instance keeps the sizes it was built with: fix them with --dim)",
    "candidates_none": "it has no tensors",
    "candidate": "`{key}` {shape}",
    "candidate_layout": "`{key}` {shape}, which {layer} stores as {stored} while the spec "
    "uses `{name}` as {used}",
    "how_direct": "{name} -> {key}",
    "how_transposed": "{name} -> {key}.T ({layer} stores [out, in])",
    "how_transposed_plain": "{name} -> {key}.T",
    "how_packed": "{name} -> {key}[{slice}]{transpose} (packed: {members})",
    "how_by_shape": " (by shape)",
    "unbound": "(kept as the module built them, no spec param: {keys})",
    "how_by_hand": " (--param)",
    "kind_param": "param",
    "kind_input": "input",
    "expression": "`{text}` is not a value conformance can pass: use spec names, dims, numbers, "
    "True/False/None, strings and tuples (`(cos, sin)`)",
    "expression_name": "`{name}` in `{text}` is not a {what} of the spec (they are: {names})",
    "what_names": "input, param or dim",
    "what_dims": "dim",
    "mask_kind": "--mask {name}={convention}: use one of {choices}",
})

MASK_CONVENTIONS = ("additive", "additive-min", "keep", "drop")
TRANSPOSED_LAYERS = ("Linear",)  # a class name containing it stores [out, in]
PLAIN_LAYERS = ("Conv1D",)  # GPT-2's: stores [in, out], computes x @ weight + bias


class BindingError(Exception):
    """A spec name without a module tensor, an ambiguous match, a bad ``--param`` or value."""


def message(template: str, /, **fields: object) -> str:
    return MESSAGES[template].format(**fields)


# --- names: what a spec name or a module key means ------------------------------------------

# folded spelling -> role; a packed role lists its members in the order they are packed
ROLES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("q", "query", "queries", "wq", "qs"), ("q",)),
    **dict.fromkeys(("k", "key", "keys", "wk", "ks"), ("k",)),
    **dict.fromkeys(("v", "value", "values", "wv", "vs"), ("v",)),
    **dict.fromkeys(("o", "out", "output", "wo", "dense", "c", "outproj", "oproj", "cproj"),
                    ("o",)),
    **dict.fromkeys(("qkv", "wqkv", "cattn", "inproj", "querykeyvalue", "attn"),
                    ("q", "k", "v")),
    **dict.fromkeys(("kv", "wkv", "keyvalue"), ("k", "v")),
}
PREFIXES = ("weight", "linear", "lin", "to", "w")
SUFFIXES = ("projection", "proj", "linear", "lin", "layer", "weight", "matrix", "mat")
BIAS_WORDS = ("bias", "b")


def fold(text: str) -> str:
    """Lower case, letters and digits only: `W_Q`, `w_q` and `Wq` fold alike."""
    return re.sub(r"[^0-9a-z]", "", text.casefold())


def _strip(word: str) -> str:
    for suffix in SUFFIXES:
        if word.endswith(suffix) and fold(word[: -len(suffix)]) in ROLES:
            return word[: -len(suffix)]
    for prefix in PREFIXES:
        if word.startswith(prefix) and word[len(prefix):] in ROLES:
            return word[len(prefix):]
    return word


def spec_meaning(name: str) -> tuple[tuple[str, ...] | None, str]:
    """(role, kind) of a spec name: ``W_Q`` -> (q, weight), ``b_K``/``k_bias`` -> (k, bias)."""
    word = fold(name)
    kind = "weight"
    for bias in BIAS_WORDS:
        if word.startswith(bias) and _strip(word[len(bias):]) in ROLES:
            word, kind = word[len(bias):], "bias"
            break
        if word.endswith(bias) and _strip(word[: -len(bias)]) in ROLES:
            word, kind = word[: -len(bias)], "bias"
            break
    return ROLES.get(_strip(word)), kind


def key_meaning(key: str) -> tuple[tuple[str, ...] | None, str]:
    """(role, kind) of a module key: ``self_attn.q_proj.weight`` -> (q, weight),
    ``in_proj_weight`` -> (q k v, weight), ``c_attn.bias`` -> (q k v, bias)."""
    parts = key.split(".")
    leaf = parts[-1]
    if leaf in ("weight", "bias") and len(parts) > 1:
        return ROLES.get(_strip(fold(parts[-2]))), leaf
    for kind in ("weight", "bias"):
        if leaf.endswith("_" + kind):
            return ROLES.get(_strip(fold(leaf[: -len(kind) - 1]))), kind
    return spec_meaning(leaf)


# --- the module's tensors ---------------------------------------------------------------------


def tensors(module: Any) -> dict[str, Any]:
    """Every parameter, buffer and tensor attribute, by its dotted key."""
    import torch

    found: dict[str, Any] = {}
    for prefix, sub in module.named_modules():
        dotted = f"{prefix}." if prefix else ""
        for name, value in [*sub._parameters.items(), *sub._buffers.items(), *vars(sub).items()]:
            if isinstance(value, torch.Tensor) and f"{dotted}{name}" not in found:
                found[f"{dotted}{name}"] = value
    return found


def lookup(module: Any, key: str) -> Any:
    owner_path, _, leaf = key.rpartition(".")
    owner = module.get_submodule(owner_path) if owner_path else module
    return getattr(owner, leaf)


def _layer(module: Any, key: str) -> str:
    owner_path = key.rpartition(".")[0]
    try:
        owner = module.get_submodule(owner_path) if owner_path else module
    except AttributeError:
        return ""
    return type(owner).__name__


# --- the matching -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    """Spec name ``name`` is ``key``, transposed or not; when packed, the slice of its ``axis``
    after the ``members`` packed before it, as wide as the spec's value at each binding."""

    name: str
    key: str
    transposed: bool
    axis: int | None = None
    before: tuple[str, ...] = ()  # packed: the members ahead of this one
    how: str = ""

    def target(self, module: Any, values: Mapping[str, Any]) -> Any:
        tensor = lookup(module, self.key)
        if self.axis is None:
            return tensor
        offset = sum(_shape(values[m])[-1] for m in self.before)
        return tensor.narrow(self.axis, offset, _shape(values[self.name])[-1])


@dataclass(frozen=True)
class Matching:
    """The matching, decided once: written into the module at every binding."""

    matches: tuple[Match, ...]
    unbound: tuple[str, ...] = ()  # the module's parameters no spec name is written into

    def write(self, module: Any, values: Mapping[str, Any], bindings: str) -> None:
        import torch

        with torch.no_grad():
            for match in self.matches:
                target = match.target(module, values)
                source = torch.as_tensor(values[match.name])
                if match.transposed:
                    source = source.T
                if tuple(target.shape) != tuple(source.shape):
                    raise BindingError(message(
                        "write_shape", key=match.key, got=list(target.shape), bindings=bindings,
                        name=match.name, expected=list(source.shape)))
                target.copy_(source.to(dtype=target.dtype, device=target.device))

    def lines(self) -> list[str]:
        lines = [match.how for match in self.matches]
        if self.unbound:
            lines.append(message("unbound", keys=", ".join(self.unbound)))
        return lines


def decide(module: Any, values: Mapping[str, Any], kinds: Mapping[str, str],
           overrides: Mapping[str, str], stored: frozenset[str] = frozenset()) -> Matching:
    """Match each spec name in ``values`` (name -> array at the first binding; ``kinds``:
    name -> param/input) to the module's state. ``overrides``: name -> KEY or KEY.T.
    ``stored``: the 2-D params the spec uses as ``x @ W.T`` (PyTorch's ``[out, in]``, the
    layout ``extract`` writes); the others are ``[in, out]`` (``x @ W``)."""
    state = tensors(module)
    matches: list[Match] = []
    for name, key in overrides.items():
        matches.append(_by_hand(name, key, values[name], state))
    taken = {m.key for m in matches if m.axis is None}
    pending = [n for n in values if n not in overrides]
    matches += _packed(module, pending, values, state, taken)
    taken |= {m.key for m in matches}
    for name in pending:
        if any(m.name == name for m in matches):
            continue
        match = _one(module, name, values[name], kinds.get(name, "param"), state, taken,
                     name in stored)
        matches.append(match)
        taken.add(match.key)
    order = {name: index for index, name in enumerate(values)}
    bound = {m.key for m in matches}
    unbound = tuple(key for key, _ in module.named_parameters() if key not in bound)
    return Matching(tuple(sorted(matches, key=lambda m: order.get(m.name, 0))), unbound)


def _shape(value: Any) -> tuple[int, ...]:
    return tuple(getattr(value, "shape", ()))


def _by_hand(name: str, key: str, value: Any, state: Mapping[str, Any]) -> Match:
    transposed = key.endswith(".T")
    key = key.removesuffix(".T")
    if key not in state:
        raise BindingError(message("no_key", name=name, key=key, keys=", ".join(state) or "none"))
    got = tuple(state[key].shape)
    expected = _shape(value)
    if (got[::-1] if transposed else got) != expected:
        raise BindingError(message("key_shape", name=name, key=key, got=list(got),
                                   expected=list(expected)))
    template = "how_transposed_plain" if transposed else "how_direct"
    return Match(name, key, transposed,
                 how=message(template, name=name, key=key) + message("how_by_hand"))


def _orientations(module: Any, key: str, tensor: Any, shape: tuple[int, ...],
                  stored: bool = False) -> list[bool]:
    """How ``tensor`` can hold a spec value of ``shape``: as is (False) or transposed (True),
    the layer type and the spec's use (``stored``: ``x @ W.T``) deciding where they know."""
    got = tuple(tensor.shape)
    layer = _layer(module, key)
    if len(shape) == 2 and key.endswith("weight"):
        if any(word in layer for word in TRANSPOSED_LAYERS):  # [out, in]
            return [not stored] if got == (shape if stored else shape[::-1]) else []
        if any(word in layer for word in PLAIN_LAYERS):  # [in, out]
            return [stored] if got == (shape[::-1] if stored else shape) else []
    fits = [False] if got == shape else []
    if len(shape) == 2 and got == shape[::-1] and got != shape:
        fits.append(True)
    return fits


def _one(module: Any, name: str, value: Any, kind: str, state: Mapping[str, Any],
         taken: set[str], stored: bool = False) -> Match:
    shape = _shape(value)
    role, weight_or_bias = spec_meaning(name)
    free = {k: t for k, t in state.items() if k not in taken}
    exact = [k for k in free if fold(name) in (fold(k), fold(k.removesuffix(".weight")))]
    named = [k for k in free if role is not None and key_meaning(k) == (role, weight_or_bias)]
    for pool, by_shape in ((exact, False), (named, False), (list(free), True)):
        fitting = [(k, t) for k in pool
                   for t in _orientations(module, k, free[k], shape, stored)]
        if len(fitting) == 1:
            return _match(module, name, *fitting[0], by_shape)
        if len(fitting) > 1:
            listed = ", ".join(_candidate(k, free[k]) for k, _ in fitting)
            raise BindingError(message("ambiguous", kind=message(f"kind_{kind}"), name=name,
                                       shape=list(shape), candidates=listed,
                                       first=_flag(*fitting[0])))
    listed = ", ".join(_candidate(k, t, module, name, shape, stored) for k, t in free.items()) \
        or message("candidates_none")
    raise BindingError(message("no_match", kind=message(f"kind_{kind}"), name=name,
                               shape=list(shape), candidates=listed))


def _match(module: Any, name: str, key: str, transposed: bool, by_shape: bool) -> Match:
    layer = _layer(module, key)
    if transposed:
        how = message("how_transposed", name=name, key=key, layer=layer) if any(
            word in layer for word in TRANSPOSED_LAYERS) else message(
            "how_transposed_plain", name=name, key=key)
    else:
        how = message("how_direct", name=name, key=key)
    return Match(name, key, transposed, how=how + (message("how_by_shape") if by_shape else ""))


def _candidate(key: str, tensor: Any, module: Any = None, name: str = "",
               shape: tuple[int, ...] = (), stored: bool = False) -> str:
    """A tensor the spec's value did not fit; when its layer's layout is why (its shape is
    the spec's, or the transpose, the other way round), the reason."""
    got = tuple(tensor.shape)
    layer = _layer(module, key) if module is not None else ""
    if len(shape) == 2 and key.endswith("weight") and got in (shape, shape[::-1]):
        out_in = any(word in layer for word in TRANSPOSED_LAYERS)
        if out_in or any(word in layer for word in PLAIN_LAYERS):
            used = "[out, in] (`x @ W.T`)" if stored else "[in, out] (`x @ W`)"
            return message("candidate_layout", key=key, shape=list(got), layer=layer, name=name,
                           stored="[out, in]" if out_in else "[in, out]", used=used)
    return message("candidate", key=key, shape=list(got))


def _flag(key: str, transposed: bool) -> str:
    return f"{key}.T" if transposed else key


def _packed(module: Any, pending: Sequence[str], values: Mapping[str, Any],
            state: Mapping[str, Any], taken: set[str]) -> list[Match]:
    """Spec names whose role is one member of a packed tensor (``c_attn``: Q, K, V side by
    side) and that no unpacked tensor of their own role holds: a slice each, in the packed
    order, as wide as the spec's own value."""
    by_role: dict[tuple[tuple[str, ...], str], str] = {}
    for name in pending:
        role, kind = spec_meaning(name)
        if role is not None and len(role) == 1:
            by_role.setdefault((role, kind), name)
    own = {key_meaning(k) for k in state if k not in taken}
    matches: list[Match] = []
    for key, tensor in state.items():
        role, kind = key_meaning(key)
        if key in taken or role is None or len(role) < 2:
            continue
        members = [by_role.get(((r,), kind)) for r in role]
        if any(m is None for m in members) or any(((r,), kind) in own for r in role):
            continue
        matches += _slices(key, tensor, [m for m in members if m is not None], values,
                           any(word in _layer(module, key) for word in TRANSPOSED_LAYERS))
    return matches


def _slices(key: str, tensor: Any, members: list[str], values: Mapping[str, Any],
            out_first: bool) -> list[Match]:
    """The packed axis is the one as long as the members' widths together; a ``*Linear``
    layer packs its rows (``[out, in]``), any other decides by the shapes."""
    widths = [_shape(values[m])[-1] if _shape(values[m]) else 0 for m in members]
    got = tuple(tensor.shape)
    axes = [axis for axis, size in enumerate(got) if size == sum(widths)]
    if not axes:
        return []
    axis = 0 if out_first and 0 in axes else axes[-1] if len(got) == 2 and got[-1] == sum(
        widths) and got[0] == _shape(values[members[0]])[0] else axes[0]
    transposed = len(got) == 2 and axis == 0
    other = got[1 - axis] if len(got) == 2 else None
    matches, offset = [], 0
    for member, width in zip(members, widths):
        shape = _shape(values[member])
        if other is not None and shape[0] != other:
            return []
        piece = f"{offset}:{offset + width}" if axis == 0 else f":, {offset}:{offset + width}"
        how = message("how_packed", name=member, key=key, slice=piece,
                      transpose=".T" if transposed else "", members=", ".join(members))
        matches.append(Match(member, key, transposed, axis, tuple(members[:len(matches)]), how))
        offset += width
    return matches


def instance_sizes(module: Any, axes: Mapping[str, Sequence[str | None]],
                   overrides: Mapping[str, str]) -> dict[str, int]:
    """The dims an instance was built with: for each spec name (``axes``: the dim each of
    its axes is, or None for an expression) matched to one tensor by ``--param`` or by name
    alone, the sizes of that tensor (in the spec's orientation) fix those dims."""
    state = tensors(module)
    sizes: dict[str, int] = {}
    for name, dims in axes.items():
        key = overrides.get(name)
        if key is not None:
            transposed, key = key.endswith(".T"), key.removesuffix(".T")
        else:
            role, kind = spec_meaning(name)
            named = [k for k in state if fold(name) in (fold(k), fold(k.removesuffix(".weight")))]
            named = named or [k for k in state if role is not None and key_meaning(k) == (role, kind)]
            if len(named) != 1:
                continue
            key = named[0]
            transposed = len(dims) == 2 and any(w in _layer(module, key) for w in TRANSPOSED_LAYERS)
        if key not in state or len(state[key].shape) != len(dims):
            continue
        shape = tuple(state[key].shape)
        for dim, size in zip(dims, shape[::-1] if transposed else shape):
            if dim is not None:
                sizes.setdefault(dim, size)
    return sizes


# --- argument values: --arg and --init ---------------------------------------------------------


@dataclass(frozen=True)
class Expression:
    """A parsed ``--arg``/``--init`` value: a tree of names, literals, tuples and arithmetic."""

    text: str
    tree: ast.expr

    def names(self) -> Iterator[str]:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name):
                yield node.id


ALLOWED = (ast.Expression, ast.Name, ast.Load, ast.Constant, ast.Tuple, ast.List, ast.BinOp,
           ast.UnaryOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow,
           ast.USub, ast.UAdd)


def parse_expression(text: str, known: Sequence[str], what: str = "what_names") -> Expression:
    """``(cos, sin)``, ``H*hs``, ``None``, ``0``, ``True``: parsed, never run as Python."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise BindingError(message("expression", text=text)) from None
    if not all(isinstance(node, ALLOWED) for node in ast.walk(tree)):
        raise BindingError(message("expression", text=text))
    expression = Expression(text, tree.body)
    for name in expression.names():
        if name not in known:
            raise BindingError(message("expression_name", name=name, text=text,
                                       what=message(what), names=", ".join(known)))
    return expression


def evaluate(expression: Expression, values: Mapping[str, Any]) -> Any:
    return _value(expression.tree, values)


OPERATORS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
             ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b,
             ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
             ast.Pow: lambda a, b: a ** b}


def _value(node: ast.expr, values: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_value(item, values) for item in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.UnaryOp):
        operand = _value(node.operand, values)
        return -operand if isinstance(node.op, ast.USub) else operand
    assert isinstance(node, ast.BinOp)
    result = OPERATORS[type(node.op)](_value(node.left, values), _value(node.right, values))
    if isinstance(node.op, ast.Div) and isinstance(result, float) and result.is_integer():
        return int(result)  # H*d / 2 of dims is a size
    return result


# --- masks ------------------------------------------------------------------------------------


def check_mask(name: str, convention: str) -> None:
    if convention not in MASK_CONVENTIONS:
        raise BindingError(message("mask_kind", name=name, convention=convention,
                                   choices=", ".join(MASK_CONVENTIONS)))


def convert_mask(keep: Any, convention: str, dtype: Any, table: bool = False) -> Any:
    """A spec's bool mask (true: attend) in the module's convention, lifted to 4-D:
    [N] -> [1, 1, 1, N]; [B, N] (a key-padding mask) -> [B, 1, 1, N], but a square table
    ``table`` ([N, N]: queries by keys) -> [1, 1, N, N]; [B, Nq, Nk] -> [B, 1, Nq, Nk];
    rank 4 and above as is. ``additive``: 0 and -inf in ``dtype``;
    ``additive-min``: 0 and the dtype's minimum (Hugging Face); ``keep``: the bool as is;
    ``drop``: its negation (true: masked, as ``nn.MultiheadAttention`` reads it)."""
    import torch

    keep = keep.to(torch.bool)
    if keep.dim() == 1:
        keep = keep[None, None, None, :]
    elif keep.dim() == 2:
        keep = keep[None, None] if table else keep[:, None, None, :]
    elif keep.dim() == 3:
        keep = keep[:, None, :, :]
    if convention == "keep":
        return keep
    if convention == "drop":
        return ~keep
    fill = float("-inf") if convention == "additive" else torch.finfo(dtype).min
    zeros = torch.zeros(keep.shape, dtype=dtype, device=keep.device)
    return zeros.masked_fill(~keep, fill)


__all__ = ["BindingError", "Expression", "MASK_CONVENTIONS", "Match", "Matching", "check_mask",
           "convert_mask", "decide", "evaluate", "instance_sizes", "key_meaning", "parse_expression",
           "spec_meaning", "tensors"]
