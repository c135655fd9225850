"""PyTorch's and NumPy's spellings -> this language's builtins, from one table.

`k.transpose(-2, -1)`, `att.masked_fill(m, float('-inf'))`, `x.view(B, T, H, hs)`,
`F.softmax(att, dim=-1)`, `math.sqrt(d)`, `torch.matmul(a, b)`, `q.shape[-1]`: the parser
reads each as a :class:`nodes.Method` or :class:`nodes.Attribute`; :func:`resolve` turns
it into the builtin call (or operator, subscript, dim) it means, so that every later pass
sees only the nodes it already knows. PyTorch meanings apply to the method calls and the
`torch.` / `F.` forms; the bare builtins keep the contract's (`transpose(x, [perm])`).

Each spelling is a row of :data:`METHODS` or :data:`FUNCTIONS`: the builtin it names and
how its arguments fill the builtin's parameters (see :class:`Spelling`). A spelling that
is not supported gets SC105 with the spelling that is (:data:`UNSUPPORTED`).

A declared name wins over a namespace: with `dim F`, `F.softmax(x)` is a method of the
dim `F` (an error), not PyTorch's functional softmax.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import fields, is_dataclass, replace
from typing import Any

from ..messages import codes
from ..records import Record
from . import nodes
from ..messages.diagnostics import Diagnostic, Span

# The namespaces, by the names code imports them as; `torch.nn.functional` is `F`.
NAMESPACES = {"torch": "torch", "F": "F", "np": "np", "numpy": "np", "math": "math"}
_DOTTED = {("torch", "nn", "functional"): "F", ("torch", "linalg"): "torch", ("torch", "special"): "torch"}

# PyTorch's keywords for this language's parameters.
KEYWORDS = {"dim": "axis", "keepdim": "keepdims", "diagonal": "k", "start_dim": "start",
            "end_dim": "end"}


class Spelling(Record, frozen=True):
    """How one spelling maps onto a builtin.

    - ``builtin``: the builtin's name, or one of the forms ``"@"`` (matmul),
      ``"identity"`` (a cast: the value itself), ``"swap"`` (two axes swapped),
      ``"unsqueeze"``, ``"size"`` (a dim), ``"masked_fill"``, ``"number"``.
    - ``positional``: the builtin parameters that the positional arguments after the
      tensor fill, in order (PyTorch's `x.sum(1, True)`: axis, keepdims).
    - ``sizes``: the parameter that all positional arguments fill as one list
      (`x.view(B, T, C)` -> `reshape(x, [B, T, C])`); a single list or tuple argument
      fills it as it is.
    - ``receiver``: the tensor is the first argument (False: `torch.ones(T, T)` has none).
    """

    builtin: str
    positional: tuple[str, ...] = ()
    sizes: str | None = None
    receiver: bool = True
    written: str = ""  # the row's own spelling, filled in by the tables


_Row = tuple[str, tuple[str, ...], "str | None", bool]  # a Spelling's fields before `written`


def _row(builtin: str, *positional: str, sizes: str | None = None, receiver: bool = True) -> _Row:
    return builtin, positional, sizes, receiver


_ELEMENTWISE = ("exp", "log", "sqrt", "tanh", "sigmoid", "relu", "gelu", "abs", "cos", "sin",
                "silu", "erf", "square", "rsqrt", "softplus", "acos")
_CASTS = ("float", "double", "half", "bfloat16", "contiguous", "clone", "detach", "to",
          "type_as", "cpu", "cuda")


def _rows() -> tuple[dict[str, _Row], dict[str, _Row]]:
    """The tables' rows: the tensor methods and the namespaces' functions."""
    # `x.name(...)`: PyTorch's tensor methods.
    _METHOD_ROWS: dict[str, _Row] = {
        "transpose": _row("swap", "axis1", "axis2"),
        "swapaxes": _row("swap", "axis1", "axis2"),
        "permute": _row("transpose", sizes="perm"),
        "view": _row("reshape", sizes="shape"),
        "reshape": _row("reshape", sizes="shape"),
        "masked_fill": _row("masked_fill", "mask", "value"),
        "softmax": _row("softmax", "axis"),
        "sum": _row("sum", "axis", "keepdims"),
        "mean": _row("mean", "axis", "keepdims"),
        "amax": _row("max", "axis", "keepdims"),
        "amin": _row("min", "axis", "keepdims"),
        "max": _row("max", "axis", "keepdims"),
        "min": _row("min", "axis", "keepdims"),
        "unsqueeze": _row("unsqueeze", "axis"),
        "squeeze": _row("squeeze", "axis"),
        "repeat_interleave": _row("repeat", "repeats", "axis"),
        "matmul": _row("@", "other"),
        "bmm": _row("@", "other"),
        "mm": _row("@", "other"),
        "tril": _row("tril", "k"),
        "triu": _row("triu", "k"),
        "size": _row("size", "axis"),
        # issue 21's builtins (lang-types): PyTorch's methods for them
        "cumsum": _row("cumsum", "axis"),
        "cumprod": _row("cumprod", "axis"),
        "clamp": _row("clamp", "min", "max"),
        "clip": _row("clamp", "min", "max"),
        "all": _row("all", "axis", "keepdims"),
        "any": _row("any", "axis", "keepdims"),
        "repeat": _row("tile", sizes="reps"),
        "expand": _row("expand", sizes="shape"),
        "t": _row("transpose_2d"),
        "flatten": _row("flatten", "start", "end"),
        "long": _row("long"),
        "index_select": _row("index_select", "axis", "index"),
        "index_copy": _row("index_copy", "axis", "index", "source"),
        "scatter": _row("scatter", "axis", "index", "src"),
        "minimum": _row("minimum", "y"),
        "maximum": _row("maximum", "y"),
        "outer": _row("outer", "y"),
        "conj": _row("conj"),
        "argmax": _row("argmax", "axis", "keepdims"),
        "argmin": _row("argmin", "axis", "keepdims"),
        "argsort": _row("argsort", "axis", "descending"),
        "flip": _row("flip", "axis"),
        **{name: _row(name) for name in _ELEMENTWISE},
        **{name: _row("identity") for name in _CASTS},
    }

    # `torch.name(...)`, `F.name(...)`, `np.name(...)`, `math.name(...)`: the tensor (where
    # there is one) is the first argument.
    _FUNCTION_ROWS: dict[str, _Row] = {
        **{f"torch.{name}": _METHOD_ROWS[name] for name in (
            "transpose", "swapaxes", "permute", "reshape", "masked_fill", "softmax", "sum", "mean",
            "amax", "amin", "max", "min", "repeat_interleave", "matmul", "bmm", "mm", "tril",
            "triu", "unsqueeze", "squeeze", "t", "flatten", *_ELEMENTWISE)},
        "torch.cat": _row("concat", "axis"),
        "torch.concat": _row("concat", "axis"),
        "torch.concatenate": _row("concat", "axis"),
        "torch.stack": _row("stack", "axis"),
        "torch.where": _row("where", "x", "y"),
        "torch.einsum": _row("einsum"),
        "torch.ones": _row("ones", sizes="shape", receiver=False),
        "torch.zeros": _row("zeros", sizes="shape", receiver=False),
        "torch.arange": _row("arange", receiver=False),
        **{f"torch.{name}": _METHOD_ROWS[name] for name in (
            "cumsum", "cumprod", "clamp", "clip", "all", "any", "index_select", "index_copy",
            "scatter", "minimum", "maximum", "outer", "conj", "argmax", "argmin", "argsort",
            "flip")},
        "torch.full": _row("full", "shape", "value", receiver=False),
        "torch.ones_like": _row("ones_like"),
        "torch.zeros_like": _row("zeros_like"),
        "torch.full_like": _row("full_like", "value"),
        "torch.polar": _row("polar", "angle"),
        "torch.view_as_complex": _row("view_as_complex"),
        "torch.view_as_real": _row("view_as_real"),
        "torch.real": _row("real"),
        "torch.imag": _row("imag"),
        "np.cumsum": _row("cumsum", "axis"),
        "np.cumprod": _row("cumprod", "axis"),
        "np.minimum": _row("minimum", "y"),
        "np.maximum": _row("maximum", "y"),
        "np.clip": _row("clamp", "min", "max"),
        "np.all": _row("all", "axis", "keepdims"),
        "np.any": _row("any", "axis", "keepdims"),
        "np.take": _row("take", "indices", "axis"),
        "np.take_along_axis": _row("take_along_axis", "indices", "axis"),
        "np.tile": _row("tile", "reps"),
        "np.outer": _row("outer", "y"),
        "np.full": _row("full", "shape", "value", receiver=False),
        "np.ones_like": _row("ones_like"),
        "np.zeros_like": _row("zeros_like"),
        "np.real": _row("real"),
        "np.imag": _row("imag"),
        "np.conj": _row("conj"),
        **{f"F.{name}": _METHOD_ROWS[name] for name in (
            "softmax", "relu", "gelu", "silu", "sigmoid", "tanh", "softplus")},
        "F.dropout": _row("dropout", "p"),
        "F.elu": _row("elu", "alpha"),
        **{f"np.{name}": _row(name, "axis", "keepdims") for name in ("sum", "mean", "max", "min")},
        "np.amax": _row("max", "axis", "keepdims"),
        "np.amin": _row("min", "axis", "keepdims"),
        "np.matmul": _row("@", "other"),
        "np.transpose": _row("transpose", "perm"),
        "np.swapaxes": _row("swap", "axis1", "axis2"),
        "np.reshape": _row("reshape", "shape"),
        "np.concatenate": _row("concat", "axis"),
        "np.stack": _row("stack", "axis"),
        "np.where": _row("where", "x", "y"),
        "np.einsum": _row("einsum"),
        "np.tril": _row("tril", "k"),
        "np.triu": _row("triu", "k"),
        "np.repeat": _row("repeat", "repeats", "axis"),
        "np.ones": _row("ones", "shape", receiver=False),
        "np.zeros": _row("zeros", "shape", receiver=False),
        "np.arange": _row("arange", receiver=False),
        **{f"np.{name}": _row(name) for name in _ELEMENTWISE if name not in ("gelu", "silu", "relu",
                                                                              "sigmoid", "softplus",
                                                                              "rsqrt", "erf")},
        **{f"math.{name}": _row(name) for name in ("sqrt", "exp", "log", "tanh", "cos", "sin",
                                                     "acos")},
        "np.arccos": _row("acos"), "torch.arccos": _row("acos"),
    }
    return _METHOD_ROWS, _FUNCTION_ROWS


# The tables are made on first use: a spec without a PyTorch spelling never reads them (some
# two hundred records, ~3M instructions of every cold `verify`; issue 36). Each row is made a
# Spelling once, with its own spelling. `METHODS` and `FUNCTIONS` are read as the module's
# attributes (`__getattr__`), within the module through `_table`.
_TABLES: dict[str, dict[str, Spelling]] = {}


def _table(name: str) -> dict[str, Spelling]:
    """``METHODS``, ``FUNCTIONS``, ``_DOTTED_METHODS`` or ``_ATTRIBUTES``."""
    if not _TABLES:
        method_rows, function_rows = _rows()
        methods = {key: Spelling(*row, key) for key, row in method_rows.items()}
        _TABLES.update(
            METHODS=methods,
            FUNCTIONS={key: Spelling(*row, key) for key, row in function_rows.items()},
            # `x.name` without a call: the attributes there are.
            _ATTRIBUTES={".T": Spelling("T"), ".mT": Spelling("mT"), ".shape": Spelling("shape")},
            _DOTTED_METHODS={f".{name}": spelling for name, spelling in methods.items()})
    return _TABLES[name]


def __getattr__(name: str) -> Any:
    if name not in ("METHODS", "FUNCTIONS", "_ATTRIBUTES", "_DOTTED_METHODS"):
        raise AttributeError(name, name=name)  # (the protocol of getattr and hasattr)
    value = globals()[name] = _table(name)
    return value

# Attributes that are values: `math.pi`, `np.inf`, `x.mT`.
CONSTANTS = {"math.pi": math.pi, "math.e": math.e, "np.pi": math.pi, "np.e": math.e,
             "torch.pi": math.pi}
INFINITIES = frozenset({"math.inf", "np.inf", "torch.inf"})

# Spellings the language does not take, each with the one it does (SC105's help).
UNSUPPORTED: dict[str, str] = {
    "masked_fill_": "x = x.masked_fill(mask, value)",
    "squeeze": "x.squeeze(dim)",
    "F.scaled_dot_product_attention": "softmax(q @ k.T / sqrt(d)) @ v",
    "torch.finfo": "-inf",
    "F.layer_norm": "layernorm(x)",
}



class Resolved(Record):
    statements: list[nodes.Stmt]
    diagnostics: list[Diagnostic]


def resolve(statements: list[nodes.Stmt], declared: frozenset[str],
            dims: frozenset[str] = frozenset(),
            plain: dict[int, nodes.Stmt] | None = None) -> Resolved:
    """Every PyTorch spelling in ``statements`` as the nodes it means. ``declared``: the
    names the spec defines (they win over a namespace). Statements without one are
    returned as they are (the same objects).

    ``plain``, kept by an editor's document between checks: the statements found to hold
    no spelling, by id (each held, so its id stays its own). A statement still there is
    not walked again (its tree is the same object, and a tree is never edited, only
    moved); on return it holds this call's such statements."""
    resolver = _Resolver(declared, dims)
    out: list[nodes.Stmt] = []
    known = dict(plain) if plain else {}
    if plain is not None:
        plain.clear()
    for statement in statements:
        if isinstance(statement, nodes.Unpack):
            out += resolver.unpack(statement)
        elif plain is not None and (known.get(id(statement)) is statement
                                    or not _has_spelling(statement)):
            plain[id(statement)] = statement
            out.append(statement)
        else:
            out.append(resolver.statement(statement))
    return Resolved(out, resolver.diagnostics)


class _Resolver:
    def __init__(self, declared: frozenset[str], dims: frozenset[str]) -> None:
        self.declared = declared
        self.dims = dims
        self.diagnostics: list[Diagnostic] = []

    def statement(self, statement: nodes.Stmt) -> nodes.Stmt:
        if not _has_spelling(statement):
            return statement
        return self._rebuild(statement)

    def _rebuild(self, node: Any) -> Any:
        if isinstance(node, tuple) and not isinstance(node, Span):
            items = tuple(self._rebuild(item) for item in node)
            return node if all(a is b for a, b in zip(items, node)) else items
        if not is_dataclass(node) or isinstance(node, (Span, type)):
            return node
        if isinstance(node, nodes.Method):
            return self.method(node)
        if isinstance(node, nodes.Attribute):
            return self.attribute(node)
        if isinstance(node, nodes.Subscript) and _is_shape(node.operand):
            return self.shape_index(node)
        if isinstance(node, nodes.Call) and node.func.name == "float" \
                and "float" not in self.declared:
            return self.float_call(node)
        changes = {}
        for f in fields(node):
            value = getattr(node, f.name)
            new = self._rebuild(value)
            if new is not value:
                changes[f.name] = new
        return replace(node, **changes) if changes else node

    # --- tuple assignment --------------------------------------------------------------

    def unpack(self, statement: nodes.Unpack) -> list[nodes.Stmt]:
        """`q, k, v = <parts>`: one definition per target (`_` defines nothing)."""
        parts = self.parts(statement.value, len(statement.targets))
        if parts is None:
            return [nodes.Broken(tuple(t.name for t in statement.targets), False, statement.span,
                                 tuple(nodes.names_in(statement.value)))]
        out: list[nodes.Stmt] = []
        for target, part in zip(statement.targets, parts):
            if part is not None:
                out.append(nodes.Define(target, None, part, statement.span))
            elif target.name != "_":
                self.diagnostics.append(codes.CALL_ARGS.diag(
                    target.span, detail=codes.detail("indices_unsupported")))
                out.append(nodes.Broken((target.name,), False, target.span))
        return out

    def parts(self, value: nodes.Expr, count: int) -> list[nodes.Expr | None] | None:
        """The ``count`` parts of a split, chunk, unbind, max or tuple, or None after
        reporting why it cannot be unpacked so."""
        if isinstance(value, nodes.ListExpr):
            if len(value.items) == count:
                return [self._rebuild(item) for item in value.items]
            return self._cannot_unpack(value, count)
        shape = _unpacked_shape(value, count)
        if shape is not None:
            return shape
        if isinstance(value, nodes.Method):
            space = self.namespace(value.receiver)
            if space is not None:
                if not value.args:
                    return self._cannot_unpack(value, count)
                how = f"{space}.{value.name.name}"
                x, args = value.args[0], value.args[1:]
            else:
                how, x, args = f"x.{value.name.name}", value.receiver, value.args
        elif isinstance(value, nodes.Call) and value.func.name in _BARE_PARTS \
                and value.func.name not in self.declared and value.args:
            how, x, args = value.func.name, value.args[0], value.args[1:]
        else:
            return self._cannot_unpack(value, count)
        kind = _PARTS.get(how)
        if kind is None:
            return self._cannot_unpack(value, count)
        x = self._rebuild(x)
        options = {_PART_KEYWORDS.get(k.name.name, k.name.name): self._rebuild(k.value)
                   for k in value.keywords}
        positional = [self._rebuild(a) for a in args]
        names = ("axis",) if kind in ("unbind", "max") else ("n", "axis")
        for name, arg in zip(names, positional):
            options.setdefault(name, arg)
        if len(positional) > len(names) or any(k not in (*names, "keepdims") for k in options):
            return self._cannot_unpack(value, count)
        return _PART_BUILDERS[kind](self, value, x, options, count)

    def _cannot_unpack(self, value: nodes.Expr, count: int) -> None:
        self.diagnostics.append(codes.CALL_ARGS.diag(
            value.span, detail=codes.detail("cannot_unpack", count=count),
            help=[codes.help_text("spelling_instead", spelling="q, k, v = split(x, 3, axis=-1)")]))
        return None

    # --- the forms --------------------------------------------------------------------

    def namespace(self, node: nodes.Expr) -> str | None:
        """`torch`, `F`, `np`, `math` (or `torch.nn.functional`) where ``node`` names one
        that the spec does not declare."""
        path: list[str] = []
        while isinstance(node, nodes.Attribute):
            path.insert(0, node.name.name)
            node = node.receiver
        if not isinstance(node, nodes.Name) or node.name in self.declared:
            return None
        path.insert(0, node.name)
        if len(path) == 1:
            return NAMESPACES.get(path[0])
        return _DOTTED.get(tuple(path))

    def method(self, node: nodes.Method) -> nodes.Expr:
        space = self.namespace(node.receiver)
        cast = space is None and node.name.name in _CASTS
        # A cast's arguments are dtypes and devices (`x.to(torch.float32)`): not values.
        args = node.args if cast else tuple(self._rebuild(a) for a in node.args)
        keywords = node.keywords if cast else tuple(self._rebuild(k) for k in node.keywords)
        if space is not None:
            written = f"{space}.{node.name.name}"
            spelling = _table("FUNCTIONS").get(written)
            if spelling is None:
                return self._unsupported(node, written, _table("FUNCTIONS"))
            if spelling.receiver:
                if not args:
                    return self._unsupported(node, written, _table("FUNCTIONS"))
                if written in ("torch.max", "torch.min") and len(args) == 2 \
                        and not _is_int(args[1]):  # of two tensors: elementwise
                    spelling = _table("FUNCTIONS")[
                        written.replace("max", "maximum").replace("min", "minimum")]
                return self.apply(spelling, node, args[0], args[1:], keywords)
            return self.apply(spelling, node, None, args, keywords)
        if self.namespace(node.receiver) is None and _bare_namespace(node.receiver, self.declared):
            return self._unsupported(node, f"{_bare_namespace(node.receiver, self.declared)}."
                                     f"{node.name.name}", _table("FUNCTIONS"))
        if isinstance(node.receiver, nodes.Name) and node.receiver.name in self.dims:
            # `F.softmax(x)` with `dim F`: the dim wins, and a dim has no methods.
            self.diagnostics.append(codes.WRONG_KIND.diag(
                node.receiver.span, name=node.receiver.name, actual=codes.detail("noun_dim"),
                expected=codes.detail("noun_tensor")))
            return _unresolved(node)
        spelling = _table("METHODS").get(node.name.name)
        receiver = self._rebuild(node.receiver)
        if spelling is None:
            return self._unsupported(node, f".{node.name.name}", _table("_DOTTED_METHODS"))
        return self.apply(spelling, node, receiver, args, keywords)

    def apply(self, spelling: Spelling, node: nodes.Method, x: nodes.Expr | None,
              args: tuple[nodes.Expr, ...], keywords: tuple[nodes.Keyword, ...]) -> nodes.Expr:
        form = _FORMS.get(spelling.builtin)
        if form is not None:
            result = form(self, spelling, node, x, args, keywords)
            if result is not None:
                return result
            return self._unsupported(node, spelling.written, {}, None)
        named: list[nodes.Keyword] = []
        positional: list[nodes.Expr] = [] if x is None else [x]
        if spelling.sizes is not None:
            named.append(_keyword(spelling.sizes, _as_list(args, node.span), node.span))
        elif spelling.positional:
            for param, arg in zip(spelling.positional, args):
                named.append(_keyword(param, arg, arg.span))
            if len(args) > len(spelling.positional):
                return self._unsupported(node, spelling.written, {}, None)
        else:
            positional += list(args)
        for keyword in keywords:
            word = KEYWORDS.get(keyword.name.name, keyword.name.name)
            named.append(nodes.Keyword(nodes.Ident(word, keyword.name.span), keyword.value,
                                       keyword.span, keyword.depth))
        func = nodes.Ident(spelling.builtin, node.name.span)
        items = [*positional, *(k.value for k in named)]
        return nodes.Call(func, tuple(positional), tuple(named), node.span,
                          1 + max((i.depth for i in items), default=0))

    def attribute(self, node: nodes.Attribute) -> nodes.Expr:
        space = self.namespace(node.receiver)
        if space is not None:
            written = f"{space}.{node.name.name}"
            if written in CONSTANTS:
                return nodes.Decimal(CONSTANTS[written], repr(CONSTANTS[written]), node.span)
            if written in INFINITIES:
                return nodes.Inf(node.span)
            return self._unsupported(node, written, {})
        if node.name.name == "mT":
            return nodes.Transpose(self._rebuild(node.receiver), node.span, node.depth)
        if node.name.name == "values" and isinstance(node.receiver, nodes.Method) \
                and node.receiver.name.name in ("max", "min"):
            return self.method(node.receiver)  # `x.max(dim).values`: the values
        help_text = "x.shape[i]" if node.name.name == "shape" else None
        return self._unsupported(node, f".{node.name.name}", _table("_ATTRIBUTES"), help_text)

    def shape_index(self, node: nodes.Subscript) -> nodes.Expr:
        """`x.shape[i]`: the size of axis i, a dim."""
        assert isinstance(node.operand, nodes.Attribute)
        tensor = node.operand.receiver
        axis = _int(node.indices[0]) if len(node.indices) == 1 else None
        if not isinstance(tensor, nodes.Name) or axis is None:
            return self._unsupported(node, "shape[...]", {}, "x.shape[-1]")
        return nodes.ShapeOf(_source_name(tensor, axis, "shape"), node.span, 1, tensor, axis)

    def float_call(self, node: nodes.Call) -> nodes.Expr:
        """`float('-inf')`, `float('inf')`: the number."""
        if len(node.args) == 1 and isinstance(node.args[0], nodes.String):
            text = node.args[0].value.strip().lower()
            if text in ("inf", "+inf", "infinity"):
                return nodes.Inf(node.span)
            if text in ("-inf", "-infinity"):
                return nodes.Unary("-", nodes.Inf(node.span), node.span, 2)
        return self._unsupported(node, "float", {}, "-inf")

    def _unsupported(self, node: nodes.Expr, written: str, table: dict[str, Spelling],
                     instead: str | None = None) -> nodes.Expr:
        """SC105 with the spelling that is supported; the node is left unknown."""
        instead = instead or UNSUPPORTED.get(written) or UNSUPPORTED.get(written.split(".")[-1])
        if instead is None and written in _table("_DOTTED_METHODS"):
            instead = f"x{written}(...)"  # a method written as an attribute (`x.float`)
        helps: list[str] = []
        if instead:
            helps.append(codes.help_text("spelling_instead", spelling=instead))
        elif not _has_own_meaning(written):  # a misspelling: the nearest spelling is meant
            import difflib  # only for a spelling that is wrong: not on every start

            close = difflib.get_close_matches(written, list(table), n=1)
            if close:
                helps.append(codes.help_text("did_you_mean", name=close[0]))
        span = node.name.span if isinstance(node, (nodes.Method, nodes.Attribute)) else node.span
        self.diagnostics.append(codes.NOT_CALLABLE.diag(span, name=written, help=helps))
        return _unresolved(node)


def _has_own_meaning(written: str) -> bool:
    """Whether PyTorch or NumPy has ``written`` (`.flatten`, `torch.rot90`): then a look-alike
    of the table (`.float`) means something else, and no did-you-mean is offered."""
    from . import pytorch_names as known  # only for a spelling the table lacks

    space, _, name = written.rpartition(".")
    names = {"": known.TENSOR_METHODS, "torch": known.TORCH_FUNCTIONS, "F": known.F_FUNCTIONS,
             "np": known.NUMPY_FUNCTIONS}.get(space, frozenset())
    return name in names


_UNRESOLVED = "<unsupported>"  # a call the checker reports nothing more about


def _unresolved(node: nodes.Expr) -> nodes.Call:
    """What stands for a spelling already reported: unknown, and the names in it used."""
    return nodes.Call(nodes.Ident(_UNRESOLVED, node.span), (node,), (), node.span, node.depth)


# --- the forms that are not one builtin call -------------------------------------------

Form = Callable[[_Resolver, Spelling, nodes.Method, "nodes.Expr | None",
                 tuple[nodes.Expr, ...], tuple[nodes.Keyword, ...]], "nodes.Expr | None"]


def _matmul(r: _Resolver, s: Spelling, node: nodes.Method, x: nodes.Expr | None,
            args: tuple[nodes.Expr, ...], keywords: tuple[nodes.Keyword, ...]) -> nodes.Expr | None:
    if x is None or len(args) != 1 or keywords:
        return None
    return nodes.BinOp("@", _paren(x), _paren(args[0]), node.span, node.name.span,
                       1 + max(x.depth, args[0].depth))


def _identity(r: _Resolver, s: Spelling, node: nodes.Method, x: nodes.Expr | None,
              args: tuple[nodes.Expr, ...], keywords: tuple[nodes.Keyword, ...]) -> nodes.Expr | None:
    if x is None:
        return None
    return nodes.Paren(x, node.span, 1 + x.depth)


def _swap(r: _Resolver, s: Spelling, node: nodes.Method, x: nodes.Expr | None,
          args: tuple[nodes.Expr, ...], keywords: tuple[nodes.Keyword, ...]) -> nodes.Expr | None:
    """`x.transpose(a, b)` swaps two axes: the last two as `.T`, any two as `swapaxes`."""
    values = list(args) + [k.value for k in keywords if k.name.name in ("dim0", "dim1", "axis1",
                                                                       "axis2")]
    if x is None or len(values) != 2:
        return None
    axes = [_int(v) for v in values]
    if axes[0] is None or axes[1] is None:
        return None
    if sorted(axes) == [-2, -1]:  # type: ignore[type-var]
        return nodes.Transpose(_paren(x), node.span, 1 + x.depth)
    return nodes.Call(nodes.Ident("swapaxes", node.name.span), (x,),
                      (_keyword("axis1", values[0], values[0].span),
                       _keyword("axis2", values[1], values[1].span)), node.span, 1 + x.depth)


def _unsqueeze(r: _Resolver, s: Spelling, node: nodes.Method, x: nodes.Expr | None,
               args: tuple[nodes.Expr, ...], keywords: tuple[nodes.Keyword, ...]) -> nodes.Expr | None:
    """`x.unsqueeze(a)` is `x[:, ..., None]` with the new axis at a."""
    values = list(args) + [k.value for k in keywords if k.name.name == "dim"]
    axis = _int(values[0]) if len(values) == 1 else None
    if x is None or axis is None:
        return None
    span = node.span
    whole = nodes.Slice(None, None, None, span)
    new = nodes.NewAxis(span)
    if axis >= 0:
        indices: tuple[nodes.Index, ...] = (*(whole,) * axis, new, nodes.EllipsisIndex(span))
    else:
        indices = (nodes.EllipsisIndex(span), new, *(whole,) * (-axis - 1))
    return nodes.Subscript(_paren(x), indices, span, node.name.span, 1 + x.depth)


def _squeeze(r: _Resolver, s: Spelling, node: nodes.Method, x: nodes.Expr | None,
             args: tuple[nodes.Expr, ...], keywords: tuple[nodes.Keyword, ...]) -> nodes.Expr | None:
    """`x.squeeze(a)`: axis a, which must have size 1, taken away:
    `section(x, 0, 1, axis=a, size=1)[..., 0, ...]` (SC340 where it is not 1)."""
    values = list(args) + [k.value for k in keywords if k.name.name == "dim"]
    axis = _int(values[0]) if len(values) == 1 and len(keywords) <= 1 else None
    if x is None or axis is None:
        return None
    span = node.span
    literal = nodes.Integer(axis, str(axis), span) if axis >= 0 else \
        nodes.Unary("-", nodes.Integer(-axis, str(-axis), span), span, 2)
    zero, one = nodes.Integer(0, "0", span), nodes.Integer(1, "1", span)
    checked = nodes.Call(nodes.Ident("section", node.name.span), (x, zero, one),
                         (_keyword("axis", literal, span), _keyword("size", one, span)),
                         span, 1 + x.depth)
    whole = nodes.Slice(None, None, None, span)
    if axis >= 0:
        indices: tuple[nodes.Index, ...] = (*(whole,) * axis, zero)
    else:
        indices = (nodes.EllipsisIndex(span), zero, *(whole,) * (-axis - 1))
    return nodes.Subscript(checked, indices, span, node.name.span, 2 + x.depth)


def _masked_fill(r: _Resolver, s: Spelling, node: nodes.Method, x: nodes.Expr | None,
                 args: tuple[nodes.Expr, ...], keywords: tuple[nodes.Keyword, ...]) -> nodes.Expr | None:
    """`x.masked_fill(m, v)`: v where m is true, x elsewhere (`where(m, v, x)`)."""
    values = list(args) + [k.value for k in keywords]
    if x is None or len(values) != 2:
        return None
    mask, fill = values
    return nodes.Call(nodes.Ident("where", node.name.span), (mask, fill, x), (), node.span,
                      1 + max(mask.depth, fill.depth, x.depth))


def _size(r: _Resolver, s: Spelling, node: nodes.Method, x: nodes.Expr | None,
          args: tuple[nodes.Expr, ...], keywords: tuple[nodes.Keyword, ...]) -> nodes.Expr | None:
    """`x.size(i)`: the size of axis i, a dim."""
    values = list(args) + [k.value for k in keywords if k.name.name == "dim"]
    axis = _int(values[0]) if len(values) == 1 else None
    if not isinstance(x, nodes.Name) or axis is None:
        return None
    return nodes.ShapeOf(_source_name(x, axis, "size"), node.span, 1, x, axis)


# --- the parts of a tuple assignment -------------------------------------------------

# How each spelling splits: NumPy's and `chunk`'s n equal sections, PyTorch's parts of a
# size, `unbind`'s parts of size 1 without the axis, `max`'s (values, indices).
_PARTS = {
    "split": "sections", "np.split": "sections", "chunk": "sections", "x.chunk": "sections",
    "torch.chunk": "sections", "np.array_split": "sections",
    "x.split": "size", "torch.split": "size",
    "x.unbind": "unbind", "torch.unbind": "unbind", "unbind": "unbind",
    "x.max": "max", "torch.max": "max", "x.min": "max", "torch.min": "max",
}
_BARE_PARTS = frozenset({"split", "chunk", "unbind"})
_PART_KEYWORDS = {"dim": "axis", "chunks": "n", "indices_or_sections": "n",
                  "split_size_or_sections": "n", "sections": "n", "keepdim": "keepdims"}


def _unpacked_shape(value: nodes.Expr, count: int) -> list[nodes.Expr | None] | None:
    """`B, T, C = x.shape` or `= x.size()`: one size per name, the tensor's rank checked to
    be the number of names (None where ``value`` is neither)."""
    if isinstance(value, nodes.Attribute) and value.name.name == "shape":
        how = "shape"
    elif isinstance(value, nodes.Method) and value.name.name == "size" and not value.args \
            and not value.keywords:
        how = "size"
    else:
        return None
    tensor = value.receiver
    if not isinstance(tensor, nodes.Name) or isinstance(tensor, nodes.ShapeOf):
        return None
    return [nodes.ShapeOf(_source_name(tensor, axis, how), value.span, 1, tensor, axis, count)
            for axis in range(count)]


def _section(node: nodes.Expr, x: nodes.Expr, index: int, sections: nodes.Expr,
             axis: nodes.Expr | None, size: nodes.Expr | None) -> nodes.Call:
    keywords = [_keyword("axis", axis, axis.span)] if axis is not None else []
    if size is not None:
        keywords.append(_keyword("size", size, size.span))
    args = (x, nodes.Integer(index, str(index), node.span), sections)
    return nodes.Call(nodes.Ident("section", node.span), args, tuple(keywords), node.span,
                      1 + max(x.depth, sections.depth))


def _sections(r: _Resolver, node: nodes.Expr, x: nodes.Expr, options: dict[str, nodes.Expr],
              count: int) -> list[nodes.Expr | None] | None:
    sections = options.get("n")
    if sections is None or isinstance(sections, nodes.ListExpr):
        return r._cannot_unpack(node, count)
    literal = _int(sections)
    if literal is not None and literal != count:
        return r._cannot_unpack(node, count)
    return [_section(node, x, i, sections, options.get("axis"), None) for i in range(count)]


def _sized(r: _Resolver, node: nodes.Expr, x: nodes.Expr, options: dict[str, nodes.Expr],
           count: int) -> list[nodes.Expr | None] | None:
    size = options.get("n")
    if isinstance(size, nodes.ListExpr):
        return _listed(r, node, x, size, options.get("axis"), count)
    if size is None:
        return r._cannot_unpack(node, count)
    sections = nodes.Integer(count, str(count), node.span)
    return [_section(node, x, i, sections, options.get("axis"), size) for i in range(count)]


def _listed(r: _Resolver, node: nodes.Expr, x: nodes.Expr, sizes: nodes.ListExpr,
            axis_node: nodes.Expr | None, count: int) -> list[nodes.Expr | None] | None:
    """`a, b, c = x.split([s0, s1, s2], dim)`: consecutive slices of those sizes along the
    axis, of `section(x, 0, 1, axis=a, size=s0 + s1 + s2)` (x itself, its axis checked to
    be the total, as PyTorch requires)."""
    axis = 0 if axis_node is None else _int(axis_node)
    if axis is None or len(sizes.items) != count:
        return r._cannot_unpack(node, count)
    span = node.span
    total = _sum(sizes.items, span)
    axis_literal = nodes.Integer(axis, str(axis), span) if axis >= 0 else \
        nodes.Unary("-", nodes.Integer(-axis, str(-axis), span), span, 2)
    zero, one = nodes.Integer(0, "0", span), nodes.Integer(1, "1", span)
    checked = nodes.Call(nodes.Ident("section", span), (x, zero, one),
                         (_keyword("axis", axis_literal, span), _keyword("size", total, span)),
                         span, 1 + max(x.depth, total.depth))
    whole = nodes.Slice(None, None, None, span)
    parts: list[nodes.Expr | None] = []
    for i in range(count):
        start = _sum(sizes.items[:i], span) if i else None
        stop = _sum(sizes.items[:i + 1], span)
        part = nodes.Slice(start, stop, None, span, 1 + stop.depth)
        if axis >= 0:
            indices: tuple[nodes.Index, ...] = (*(whole,) * axis, part)
        else:
            indices = (nodes.EllipsisIndex(span), part, *(whole,) * (-axis - 1))
        parts.append(nodes.Subscript(checked, indices, span, span, 1 + max(checked.depth,
                                                                          part.depth)))
    return parts


def _sum(items: tuple[nodes.Expr, ...], span: Span) -> nodes.Expr:
    """`(a) + (b) + ...` of the items."""
    total = _paren(items[0])
    for item in items[1:]:
        total = nodes.BinOp("+", total, _paren(item), span, span,
                            1 + max(total.depth, item.depth))
    return total


def _unbind(r: _Resolver, node: nodes.Expr, x: nodes.Expr, options: dict[str, nodes.Expr],
            count: int) -> list[nodes.Expr | None] | None:
    axis_node = options.get("axis")
    axis = 0 if axis_node is None else _int(axis_node)
    if axis is None:
        return r._cannot_unpack(node, count)
    sections = nodes.Integer(count, str(count), node.span)
    one = nodes.Integer(1, "1", node.span)
    axis_literal = nodes.Integer(axis, str(axis), node.span) if axis >= 0 else \
        nodes.Unary("-", nodes.Integer(-axis, str(-axis), node.span), node.span, 2)
    whole = nodes.Slice(None, None, None, node.span)
    zero = nodes.Integer(0, "0", node.span)
    if axis >= 0:
        indices: tuple[nodes.Index, ...] = (*(whole,) * axis, zero)
    else:
        indices = (nodes.EllipsisIndex(node.span), zero, *(whole,) * (-axis - 1))
    return [nodes.Subscript(_section(node, x, i, sections, axis_literal, one), indices,
                            node.span, node.span, 2 + x.depth) for i in range(count)]


def _values_indices(r: _Resolver, node: nodes.Expr, x: nodes.Expr,
                    options: dict[str, nodes.Expr], count: int) -> list[nodes.Expr | None] | None:
    """`values, indices = x.max(dim)`: the values; the indices (integers) are not a tensor
    this language has, so only `_` may take them."""
    if count != 2 or "axis" not in options:
        return r._cannot_unpack(node, count)
    name = node.name.name if isinstance(node, nodes.Method) else "max"
    keywords = tuple(_keyword(k, v, v.span) for k, v in options.items())
    values = nodes.Call(nodes.Ident("min" if name == "min" else "max", node.span), (x,),
                        keywords, node.span, 1 + x.depth)
    return [values, None]


_PART_BUILDERS = {"sections": _sections, "size": _sized, "unbind": _unbind,
                  "max": _values_indices}


_FORMS: dict[str, Form] = {
    "@": _matmul, "identity": _identity, "swap": _swap, "unsqueeze": _unsqueeze,
    "squeeze": _squeeze,
    "masked_fill": _masked_fill, "size": _size,
}


# --- helpers ------------------------------------------------------------------------


def has_spelling(node: object) -> bool:
    """Does the statement hold a PyTorch spelling (a method, an attribute, `float(...)`)?"""
    return _has_spelling(node)


def _has_spelling(node: object) -> bool:
    stack: list[object] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (nodes.Method, nodes.Attribute)):
            return True
        if isinstance(current, nodes.Call) and current.func.name == "float":
            return True
        if isinstance(current, tuple) and not isinstance(current, Span):
            stack.extend(current)
        elif not isinstance(current, Span):
            stack.extend(getattr(current, name) for name in nodes.field_names(type(current)))
    return False


