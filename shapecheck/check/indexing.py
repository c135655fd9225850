"""The shape rule of `x[...]`: indexing and slicing with NumPy's meaning.

Where NumPy would clamp a slice bound or raise on an index at some sizes only,
the rule asks for a proof instead: `x[..., :h]` of an axis of size `d` needs
`h <= d` for every admissible size, and `x[1]` needs the axis to have two
elements. What it proves is recorded as an :class:`~shapecheck.program.ResolvedSubscript`
(normalised bounds), which the backends execute.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..messages import codes
from .. import symbolic
from ..records import Record
from .program import NewAxis, Range, ResolvedSubscript, Take, Value
from ..symbolic import Claim, Decision, Dim, Verdict, to_text

if TYPE_CHECKING:
    from .builtins import Ctx


class Entry(Record, frozen=True, slots=True):
    """One written entry of a subscript, its dims built by the checker.

    ``kind`` is ``index``, ``slice``, ``ellipsis`` or ``new``; ``key`` names the
    entry's node among the context's parameters (``key + ".start"`` and so on
    name the parts of a slice), for spans and text.
    """

    kind: str
    key: str
    index: Dim | None = None
    start: Dim | None = None
    stop: Dim | None = None
    step: Dim | None = None


_WHOLE = Entry("whole", "")


def subscript_shape(ctx: Ctx, x: Value,
                    entries: Sequence[Entry]) -> tuple[Value, ResolvedSubscript] | None:
    """The value of `x[entries]` and how it resolved, or None after reporting what is wrong."""
    assert x.shape is not None
    expanded = _expand(ctx, x, entries)
    if expanded is None:
        return None
    shape: list[Dim] = []
    resolved: list[Take | Range | NewAxis] = []
    failed = False
    axis = 0
    for entry in expanded:
        if entry.kind == "new":
            shape.append(symbolic.ONE)
            resolved.append(NewAxis())
            continue
        size = x.shape[axis]
        if entry.kind == "whole":
            shape.append(size)
            resolved.append(Range(axis, None, None, symbolic.ONE, size))
        elif entry.kind == "index":
            taken = _take(ctx, x, axis, entry)
            failed |= taken is None
            resolved.append(Take(axis, taken if taken is not None else symbolic.ONE))
        else:
            sliced = _range(ctx, x, axis, entry)
            if sliced is None:
                failed = True
            else:
                shape.append(sliced.length)
                resolved.append(sliced)
        axis += 1
    if failed:
        return None
    return Value(tuple(shape), x.is_bool, element=x.element), ResolvedSubscript(tuple(resolved))


def _expand(ctx: Ctx, x: Value, entries: Sequence[Entry]) -> list[Entry] | None:
    """`...` (or the end) filled with whole axes, so that every axis has one entry."""
    ellipses = [e for e in entries if e.kind == "ellipsis"]
    if len(ellipses) > 1:
        ctx.report(codes.TOO_MANY_INDICES, ellipses[1].key, detail=codes.detail("many_ellipses"))
        return None
    taking = [e for e in entries if e.kind in ("index", "slice")]
    if len(taking) > x.rank:
        ctx.report(codes.TOO_MANY_INDICES, taking[x.rank].key, detail=codes.detail(
            "too_many_indices", shape=x.text(), rank=x.rank, count=len(taking)))
        return None
    fill = [_WHOLE] * (x.rank - len(taking))
    if not ellipses:
        return [*entries, *fill]
    at = list(entries).index(ellipses[0])
    return [*entries[:at], *fill, *entries[at + 1:]]


def _sign(ctx: Ctx, value: Dim) -> int | None:
    """1 when ``value >= 0`` for every admissible size, -1 when always negative."""
    if ctx.dims.positive(value + 1):
        return 1
    if ctx.dims.positive(-value):
        return -1
    return None


def _known_sign(ctx: Ctx, value: Dim, key: str, step: bool = False) -> int | None:
    sign = _sign(ctx, value)
    if sign is None:
        detail = codes.detail("step_sign_unknown", step=ctx.text(key)) if step \
            else codes.detail("sign_unknown", index=ctx.text(key))
        claim = Claim.positive(value) if step else Claim.at_most(symbolic.integer(0), value)
        ctx.report(codes.BAD_INDEX, key, detail=detail, needed=ctx.dims.decide(claim))
    return sign


def _failed(ctx: Ctx, claim: Claim) -> tuple[Decision, dict[str, Any]] | None:
    """None when the claim is proved; else its decision and the message fields that say
    how it fails: ``definite`` (always, or at the bindings) or not, and where."""
    decision = ctx.dims.decide(claim)
    if decision:
        return None
    example = decision.counterexample
    fields: dict[str, Any] = {
        "where": codes.detail("at_sizes", values=example.text()) if example else "",
        "counterexample": example.values if example else (),
        "needed": decision,
    }
    return decision, fields


def _definite(decision: Decision) -> bool:
    return decision.verdict is Verdict.DIFFERENT or decision.refuted


def _relation(decision: Decision, definite: str, possible: str) -> str:
    return codes.detail(definite if _definite(decision) else possible)


def _take(ctx: Ctx, x: Value, axis: int, entry: Entry) -> Dim | None:
    """An integer index, normalised to ``0 .. size - 1``."""
    assert entry.index is not None and x.shape is not None
    size, index = x.shape[axis], entry.index
    sign = _known_sign(ctx, index, entry.key)
    if sign is None:
        return None
    # From the start it must be below the size; from the end, at least -size.
    claim, bound = (Claim.positive(size - index), "index_below_size") if sign > 0 \
        else (Claim.at_most(-index, size), "index_at_least")
    failed = _failed(ctx, claim)
    if failed is not None:
        decision, fields = failed
        ctx.report(codes.INDEX_RANGE, entry.key, index=ctx.text(entry.key), axis=axis,
                   shape=x.text(), relation=_relation(decision, "lies_outside", "may_lie_outside"),
                   bound=codes.detail(bound, size=to_text(size)), **fields)
        return None
    return index if sign > 0 else size + index


def _range(ctx: Ctx, x: Value, axis: int, entry: Entry) -> Range | None:
    assert x.shape is not None
    size = x.shape[axis]
    step = entry.step if entry.step is not None else symbolic.ONE
    if step == 0:
        ctx.report(codes.BAD_INDEX, entry.key + ".step", detail=codes.detail("step_zero"))
        return None
    direction = _known_sign(ctx, step, entry.key + ".step", step=True)
    if direction is None:
        return None
    forward = direction > 0
    # A bound lies in 0 .. size going forward; going backward the start must be an
    # element (0 .. size - 1), and so must the stop, or NumPy clamps it.
    last = size if forward else size - 1
    start = stop = None
    failed = False
    if entry.start is not None:
        start = _bound(ctx, x, axis, entry, "start", entry.start, last)
        failed |= start is None
    if entry.stop is not None:
        stop = _bound(ctx, x, axis, entry, "stop", entry.stop, last)
        failed |= stop is None
    if failed:
        return None
    first = start if start is not None else (symbolic.integer(0) if forward else size - 1)
    end = stop if stop is not None else (size if forward else symbolic.integer(-1))
    span = end - first if forward else first - end
    magnitude = step if forward else -step
    length = span if magnitude == 1 else symbolic.floor_quotient(span + magnitude - 1, magnitude)
    empty = _failed(ctx, Claim.positive(span))  # at least one element
    if empty is not None:
        decision, fields = empty
        ctx.report(codes.EMPTY_SLICE, entry.key, slice=ctx.text(entry.key), axis=axis,
                   shape=x.text(), length=to_text(length),
                   relation=codes.detail("is" if _definite(decision) else "may_be"), **fields)
        return None
    return Range(axis, start, stop, step, ctx.dims.simplest(length))


def _bound(ctx: Ctx, x: Value, axis: int, entry: Entry, part: str, value: Dim,
           last: Dim) -> Dim | None:
    """A slice bound, normalised to ``0 .. last``."""
    assert x.shape is not None
    key = f"{entry.key}.{part}"
    size = x.shape[axis]
    sign = _known_sign(ctx, value, key)
    if sign is None:
        return None
    if sign > 0:
        claim, relation = Claim.at_most(value, last), ("slice_past_end", "slice_may_pass_end")
    else:
        claim, relation = Claim.at_most(-value, size), ("slice_before_start",
                                                        "slice_may_precede_start")
    failed = _failed(ctx, claim)
    if failed is not None:
        decision, fields = failed
        ctx.report(codes.SLICE_RANGE, key,
                   part=codes.detail("slice_start" if part == "start" else "slice_end"),
                   bound=ctx.text(key), slice=ctx.text(entry.key), axis=axis, shape=x.text(),
                   size=to_text(size), relation=_relation(decision, *relation), **fields)
        return None
    return value if sign > 0 else size + value
