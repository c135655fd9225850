"""Dim expressions from the syntax tree, reporting what is not allowed in one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy

from ..messages import codes
from ..records import Record
from ..syntax import nodes
from ..messages.diagnostics import Diagnostic, Fix, Span
from .budget import MAX_EXPONENT, TooComplex
from .counterexamples import Claim, Decision
from .dims import Dim, Verdict, exact_quotient, free_names, to_text
from .proofs import DimSystem


Resolve = Callable[[nodes.Name], "Dim | None"]


class DimBuilder(Record):
    """Turns an expression node into a dim expression, reporting what is not allowed."""

    system: DimSystem
    resolve: Resolve
    diagnostics: list[Diagnostic]
    in_constraint: bool = False
    # The weakest constraint of a decision as candidate fixes (the checker knows where
    # a new constraint goes in the file).
    needed_fixes: Callable[[Decision], list[Fix]] = lambda decision: []

    def constraint_side(self, node: nodes.Expr) -> Dim | None:
        """A side of a constraint: `/` there states a relation (`d == D_model / H`
        says that H divides D_model), so it needs no proof of its own."""
        self.in_constraint = True
        try:
            return self._build(node)
        finally:
            self.in_constraint = False

    def build(self, node: nodes.Expr, allow_minus_one: bool = False) -> Dim | None:
        if allow_minus_one and isinstance(node, nodes.Unary) and node.op == "-" \
                and isinstance(node.operand, nodes.Integer) and node.operand.value == 1:
            return sympy.Integer(-1)
        return self._build(node)

    def _build(self, node: nodes.Expr) -> Dim | None:
        if isinstance(node, nodes.Integer):
            return sympy.Integer(node.value)
        if isinstance(node, nodes.Name):
            return self.resolve(node)
        if isinstance(node, nodes.Paren):
            return self._build(node.inner)
        if isinstance(node, nodes.Unary) and node.op in "+-":
            operand = self._build(node.operand)
            return None if operand is None else (-operand if node.op == "-" else operand)
        if isinstance(node, nodes.BinOp):
            return self._binop(node)
        self.diagnostics.append(codes.NOT_A_DIM_EXPR.diag(node.span, what_found=_describe(node)))
        return None

    def _binop(self, node: nodes.BinOp) -> Dim | None:
        if node.op not in nodes.DIM_OPERATORS:  # `@`, comparisons, `&`, `|`
            self.diagnostics.append(codes.NOT_A_DIM_EXPR.diag(node.op_span,
                                                              what_found=f"`{node.op}`"))
            return None
        if node.op == "**":
            return self._power(node)
        left, right = self._build(node.left), self._build(node.right)
        if left is None or right is None:
            return None
        if node.op == "+":
            return self._sized(left + right, node.span)
        if node.op == "-":
            return self._sized(left - right, node.span)
        if node.op == "*":
            return self._sized(left * right, node.span)
        if right == 0:
            self.diagnostics.append(codes.NOT_DIVISIBLE.diag(
                node.span, claim=codes.divisibility(True, to_text(left), "0")))
            return None
        if not self._positive_divisor(right, node.right):
            return None
        if node.op == "//":
            return self._sized(sympy.floor(left / right), node.span)
        if self.in_constraint:
            # The constraint asserts the division; it is not a size.
            return self._sized(left / right, node.span)
        verdict = self._proved(lambda: self.system.divides(left, right), node.span)
        if verdict is None:
            return None
        if not verdict:
            decision = self.system.decide(Claim.divides(left, right))
            needed = decision.needed
            self.diagnostics.append(codes.NOT_DIVISIBLE.diag(
                node.span, claim=self.system.divisibility_claim(left, right, decision),
                counterexample=decision.counterexample.values if decision.refuted else (),
                help=[codes.needed_help(needed.dims, needed.constraint)] if needed else [],
                fixes=self.needed_fixes(decision),
            ))
            return None
        return self._proved(lambda: exact_quotient(left, right), node.span)

    def _positive_divisor(self, divisor: Dim, node: nodes.Expr) -> bool:
        """A divisor must be a positive integer wherever the quotient is taken: `N // (H // 2)`
        is a division by zero at H = 1 (SC201 on the divisor)."""
        verdict = self._proved(lambda: self.system.positive(divisor), node.span)
        if verdict is None:
            return False
        if not verdict:
            at_bindings = verdict is Verdict.DIFFERENT and free_names(divisor)
            self.diagnostics.append(codes.NOT_POSITIVE.diag(
                node.span, expr=to_text(divisor),
                reason=codes.detail("not_positive_at_bindings") if at_bindings else ""))
            return False
        return True

    def _proved(self, question: Callable[[], Any], span: Span) -> Any:
        """The answer, or None with SC003 when it is too complex to find."""
        try:
            return question()
        except TooComplex as error:
            self.diagnostics.append(codes.LIMIT.diag(span, detail=error.detail))
            return None

    def _power(self, node: nodes.BinOp) -> Dim | None:
        base = self._build(node.left)
        exponent_node = node.right
        if not isinstance(exponent_node, nodes.Integer):
            self.diagnostics.append(codes.POWER.diag(
                exponent_node.span, detail=codes.detail("power_exponent")))
            return None
        if exponent_node.value > MAX_EXPONENT:
            self.diagnostics.append(codes.LIMIT.diag(exponent_node.span, detail=codes.syntax_text(
                "exponent_too_large", value=exponent_node.value, limit=MAX_EXPONENT)))
            return None
        if base is None:
            return None
        return self._sized(base ** exponent_node.value, node.span)

    def _sized(self, dim: Dim, span: Span) -> Dim | None:
        """Refuse expressions whose exponents or expansions (with derived dims and
        constraints substituted) pass the budget, before anything expands them."""
        too_big = any(p.is_Pow and p.exp.is_Integer and abs(int(p.exp)) > MAX_EXPONENT
                      for p in sympy.preorder_traversal(dim))
        if too_big:
            self.diagnostics.append(codes.LIMIT.diag(
                span, detail=codes.detail("expression_too_large")))
            return None
        try:
            self.system.check_size(dim)
        except TooComplex as error:
            self.diagnostics.append(codes.LIMIT.diag(span, detail=error.detail))
            return None
        return dim


def _describe(node: nodes.Expr) -> str:
    if isinstance(node, nodes.Decimal):
        return codes.detail("found_number", text=node.text)
    if isinstance(node, nodes.Call):
        return codes.detail("found_call", name=node.func.name)
    if isinstance(node, nodes.Transpose):
        return "`.T`"
    if isinstance(node, nodes.String):
        return codes.detail("found_string")
    if isinstance(node, nodes.Inf):
        return "`inf`"
    if isinstance(node, nodes.ListExpr):
        return codes.detail("found_list")
    if isinstance(node, nodes.AxisName):
        return f"`{node.name}`"
    if isinstance(node, nodes.Boolean):
        return codes.detail("found_boolean")
    return codes.detail("found_expression")
