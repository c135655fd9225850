"""What every shape rule shares: the context a rule reports through (:class:`Ctx`),
axes, NumPy broadcasting, the words of a verdict, and NumPy's limits.

It stands below :mod:`builtins` (the table of rows) and :mod:`einsum` (one row's
rule), so that neither imports the other's internals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..messages import codes
from ..records import Record
from ..syntax import nodes
from .. import symbolic
from ..messages.diagnostics import Edit, Fix, Note, Span
from .program import Shape, Value
from ..symbolic import Claim, Decision, Dim, DimSystem, Verdict, to_text

# The NumPy the project requires (numpy>=2, pyproject.toml) holds at most 64 axes per
# array (NPY_MAXDIMS) and takes at most 63 operands in one einsum (NPY_MAXARGS, 64,
# counts the output). The checker knows them without importing NumPy; a backend test
# holds them against the installed NumPy.
MAX_RANK = 64
MAX_EINSUM_OPERANDS = 63
# NumPy indexes an array's bytes with a signed 64-bit integer: at most 2**63 - 1 bytes,
# so 2**60 - 1 elements of float64, the widest element a run uses.
MAX_ELEMENTS = (2 ** 63 - 1) // 8


class Anchor(Record, frozen=True):
    """Where a suggested `dim` or `constraint` goes in the file: at the end of the line of
    the last dim or constraint statement (all dims are declared by then), or at the very
    start of a file that has none; ``newline`` is the file's own."""

    span: Span
    at_start: bool = False
    newline: str = "\n"

    def insert(self, lines: Sequence[str]) -> Edit:
        text = self.newline.join(lines)
        return Edit(self.span, text + self.newline if self.at_start else self.newline + text)


class Ctx(Protocol):
    """What a shape function may ask of the checker."""

    @property
    def dims(self) -> DimSystem: ...

    @property
    def anchor(self) -> Anchor: ...

    def report(self, code: codes.Code, at: str | None = None, *, notes: Sequence[Note] = (),
               help: Sequence[str] = (), counterexample: Sequence[tuple[str, int]] = (),
               item: int | None = None, fixes: Sequence[Fix] = (),
               needed: Decision | None = None, **fields: object) -> None:
        """Report at the argument ``at`` (its ``item``-th element, for a list of tensors),
        or at the whole call. ``fixes`` are candidate edits (each with its help line);
        ``needed`` adds the weakest constraint of a decision, as help and as a fix."""

    def text(self, param: str) -> str: ...

    def argument(self, param: str) -> nodes.Expr | None:
        """The argument ``param`` as written (parentheses stripped)."""

    def source(self, node: nodes.Expr) -> str:
        """The text of any expression inside the arguments, as written."""

    def defined_as(self, name: str) -> nodes.Expr | None:
        """The value of the last statement before this one that defines ``name``."""

    def span(self, param: str | None) -> Span | None:
        """Where the argument ``param`` is written (``None``: the whole call or operation)."""

    def declaration(self, param: str) -> nodes.TensorDecl | None:
        """The `input`/`param` statement of the argument, when it is a declared tensor."""

    def notes(self, *params: str) -> list[Note]: ...

    def normalise(self, param: str, value: Any) -> None:
        """Record the normalised form of an argument for the backends (einsum's
        subscripts with the output made explicit): they run what the checker read."""



# --- helpers shared by rules and operators ---------------------------------------------------


#: Words written for an axis name that mean the same one (`axis=rows`): the help proposes the
#: name (a did-you-mean is offered only for the same meaning, never a look-alike).
AXIS_SAME_MEANING = {"rows": "row", "cols": "col", "column": "col", "columns": "col"}


def axis_index(axis: int | str, rank: int) -> int:
    """`row` (last axis), `col` (second-to-last) or a negative axis, as an index from 0.

    The one place axes are normalised: the checker, the report and the backend use it.
    """
    index = {"row": -1, "col": -2}[axis] if isinstance(axis, str) else axis
    return index + rank if index < 0 else index


def resolve_axis(ctx: Ctx, axis: int | str, value: Value, param: str = "axis",
                 rank: int | None = None) -> int | None:
    """`row`/`col`/negative -> a non-negative axis index, or report SC305."""
    rank = value.rank if rank is None else rank
    normalised = axis_index(axis, rank)
    if not 0 <= normalised < rank:
        ctx.report(codes.AXIS, param, axis=axis, rank=rank, shape=value.text())
        return None
    return normalised


