"""Lowering one statement, for every framework: the walk and the questions a row asks.

A framework's lowerer (:class:`Lowerer` with its own scalars, buffers and elementwise
form) holds two tables: ``nodes``, a function per node kind, and ``builtins``, a row per
builtin of :data:`shapecheck.check.builtins.BUILTINS`. The walk, the dispatch, constant
folding and the view of a call its row reads (:class:`Call`) are written here once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..check.builtins import BUILTINS as CHECKED, axis_index
from ..check.value_rules import axes_of
from ..check.program import CallInfo, Value
from ..syntax import nodes
from .errors import CheckerBug, message
from .pattern import Inlined, inlined
from .plan import Allocation, Closure, Frame, PlanBuilder, Thunk, evaluate_shape


class Lowerer:
    """Lowers the expression of one statement through a framework's tables."""

    nodes: ClassVar[dict[type, Callable[[Any, Any], Closure]]] = {}
    builtins: ClassVar[dict[str, Callable[[Call], Closure]]] = {}
    no_builtin: ClassVar[str] = "bug_no_builtin"  # the message when a row is missing

    def __init__(self, plan: PlanBuilder, name: str, line: int,
                 result_shape: tuple[int, ...]) -> None:
        self.plan = plan
        self.program = plan.program
        self.name = name
        self.line = line
        self.result_shape = result_shape
        self.itemsize = plan.framework.itemsize
        self.allocations: list[Allocation] = []
        self.owns_result = False  # a buffer of the result's shape was created here
        # nodes evaluated otherwise, by id: a mask or bias lowered per block of positions
        self.substitutes: Mapping[int, Any] = {}

    def lower(self, node: nodes.Expr) -> Closure:
        substitute = self.substitutes.get(id(node))
        if substitute is not None:
            if isinstance(substitute, Inlined):  # a name defined by positions: evaluated here
                return self.lower(substitute.definition)
            return self.lower_substitute(node, substitute)
        form = self.plan.fused.get(id(node))
        if form is not None:
            # a function of positions the pattern reads: the names it makes from positions
            # are never computed as statements, so a part evaluated whole inlines them too
            self.substitutes = {**inlined(form.fusable), **self.substitutes}
            return self.lower_fused(node, form)
        handler = self.nodes.get(type(node))
        if handler is None:
            raise CheckerBug(message("bug_not_value", kind=type(node).__name__, line=node.span.line))
        return handler(self, node)

    def lower_fused(self, node: nodes.Expr, form: Any) -> Closure:
        """An attention pattern in the framework's fused form."""
        raise NotImplementedError

    def lower_substitute(self, node: nodes.Expr, substitute: Any) -> Closure:
        """``node`` of a mask or bias evaluated per block (:class:`.pattern.Blockwise`): a
        position, a tensor sliced to the block, a generated mask, a lookup."""
        raise NotImplementedError

    def quiet(self) -> AbstractContextManager[Any]:
        """The context a constant is folded in (NumPy's error state)."""
        return nullcontext()

    def constant(self, value: Any) -> Closure:
        return Closure(lambda frame: value, const=True, contiguous=True)

    def fold(self, closure: Closure, *children: Closure) -> Closure:
        """Evaluate while lowering when every operand is a constant."""
        if children and all(c.const for c in children):
            with self.quiet():
                return self.constant(closure.run(Frame({})))
        return closure

    def value_of(self, node: nodes.Expr) -> Value:
        value = self.program.types.get(id(node))
        if value is None or value.shape is None:
            raise CheckerBug(message("bug_no_type", line=node.span.line))
        return value

    def shape_of(self, node: nodes.Expr) -> tuple[int, ...]:
        return evaluate_shape(self.program, self.value_of(node))

    def dim(self, dim: Any) -> int:
        value = self.program.dims.evaluate(dim)
        if value is None:
            raise CheckerBug(message("bug_unbound_shape", shape=f"[{dim}]"))
        return value

    def scalar(self, value: float | int) -> Any:
        """A number as a scalar of the run's dtype (never promoting what it meets)."""
        raise NotImplementedError

    def boolean(self, value: bool) -> Any:
        raise NotImplementedError

    def tensor_name(self, name: str) -> Closure:
        """A named tensor, read from the frame."""
        return Closure(lambda frame: frame.values[name])

    def numeric(self, node: nodes.Expr) -> Closure:
        raise NotImplementedError

    def allocates(self, node: nodes.Expr) -> None:
        """Record that ``node`` creates a buffer of its own shape."""
        self.buffer(self.shape_of(node), 1 if self.value_of(node).is_bool else self.itemsize)

    def buffer(self, shape: tuple[int, ...], itemsize: int) -> None:
        """Record a buffer this statement creates (a hidden temporary included)."""
        if shape == self.result_shape:  # most likely the buffer that becomes the tensor
            label = message("tensor_label", name=self.name)
            self.owns_result = True
        else:
            label = message("temporary_label", name=self.name, line=self.line)
        self.allocations.append(Allocation(label, shape, math.prod(shape) * itemsize))

    def elementwise(self, node: nodes.Expr, operand: Closure, apply: Callable[..., Any]) -> Closure:
        raise NotImplementedError


