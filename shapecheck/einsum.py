"""The shape rule of `einsum`, as NumPy reads its subscripts."""

from __future__ import annotations

import string
from typing import TYPE_CHECKING

from . import codes, symbolic
from .program import Shape, Value
from .symbolic import Dim, to_text

if TYPE_CHECKING:
    from .builtins import Ctx

LETTERS = frozenset(string.ascii_letters)


class SubscriptError(Exception):
    pass


def parse_subscripts(subscripts: str, operand_count: int) -> tuple[list[str], str | None]:
    """Split ``"ij,jk->ik"`` into input terms and the output term (None: implicit)."""
    text = subscripts.replace(" ", "")
    if text.count("->") > 1:
        raise SubscriptError(codes.detail("einsum_many_arrows"))
    inputs_text, arrow, output = text.partition("->")
    terms = inputs_text.split(",")
    if len(terms) != operand_count:
        raise SubscriptError(codes.detail("einsum_term_count", terms=len(terms),
                                          operands=operand_count))
    for term in terms + ([output] if arrow else []):
        letters = term.replace("...", "")
        if "." in letters:
            raise SubscriptError(codes.detail("einsum_stray_dot", term=term))
        if term.count("...") > 1:
            raise SubscriptError(codes.detail("einsum_many_ellipses", term=term))
        bad = [c for c in letters if c not in LETTERS]
        if bad:
            raise SubscriptError(codes.detail("einsum_not_a_letter", term=term, char=bad[0]))
    if arrow:
        if len(set(output.replace("...", ""))) != len(output.replace("...", "")):
            raise SubscriptError(codes.detail("einsum_output_repeats", output=output))
        return terms, output
    return terms, None


def implicit_output(terms: list[str]) -> str:
    """NumPy's implicit mode: letters used exactly once, in alphabetical order."""
    counts: dict[str, int] = {}
    for term in terms:
        for letter in term.replace("...", ""):
            counts[letter] = counts.get(letter, 0) + 1
    ellipsis = "..." if any("..." in t for t in terms) else ""
    return ellipsis + "".join(sorted(c for c, n in counts.items() if n == 1))


def einsum_shape(ctx: Ctx, subscripts: str, operands: list[Value]) -> Value | None:
    try:
        terms, output = parse_subscripts(subscripts, len(operands))
    except SubscriptError as error:
        ctx.report(codes.EINSUM, "subscripts",
                   detail=codes.detail("einsum_invalid", subscripts=subscripts, reason=error))
        return None
    if output is None:
        output = implicit_output(terms)
    sizes: dict[str, tuple[Dim, int]] = {}
    ellipsis_shapes: list[Value] = []
    for index, (term, operand) in enumerate(zip(terms, operands), start=1):
        assert operand.shape is not None
        if operand.is_bool:
            ctx.report(codes.BOOL_ARITHMETIC, "operands",
                       operand=codes.detail("einsum_operand", index=index),
                       operation="`einsum`")
        letters = term.replace("...", "")
        rank = len(operand.shape)
        if ("..." in term and rank < len(letters)) or ("..." not in term and rank != len(letters)):
            ctx.report(codes.EINSUM, "operands", detail=codes.detail(
                "einsum_rank", index=index, shape=operand.text(), rank=rank, term=term,
                letters=len(letters)))
            return None
        head, _, tail = term.partition("...")
        if "..." in term:
            middle = operand.shape[len(head): rank - len(tail)]
            ellipsis_shapes.append(Value(middle))
            named = list(zip(head, operand.shape[: len(head)])) + list(
                zip(tail, operand.shape[rank - len(tail):]))
        else:
            named = list(zip(term, operand.shape))
        for letter, dim in named:
            if not _record(ctx, sizes, letter, dim, index, subscripts):
                return None
    unknown = [c for c in output.replace("...", "") if c not in sizes]
    if unknown:
        ctx.report(codes.EINSUM, "subscripts",
                   detail=codes.detail("einsum_unknown_output", letter=unknown[0]))
        return None
    batch = _broadcast_ellipsis(ctx, ellipsis_shapes)
    if batch is None:
        return None
    head, _, tail = output.partition("...")
    middle = batch if "..." in output else ()
    shape = tuple(sizes[c][0] for c in head) + middle + tuple(sizes[c][0] for c in tail)
    return Value(shape)


def _record(ctx: Ctx, sizes: dict[str, tuple[Dim, int]], letter: str, dim: Dim, index: int,
            subscripts: str) -> bool:
    if letter not in sizes:
        sizes[letter] = (dim, index)
        return True
    previous, first = sizes[letter]
    verdict = ctx.dims.equal(previous, dim)
    if verdict:
        return True
    from .builtins import counterexample, needed_help, relation

    decision = ctx.dims.decide(symbolic.Claim.equal(dim, previous))
    ctx.report(codes.EINSUM, "operands", notes=ctx.notes("operands"), help=needed_help(decision),
               counterexample=counterexample(decision), detail=codes.detail(
        "einsum_letter", letter=letter, subscripts=subscripts, size=to_text(dim), index=index,
        relation=relation(decision, to=True), previous=to_text(previous), first=first))
    return False


def _broadcast_ellipsis(ctx: Ctx, shapes: list[Value]) -> Shape | None:
    from .builtins import broadcast

    result: Shape = ()
    for value in shapes:
        merged = broadcast(ctx, Value(result), value, codes.detail("op_einsum_ellipsis"),
                           "operands")
        if merged is None:
            return None
        result = merged
    return result
