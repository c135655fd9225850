"""`einsum`: the one reading of its subscripts, and its shape rule (a row of
:data:`builtins.BUILTINS`).

**One parser.** The checker, the report and every backend read subscripts through
:func:`parse_subscripts`; the checker records the normalised text
(:attr:`Subscripts.text`) in the resolved call, and the backends run exactly that.
The meaning (docs/language.md, section 6): whitespace is ignored anywhere
(`"ij - > ji"` is `"ij->ji"`); without `->` the output is NumPy's implicit one
(`...` first, then the letters used once, sorted); axes under `...` that the output
leaves out are summed (`"...i->i"`), as NumPy's `optimize` path and PyTorch do.
NumPy's default parser rejects both strings; the normalised text always has an
explicit output, and the NumPy backend runs it through this same reading (one-operand
`np.einsum` steps and a `np.matmul` per pair of operands: docs/run.md).
"""

from __future__ import annotations

import string
from typing import Any

from ..messages import codes
from ..records import Record
from .program import Shape, Value
from .rules import MAX_EINSUM_OPERANDS, Ctx, broadcast, counterexample, relation
from ..symbolic import Claim, Dim, to_text

LETTERS = frozenset(string.ascii_letters)


class SubscriptError(Exception):
    """Subscripts that cannot be read; the message is the reason, in words."""


class Subscripts(Record, frozen=True):
    """Subscripts as read: one term per operand and the explicit output term."""

    inputs: tuple[str, ...]
    output: str

    @property
    def text(self) -> str:
        """The normalised subscripts: no whitespace, the output explicit."""
        return ",".join(self.inputs) + "->" + self.output


def parse_subscripts(subscripts: str, operand_count: int) -> Subscripts:
    """Read ``"ij,jk->ik"`` (or ``"ij,jk"``, implicit output) for ``operand_count`` operands."""
    text = "".join(subscripts.split())
    if text.count("->") > 1:
        raise SubscriptError(codes.detail("einsum_many_arrows"))
    inputs_text, arrow, output = text.partition("->")
    terms = tuple(inputs_text.split(","))
    if len(terms) != operand_count:
        raise SubscriptError(codes.detail("einsum_term_count", terms=len(terms),
                                          operands=operand_count))
    for term in terms + ((output,) if arrow else ()):
        letters = term.replace("...", "")
        if "." in letters:
            raise SubscriptError(codes.detail("einsum_stray_dot", term=term))
        if term.count("...") > 1:
            raise SubscriptError(codes.detail("einsum_many_ellipses", term=term))
        bad = [c for c in letters if c not in LETTERS]
        if bad:
            raise SubscriptError(codes.detail("einsum_not_a_letter", term=term, char=bad[0]))
    if not arrow:
        return Subscripts(terms, _implicit_output(terms))
    if len(set(output.replace("...", ""))) != len(output.replace("...", "")):
        raise SubscriptError(codes.detail("einsum_output_repeats", output=output))
    return Subscripts(terms, output)


def _implicit_output(terms: tuple[str, ...]) -> str:
    """NumPy's implicit mode: letters used exactly once, in alphabetical order."""
    counts: dict[str, int] = {}
    for term in terms:
        for letter in term.replace("...", ""):
            counts[letter] = counts.get(letter, 0) + 1
    ellipsis = "..." if any("..." in t for t in terms) else ""
    return ellipsis + "".join(sorted(c for c, n in counts.items() if n == 1))


def rule(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """The shape rule: ``a["subscripts"]`` (a string) and ``a["operands"]`` (values)."""
    subscripts: str = a["subscripts"]
    operands: list[Value] = a["operands"]
    if len(operands) > MAX_EINSUM_OPERANDS:
        ctx.report(codes.LIMIT, "operands", detail=codes.detail(
            "einsum_too_many_operands", count=len(operands), limit=MAX_EINSUM_OPERANDS))
        return None
    try:
        parsed = parse_subscripts(subscripts, len(operands))
    except SubscriptError as error:
        ctx.report(codes.EINSUM, "subscripts",
                   detail=codes.detail("einsum_invalid", subscripts=subscripts, reason=error))
        return None
    ctx.normalise("subscripts", parsed.text)
    sizes: dict[str, tuple[Dim, int]] = {}
    ellipsis_shapes: list[Value] = []
    for index, (term, operand) in enumerate(zip(parsed.inputs, operands), start=1):
        assert operand.shape is not None
        if operand.is_bool:
            ctx.report(codes.BOOL_ARITHMETIC, "operands",
                       operand=codes.detail("einsum_operand", index=index),
                       operation="`einsum`")
        letters = term.replace("...", "")
        rank = len(operand.shape)
        if ("..." in term and rank < len(letters)) or ("..." not in term and rank != len(letters)):
            ctx.report(codes.EINSUM, "operands", item=index - 1, detail=codes.detail(
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
    unknown = [c for c in parsed.output.replace("...", "") if c not in sizes]
    if unknown:
        ctx.report(codes.EINSUM, "subscripts",
                   detail=codes.detail("einsum_unknown_output", letter=unknown[0]))
        return None
    batch = _broadcast_ellipsis(ctx, ellipsis_shapes)
    if batch is None:
        return None
    head, _, tail = parsed.output.partition("...")
    middle = batch if "..." in parsed.output else ()
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
    decision = ctx.dims.decide(Claim.equal(dim, previous))
    ctx.report(codes.EINSUM, "operands", notes=ctx.notes("operands"), needed=decision,
               counterexample=counterexample(decision), detail=codes.detail(
        "einsum_letter", letter=letter, subscripts=subscripts, size=to_text(dim), index=index,
        relation=relation(decision, to=True), previous=to_text(previous), first=first))
    return False


def _broadcast_ellipsis(ctx: Ctx, shapes: list[Value]) -> Shape | None:
    result: Shape = ()
    for value in shapes:
        merged = broadcast(ctx, Value(result), value, codes.detail("op_einsum_ellipsis"),
                           "operands")
        if merged is None:
            return None
        result = merged
    return result