class NewArrays(Lowerer):
    """The lowerer of a framework that never writes an array (torch, JAX): every operation
    makes a new one, counted as a buffer unless 0-d; a bool used as numbers is cast."""

    def cast(self, value: Any) -> Any:
        """A bool array as the run's numbers."""
        raise NotImplementedError

    def allocates(self, node: nodes.Expr) -> None:
        if self.shape_of(node):  # a 0-d array is not counted
            super().allocates(node)

    def numeric(self, node: nodes.Expr) -> Closure:
        """A bool value used as numbers is read as 0 and 1 in the run's dtype (SC403)."""
        closure = self.lower(node)
        if not self.value_of(node).is_bool:
            return closure
        run, cast = closure.run, self.cast
        self.allocates(node)
        return self.fold(Closure(lambda frame: cast(run(frame))), closure)

    def elementwise(self, node: nodes.Expr, operand: Closure, apply: Callable[..., Any]) -> Closure:
        run = operand.run
        self.allocates(node)
        return self.fold(Closure(lambda frame: apply(run(frame))), operand)


# --- the node rows every framework shares ---------------------------------------------------


def lower_name(c: Lowerer, node: nodes.Name) -> Closure:
    if isinstance(node, nodes.ShapeOf):  # `x.shape[i]`: a size, which the checker resolved
        return c.constant(c.scalar(c.dim(c.value_of(node).dim)))
    if node.name not in c.program.tensors:  # a dim used as a value: a scalar
        value = c.program.dims.value_of(node.name)
        if value is None:
            raise CheckerBug(message("bug_unbound_shape", shape=f"[{node.name}]"))
        return c.constant(c.scalar(value))
    return c.tensor_name(node.name)


def lower_number(c: Lowerer, node: nodes.Integer | nodes.Decimal) -> Closure:
    return c.constant(c.scalar(node.value))


def lower_inf(c: Lowerer, node: nodes.Inf) -> Closure:
    return c.constant(c.scalar(math.inf))


def lower_boolean(c: Lowerer, node: nodes.Boolean) -> Closure:
    return c.constant(c.boolean(node.value))


def lower_paren(c: Lowerer, node: nodes.Paren) -> Closure:
    return c.lower(node.inner)


def lower_call(c: Lowerer, node: nodes.Call) -> Closure:
    """A call, through its builtin's row of the framework's table."""
    info = c.program.calls.get(id(node))
    if info is None:
        raise CheckerBug(message("bug_unresolved_call", name=node.func.name, line=node.span.line))
    implementation = c.builtins.get(info.builtin)
    if implementation is None:
        raise CheckerBug(message(c.no_builtin, name=info.builtin))
    return implementation(Call(c, node, info))


# A framework's node table is these and its own: unary, binop, transpose, subscript, update.
NODES: dict[type, Callable[[Any, Any], Closure]] = {
    nodes.Name: lower_name, nodes.ShapeOf: lower_name, nodes.Integer: lower_number,
    nodes.Decimal: lower_number, nodes.Inf: lower_inf, nodes.Boolean: lower_boolean,
    nodes.Paren: lower_paren, nodes.Call: lower_call,
}


