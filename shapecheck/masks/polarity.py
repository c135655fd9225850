"""Which way round a mask on the scores reads an input whose convention the spec states
(`input pad: bool[B, N] keep`): the attention's masks as the meaning pass found them,
each traced back to the inputs it reads, counting the negations on the way."""

from __future__ import annotations

from collections.abc import Iterator

from ..check.program import Program
from ..syntax import nodes

# One-argument builtins that keep which entries are non-zero.
_KEEP_NONZERO = frozenset({"long", "abs"})
_FLIP = frozenset({"logical_not"})


def stated_masks(program: Program) -> dict[str, tuple[bool, nodes.TensorDecl]]:
    """Each input stated `keep` (True) or `drop` (False), with its declaration."""
    found = {}
    for statement in program.statements:
        if isinstance(statement, nodes.TensorDecl):
            words = {c.name for c in statement.conventions}
            if words & {"keep", "drop"}:
                found[statement.name.name] = ("keep" in words, statement)
    return found


def against(program: Program, stated: dict[str, tuple[bool, nodes.TensorDecl]]
            ) -> Iterator[tuple[nodes.Expr, str, bool, nodes.TensorDecl]]:
    """(mask node, input, whether a true entry keeps the score there, declaration) for each
    mask on the scores that reads a stated input the other way round."""
    meaning = program.meaning
    if meaning is None or not stated:
        return
    definitions = {s.name.name: s.value for s in program.statements
                   if isinstance(s, nodes.Define)}
    seen: set[tuple[int, str]] = set()
    for pattern in meaning.patterns:
        for mask in pattern.masks:
            if mask.after_softmax:
                continue
            for name, flips in _reads(mask.condition.node, 0, definitions, 0):
                if name not in stated or (id(mask.node), name) in seen:
                    continue
                seen.add((id(mask.node), name))
                keeps = mask.keeps != (flips % 2 == 1)
                keep, declaration = stated[name]
                if keeps != keep:
                    yield mask.node, name, keeps, declaration


def _reads(node: nodes.Expr, flips: int, definitions: dict[str, nodes.Expr], depth: int
           ) -> Iterator[tuple[str, int]]:
    """The inputs ``node`` reads as a mask (non-zero: true), each with the number of
    negations between it and ``node``; a form it cannot follow reads nothing."""
    if depth > 64:
        return
    node = nodes.strip_parens(node)
    if isinstance(node, nodes.Name):
        if node.name in definitions:
            yield from _reads(definitions[node.name], flips, definitions, depth + 1)
        else:
            yield node.name, flips
    elif isinstance(node, nodes.Subscript):
        yield from _reads(node.operand, flips, definitions, depth + 1)
    elif isinstance(node, nodes.Unary):
        yield from _reads(node.operand, flips + (node.op == "~"), definitions, depth + 1)
    elif isinstance(node, nodes.Call) and len(node.args) == 1 and not node.keywords:
        if node.func.name in _KEEP_NONZERO | _FLIP:
            yield from _reads(node.args[0], flips + (node.func.name in _FLIP), definitions,
                              depth + 1)
    elif isinstance(node, nodes.BinOp):
        yield from _binop(node, flips, definitions, depth)


def _binop(node: nodes.BinOp, flips: int, definitions: dict[str, nodes.Expr], depth: int
           ) -> Iterator[tuple[str, int]]:
    if node.op in ("&", "|", "*"):  # monotone: each side keeps its sense
        for side in (node.left, node.right):
            if number(side) is None:
                yield from _reads(side, flips, definitions, depth + 1)
    elif node.op == "-" and number(node.left) == 1.0:  # `1 - m`: the complement
        yield from _reads(node.right, flips + 1, definitions, depth + 1)
    elif (found := tested(node)) is not None and found[1] is not None:
        yield from _reads(found[0], flips + (not found[1]), definitions, depth + 1)


def tested(node: nodes.BinOp) -> tuple[nodes.Expr, bool | None] | None:
    """`m OP number` (or `number OP m`): m, and whether the test is true where a 0/1 (or
    bool) m is 1 (None: true on both or on neither); None when no side is a number."""
    if node.op not in nodes.COMPARISONS:
        return None
    for side, other, op in ((node.left, node.right, node.op),
                            (node.right, node.left, mirror(node.op))):
        value = number(other)
        if value is not None:
            return side, sense(op, value)
    return None


def sense(op: str, value: float) -> bool | None:
    """Whether `m OP value` is true where a 0/1 (or bool) ``m`` is 1 (and false where it
    is 0): None if it is true on both or on neither."""
    at_one = {"==": 1 == value, "!=": 1 != value, ">": 1 > value, ">=": 1 >= value,
              "<": 1 < value, "<=": 1 <= value}[op]
    at_zero = {"==": 0 == value, "!=": 0 != value, ">": 0 > value, ">=": 0 >= value,
               "<": 0 < value, "<=": 0 <= value}[op]
    return None if at_one == at_zero else at_one


def mirror(op: str) -> str:
    return {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)


def number(node: nodes.Expr) -> float | None:
    node = nodes.strip_parens(node)
    if isinstance(node, (nodes.Integer, nodes.Decimal)):
        return float(node.value)
    if isinstance(node, nodes.Boolean):
        return 1.0 if node.value else 0.0
    if isinstance(node, nodes.Unary) and node.op == "-":
        inner = number(node.operand)
        return None if inner is None else -inner
    if isinstance(node, nodes.Inf):
        return float("inf")
    return None