def broadcast(ctx: Ctx, left: Value, right: Value, op: str, at: str | None = None,
              params: tuple[str, str] = ("left", "right")) -> Shape | None:
    """NumPy broadcasting, where a dim broadcasts only when it is the literal 1."""
    assert left.shape is not None and right.shape is not None
    rank = max(len(left.shape), len(right.shape))
    lhs = (symbolic.ONE,) * (rank - len(left.shape)) + left.shape
    rhs = (symbolic.ONE,) * (rank - len(right.shape)) + right.shape
    result: list[Dim] = []
    for a, b in zip(lhs, rhs):
        if symbolic.is_literal_one(b):
            result.append(a)
        elif symbolic.is_literal_one(a):
            result.append(b)
        else:
            verdict = ctx.dims.equal(a, b)
            if not verdict:
                decision = ctx.dims.decide(Claim.broadcasts(a, b))
                ctx.report(
                    codes.BROADCAST, at, notes=ctx.notes(*params), needed=decision,
                    counterexample=counterexample(decision),
                    lhs_shape=left.text(), rhs_shape=right.text(), op=op,
                    lhs_dim=to_text(a), rhs_dim=to_text(b), relation=relation(decision),
                )
                return None
            result.append(a)
    return tuple(result)


def relation(decision: Decision, to: bool = False) -> str:
    """`differ` (always), `differ at N=1, d=2 (1 vs 2)` (refuted), or `cannot be proved
    equal` (undetermined); ``to`` for the "X, which ... Y" form."""
    if decision.verdict is Verdict.DIFFERENT:
        kind = "differ"
    else:
        kind = "refuted" if decision.refuted else "unproved"
    return codes.relation(kind, to, decision.counterexample)


def real_argument(ctx: Ctx, builtin: str, param: str, value: Value) -> bool:
    """``value`` holds real numbers (or ints, or a mask read as 0 and 1): SC322 for complex
    (here, not in `complex_values`, which only complex-valued specs load)."""
    if value.element != "complex":
        return True
    ctx.report(codes.WRONG_ELEMENT, param, notes=ctx.notes(param), detail=codes.detail(
        "complex_input", builtin=builtin, text=ctx.text(param), shape=value.text()))
    return False


def counterexample(decision: Decision) -> tuple[tuple[str, int], ...]:
    """The sizes where a refuted claim fails, as a diagnostic carries them."""
    return decision.counterexample.values if decision.counterexample is not None else ()


def needed_help(decision: Decision) -> list[str]:
    """`help: add ...` with the weakest constraint that makes the claim hold, if any."""
    needed = decision.needed
    return [codes.needed_help(needed.dims, needed.constraint)] if needed is not None else []


def needed_fixes(decision: Decision, anchor: Anchor) -> list[Fix]:
    """The weakest constraint as an edit: its `dim` and `constraint` lines, inserted at the
    anchor (with the same help line as :func:`needed_help`)."""
    needed = decision.needed
    if needed is None:
        return []
    lines = [f"dim {', '.join(needed.dims)}"] if needed.dims else []
    lines.append(f"constraint {needed.constraint}")
    fixes = [Fix(codes.needed_help(needed.dims, needed.constraint), (anchor.insert(lines),))]
    if len(needed.dims) == 1 and needed.rhs.endswith(f"* {needed.dims[0]}"):
        # A dim the spec declares may be the quotient it meant (`d`, used in `sqrt(d)`):
        # each is a candidate too, and fixcheck keeps the first that leaves the file better.
        stem = needed.rhs[:-len(needed.dims[0])]
        for name in needed.reuse:
            constraint = f"{needed.lhs} {needed.op} {stem}{name}"
            fixes.append(Fix(codes.needed_help((), constraint),
                             (anchor.insert([f"constraint {constraint}"]),)))
    return fixes


def constraint_help(dims: DimSystem, a: Dim, b: Dim, verdict: Verdict) -> list[str]:
    """Suggest the constraint when two different expressions of dims could be equal."""
    if verdict is Verdict.DIFFERENT:
        return []
    return needed_help(dims.decide(Claim.equal(a, b)))