@dataclass
class Call:
    """What a builtin's row may ask about its call."""

    c: Any  # the framework's Lowerer
    node: nodes.Call
    info: CallInfo

    def tensor(self, param: str = "x") -> Closure:
        return self.c.lower(self.info.args[param])

    def numeric(self, param: str = "x") -> Closure:
        return self.c.numeric(self.info.args[param])

    def tensors(self, param: str, numeric: bool = False) -> list[Closure]:
        items: nodes.ListExpr = self.info.args[param]
        lower = self.c.numeric if numeric else self.c.lower
        return [lower(item) for item in items.items]

    def rank(self, param: str = "x") -> int:
        argument = self.info.args[param]
        if isinstance(argument, nodes.ListExpr):
            argument = argument.items[0]
        return self.c.value_of(argument).rank

    def axis(self, param: str = "axis", of: str = "x") -> int | None:
        """``row``/``col``/negative -> a non-negative index (None: every axis)."""
        axis = self.info.args[param]
        if axis is None:
            return None
        return axis_index(axis, self.rank(of))

    def arg(self, param: str) -> Any:
        return self.info.args[param]

    def dim(self, param: str) -> int:
        return self.c.dim(self.info.args[param])

    def shape(self, param: str = "shape") -> tuple[int, ...]:
        return tuple(self.c.dim(d) for d in self.info.args[param])

    @property
    def out_shape(self) -> tuple[int, ...]:
        return self.c.shape_of(self.node)

    def allocates(self) -> None:
        self.c.allocates(self.node)

    def elementwise(self, apply: Callable[..., Any]) -> Closure:
        return self.c.elementwise(self.node, self.numeric(), apply)

    def given(self, *params: str) -> tuple[list[Closure], list[Thunk]]:
        """The optional numeric arguments that were given (the children to fold), and a thunk
        per parameter, which gives None for one not given (`clamp`'s bounds)."""
        closures = {p: self.numeric(p) for p in params if self.arg(p) is not None}
        return list(closures.values()), [closures[p].run if p in closures else _nothing
                                          for p in params]

    def fold(self, closure: Closure, *children: Closure) -> Closure:
        """Fold a constant only when it is a scalar: an array is made when the step runs, after
        the memory estimate has refused one too large to hold (`full([L ** 64], 0)`)."""
        return self.c.fold(closure, *children) if not self.out_shape else closure


Implementation = Callable[[Call], Closure]


def _nothing(frame: Frame) -> None:
    return None


def slice_word(axis: int, rank: int) -> str:
    """What a softmax normalises along ``axis`` of ``rank`` axes: a row, a column, a slice."""
    return message("what_row" if axis == rank - 1 else
                   "what_column" if axis == rank - 2 else "what_slice")


def check_sums(frame: Frame, totals: Any, name: str, line: int, what: str, axis: int,
               tolerance: float) -> None:
    """Every softmax slice's sum (``totals``, a NumPy array) is 1 within ``tolerance``, NaN
    slices excepted; the check's line goes to the frame, a violation is a bug."""
    valid = ~np.isnan(totals)
    deviation = np.abs(totals[valid] - 1.0)
    error = float(deviation.max()) if deviation.size else 0.0
    if error > tolerance:
        worst = float(totals[valid].ravel()[np.argmax(deviation)])
        raise CheckerBug(message("softmax_sum", name=name, line=line, what=what, total=worst,
                                 axis=axis))
    key = "check_softmax" if valid.all() else "check_softmax_nan"
    frame.checks[f"{name}:{line}:{axis}"] = message(key, name=name, line=line, what=what,
                                                     axis=axis, error=error)


def made(call: Call, function: Callable[..., Any], *params: str) -> Closure:
    """A new array computed from the numeric arguments ``params`` (a mask as 0 and 1, as the
    checker types it), for a framework of :class:`NewArrays`."""
    closures = [call.numeric(p) for p in params]
    runs = [c.run for c in closures]
    call.allocates()
    return call.fold(Closure(lambda frame: function(*(r(frame) for r in runs))), *closures)


def bounded(clip: Callable[[Any, Any, Any], Any]) -> Implementation:
    """`clamp` through a framework's clip (a bound not given is None), for :class:`NewArrays`."""
    def implementation(call: Call) -> Closure:
        x = call.numeric()
        given, (low, high) = call.given("min", "max")
        run = x.run
        call.allocates()
        return call.fold(Closure(lambda frame: clip(run(frame), low(frame), high(frame))),
                         x, *given)

    return implementation