def _bare_namespace(node: nodes.Expr, declared: frozenset[str]) -> str | None:
    """The namespace of a dotted path that is not one we know (`torch.nn.init`)."""
    while isinstance(node, nodes.Attribute):
        node = node.receiver
    if isinstance(node, nodes.Name) and node.name in NAMESPACES and node.name not in declared:
        return node.name
    return None


def _is_shape(node: nodes.Expr) -> bool:
    return isinstance(node, nodes.Attribute) and node.name.name == "shape"


def _int(node: nodes.Expr) -> int | None:
    if isinstance(node, nodes.Integer):
        return node.value
    if isinstance(node, nodes.Unary) and node.op in "+-" and isinstance(node.operand, nodes.Integer):
        return -node.operand.value if node.op == "-" else node.operand.value
    return None


def _is_int(node: nodes.Expr) -> bool:
    return _int(node) is not None


def _source_name(tensor: nodes.Name, axis: int, how: str) -> str:
    return f"{tensor.name}.shape[{axis}]" if how == "shape" else f"{tensor.name}.size({axis})"


def _keyword(name: str, value: nodes.Expr, span: Span) -> nodes.Keyword:
    return nodes.Keyword(nodes.Ident(name, span), value, span, value.depth)


def _as_list(args: Iterable[nodes.Expr], span: Span) -> nodes.Expr:
    """`x.view(B, T, C)`'s sizes as one list; `x.view((B, T, C))` as it is."""
    items = tuple(args)
    if len(items) == 1 and isinstance(items[0], nodes.ListExpr):
        return items[0]
    return nodes.ListExpr(items, span, 1 + max((i.depth for i in items), default=0))


def _paren(node: nodes.Expr) -> nodes.Expr:
    """Parenthesised where it is an operator expression, so that a message quoting it reads
    as the grouping it has."""
    return node


__all__ = ["FUNCTIONS", "METHODS", "Resolved", "Spelling", "UNSUPPORTED", "resolve"]