def ordered(sort: Callable[[Any, int, bool, Any], Any]) -> Implementation:
    """`sort` and `argsort` through a framework's stable sort, called with the value, the
    axis, whether descending and the checker's dtype (argsort's indices are cast to it)."""
    def implementation(call: Call) -> Closure:
        axis, descending = axis_index(call.arg("axis"), call.rank()), bool(call.arg("descending"))
        dtype = call.c.dtype
        return made(call, lambda x: sort(x, axis, descending, dtype), "x")

    return implementation


def flipped(flip: Callable[[Any, tuple[int, ...] | None], Any]) -> Implementation:
    """`flip` through a framework's flip (the axes, None for all); a mask stays a mask."""
    def implementation(call: Call) -> Closure:
        axes = axes_of(call.arg("axis"), call.rank())
        x = call.tensor()
        run = x.run
        call.allocates()
        return call.fold(Closure(lambda frame: flip(run(frame), axes)), x)

    return implementation


def dropout(call: Call) -> Closure:
    return call.numeric()  # identity when executed (language.md, section 6)


# The builtin rows every framework shares: a framework's table starts from these.
ROWS: dict[str, Implementation] = {"dropout": dropout}


@dataclass(frozen=True)
class Fn:
    """The framework's own function of this name (`np.tril`, `torch.tril`); None: the
    builtin's own name."""

    name: str | None = None


# A builtin's row where the framework has no function named after it (`_softmax`): one of
# its row makers (`_triangle`) applied to these arguments, the same in every framework.
RECIPES: dict[str, tuple[str, tuple[Any, ...]]] = {
    "layernorm": ("normalise", (False,)), "rmsnorm": ("normalise", (True,)),
    **{name: ("triangle", (Fn(),)) for name in ("tril", "triu")},
    **{name: ("constant_fill", (Fn(),)) for name in ("ones", "zeros")},
    **{name: ("unary", (Fn(),)) for name in ("exp", "log", "sqrt", "tanh", "cos", "sin",
                                             "square", "sigmoid", "relu", "rsqrt", "erf")},
    **{name: ("reduction", (Fn(),)) for name in ("sum", "mean", "max", "min")},
    **{name: ("cumulative", (Fn(),)) for name in ("cumsum", "cumprod")},
    **{name: ("pairwise", (Fn(),)) for name in ("minimum", "maximum")},
    **{name: ("logical", (Fn(),)) for name in ("all", "any")},
    **{name: ("complex_part", (Fn(),)) for name in ("real", "imag", "conj")},
    "acos": ("unary", (Fn("arccos"),)),  # NumPy 1's name (torch and jax.numpy have it too)
    "ones_like": ("like", (Fn("ones"),)), "zeros_like": ("like", (Fn("zeros"),)),
    "take": ("gather", ("indices",)), "index_select": ("gather", ("index",)),
    "take_along_axis": ("gather", ("indices", True)),
}
# Builtins that run as another's row in every framework (the checker made swapaxes' perm).
RUNS_AS = {"swapaxes": "transpose", "amax": "max", "amin": "min", "flatten": "reshape",
           "transpose_2d": "transpose"}


def table(functions: Mapping[str, Any], namespace: Any,
          rows: Mapping[str, Implementation]) -> dict[str, Implementation]:
    """A framework's builtin table, a row per builtin of the checker: the row given in
    ``rows`` (what only this framework does), else the framework module's function named
    after the builtin (`_softmax`), else a row every framework shares (:data:`ROWS`), else
    its recipe (:data:`RECIPES`) with ``namespace``'s functions; aliases last. So a helper of
    a framework module is never named `_<builtin>` (torch's exact gelu is `_gelu_exact`)."""
    found: dict[str, Implementation] = {}
    for name in CHECKED:
        row = rows.get(name) or functions.get(f"_{name}") or ROWS.get(name)
        if row is None and name in RECIPES:
            maker, arguments = RECIPES[name]
            row = functions[f"_{maker}"](*(getattr(namespace, a.name or name)
                                           if isinstance(a, Fn) else a for a in arguments))
        if row is not None and name not in RUNS_AS:
            found[name] = row
    found.update({alias: found[target] for alias, target in RUNS_AS.items() if target in found})
    return found
