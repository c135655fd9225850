"""Checks on the scale of the scores (SC404, SC405): the product of every factor on
Q, on K and on the product, compared with the contracted size, and when a different
scale is evidently wrong rather than a deliberate model constant.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from ..messages import codes
from ..messages.diagnostics import Edit, Fix, Note
from ..syntax import nodes
from .. import symbolic
from ..symbolic import Dim, Verdict, to_text
from .facts import Axis, Capped, Contraction, Factor, Info, Product, add_power, index_of
from .results import Scale, ScaleFactor


class ScaleChecks:
    """SC404, SC405: the scale of the scores."""

    def _scale(self, product: Product, source: Info, key: Axis | None,
               output: Contraction) -> Scale:
        factors = product.inner_scale + source.scale
        scores = product.contraction
        public = tuple(ScaleFactor(f.node, f.divides, f.operand) for f in factors)
        coefficient: float | None = 1.0
        powers: list[tuple[Dim, Fraction]] = []
        scalars = [self.scalar(factor.node) for factor in factors]
        for factor, scalar in zip(factors, scalars):
            sign = -1 if factor.divides else 1
            if scalar.opaque:
                coefficient = None
            elif coefficient is not None and scalar.coef != 0:
                coefficient *= scalar.coef ** sign
            for base, exponent in scalar.powers:
                add_power(powers, base, exponent * sign)
        expected = product.size
        if any(type(op) is Capped for op in source.ops):
            # soft-capped (`c * tanh(S / c)`): the cap's own factors are among the scale's,
            # a traced module's `c` a number read as anything of its size: no opinion
            verdict, radicand = "capped", None
        elif not factors:
            verdict, radicand = "none", None
        elif not powers:
            verdict, radicand = "constant", None
        else:
            verdict, radicand = self._scale_verdict(powers, expected)
            if verdict == "wrong" and radicand is not None and expected is not None \
                    and not self._evident(radicand, expected, product, output):
                verdict = "deliberate"
            elif verdict == "unusual" and self._one_side(powers, expected, factors):
                verdict = "one_side"
        scale = Scale(public, coefficient, tuple(powers), radicand, expected, verdict)
        if verdict in ("wrong", "inverted", "one_side"):
            located = next(f for f, s in zip(factors, scalars) if s.powers)
            self._wrong_scale(product, factors, located, scale)
        elif verdict == "none" and not self._learned(scores, key):
            self._unscaled(product)
        return scale

    def _evident(self, radicand: Dim, expected: Dim, product: Product,
                 output: Contraction) -> bool:
        """Whether a scale by 1/sqrt(X), X not the contracted size, is evidently wrong:
        X is the size of another axis of the same formula (an axis of Q, K, the scores, V,
        the output, or of a declared input: sequence lengths, heads, the model width), a
        multiple of the contracted size or a part of it (`d_n` of `d_n + d_r`). A dim that
        is none of these (Gemma's `query_pre_attn_scalar` as a `dim` of its own, MLA's
        absorbed path scaled by the original head width) is a deliberate scale: no opinion."""
        system = self.system
        if symbolic.free_names(radicand) <= symbolic.free_names(expected) or \
                system.names_of_form(radicand) <= system.names_of_form(expected):
            return True  # built of the contracted size's own dims (through their
            # definitions: `4 * h * h` against `dim d = 2 * h`): a part, a power, a multiple
        for big, small in ((radicand, expected), (expected, radicand)):
            if system.divides(big, small):
                return True
        sizes: list[Dim] = []
        for contraction in (product.contraction, output):
            for info in contraction.infos:
                sizes += [a.size for a in info.axes or ()]
            sizes += [a.size for a in contraction.axes]
        for tensor in self.program.tensors.values():
            if tensor.kind == "input" and tensor.value.shape is not None:
                sizes += list(tensor.value.shape)
        return any(system.equal(radicand, size) for size in sizes)

    def _one_side(self, powers: list[tuple[Dim, Fraction]], expected: Dim | None,
                  factors: Sequence[Factor]) -> bool:
        """`(Q * d ** -0.25) @ K.T`: half of the symmetric scale, on one factor only."""
        if expected is None or not factors or any(f.operand is None for f in factors):
            return False
        ratio = symbolic.radicand([(base, 2 * exponent) for base, exponent in powers])
        if ratio is None or not symbolic.is_literal_one(ratio[1]):
            return False
        return self.system.equal(ratio[0], expected)

    def _learned(self, scores: Contraction, axis: Axis | None) -> bool:
        """The scores' axis comes straight from a parameter's axis: `X @ W_g` is a learned
        projection (a gate over experts, a classifier), not queries against keys; so is
        any product with a parameter as one factor (ConvBERT's dynamic kernel `x @ W.T`,
        reshaped before its softmax)."""
        for operand in scores.operands:
            stripped = self._strip(operand)
            named = self.program.tensors.get(stripped.name) \
                if isinstance(stripped, nodes.Name) else None
            if named is not None and named.kind == "param":
                return True
        if axis is None or axis.node is not scores.node or not axis.sources:
            return False
        operand, position = axis.sources[0]
        layout = scores.infos[operand].axes or ()
        name = layout[position].tensor if position < len(layout) else None
        tensor = self.program.tensors.get(name) if name is not None else None
        return tensor is not None and tensor.kind == "param"

    def _scale_verdict(self, powers: list[tuple[Dim, Fraction]], expected: Dim | None
                       ) -> tuple[str, Dim | None]:
        key = (tuple(powers), expected)
        known = self._verdicts.get(key)
        if known is None:
            known = self._verdicts[key] = self._judge_scale(powers, expected)
        return known

    def _judge_scale(self, powers: list[tuple[Dim, Fraction]], expected: Dim | None
                     ) -> tuple[str, Dim | None]:
        ratio = symbolic.radicand(powers)
        if ratio is None or expected is None:
            return "unusual", None
        numerator, denominator = ratio
        unit = symbolic.is_literal_one(denominator)
        radicand = numerator if unit else None
        system = self.system
        target = expected if unit else expected * denominator
        if system.equal(numerator, target):
            return "ok", radicand
        # A constant multiple of the contracted size (`sqrt(2 * d)`) is a model's choice; a
        # ratio that is constant only because the dims have sizes (a traced module's
        # `dim heads = 6`, `dim head_dim = 10`) is another width, not a constant (issue 31)
        if system.ratio_of_forms(numerator, target) is not None or \
                system.constant_ratio(numerator, target) == 1:
            return "ok", radicand
        if system.equal(numerator * expected, denominator):
            return "inverted", radicand
        if radicand is None:
            return "unusual", None
        if (symbolic.free_names(radicand) | symbolic.free_names(expected)) & self._inferred:
            # A sketch: inference named these dims and cannot know `sqrt(d)` meant the
            # head dim it called `k`.
            return "inferred", radicand
        return "wrong", radicand

    def _wrong_scale(self, product: Product, factors: Sequence[Factor], located: Factor,
                     scale: Scale) -> None:
        scores = product.contraction
        key = ("SC404", id(scores.node))
        if key in self._reported:
            return
        self._reported.add(key)
        assert scale.expected is not None
        expected = self.system.named(scale.expected)  # `hd`, not `2*h`, when the spec says so
        written = " ".join(("/ " if f.divides else "* ") + self._text(f.node) for f in factors)
        size = to_text(expected)
        if scale.verdict == "inverted":
            reason = codes.detail("scale_inverted", size=size)
        elif scale.verdict == "one_side":
            reason = codes.detail("scale_one_side", size=size)
        else:
            assert scale.radicand is not None
            reason = self._scale_reason(_whole_radicand(scale), expected)
        said = codes.help_text("scale_by", size=symbolic.spaced(size))
        self._report(codes.SCALE.diag(
            located.node.span, scores=self._text(product.node), written=written, size=size,
            where="" if product.parts else self._contracted_where(scores), reason=reason,
            notes=self._scores_note(scores) + self._stored_scale_notes(factors)
            + (self._unscaled_side(scores, factors) if scale.verdict == "one_side" else []),
            help=[said],
            fixes=self._scale_fix(factors, said, size)))

    def _unscaled_side(self, scores: Contraction, factors: Sequence[Factor]) -> list[Note]:
        """Half of a symmetric scale (`q * d ** -0.25` and `k` unscaled, Whisper's): a note
        where the other factor is defined (or written), where its half was left out."""
        scaled = {id(f.operand) for f in factors}
        notes = []
        for operand in scores.operands:
            if id(operand) in scaled:
                continue
            name = self._strip(operand)
            definition = next((s for s in self.program.statements
                               if isinstance(s, (nodes.Define, nodes.Output))
                               and isinstance(name, nodes.Name) and s.name.name == name.name),
                              None)
            notes.append(codes.note("unscaled_side", (definition or operand).span,
                                    operand=self._text(name)))
        return notes

    def _stored_scale_notes(self, factors: Sequence[Factor]) -> list[Note]:
        """A note at the definition of each named scale (`scale = d ** -0.25`, Whisper's):
        where its value is written, and so where a wrong one is fixed."""
        notes = []
        for factor in factors:
            definition = self.scalars.get(factor.node.name) \
                if isinstance(factor.node, nodes.Name) else None
            if definition is not None:
                notes.append(codes.note("scale_defined", definition.span, name=factor.node.name,
                                        value=self._text(definition)))
        return notes

    def _scale_fix(self, factors: Sequence[Factor], said: str, size: str) -> list[Fix]:
        """The help as an edit where the scale is one `/ sqrt(X)`: `sqrt(X)` becomes
        `sqrt(size)` (fixcheck keeps it only if the spec then checks clean). Other forms
        (`* X ** -0.5`, a scale split over Q and K) have no one place to edit: the help
        stays words, and `explain SC404` says so."""
        if len(factors) != 1 or not factors[0].divides:
            return []
        node = factors[0].node
        if not (isinstance(node, nodes.Call) and node.func.name == "sqrt" and len(node.args) == 1
                and not node.keywords):
            return []
        return [Fix(said, (Edit(node.span, f"sqrt({size})"),))]

    def _scale_reason(self, radicand: Dim, expected: Dim) -> str:
        system = self.system
        x, size = to_text(radicand), to_text(expected)
        if system.equal(radicand, expected * expected):
            return codes.detail("scale_squared", size=size)
        for big, small in ((radicand, expected), (expected, radicand)):
            if system.divides(big, small):
                quotient = system.quotient(system.canonical(big), system.canonical(small))
                if not symbolic.is_literal_one(quotient):
                    key = "scale_sized_multiple" if quotient.is_number else "scale_multiple"
                    return codes.detail(key, big=to_text(big), small=to_text(small),
                                        factor=to_text(quotient))
        if symbolic.free_names(radicand) < symbolic.free_names(expected):
            return codes.detail("scale_part", x=x, size=size)
        verdict = system.equal(radicand, expected)
        relation = codes.RELATIONS["differs_from" if verdict is Verdict.DIFFERENT else "unproved_to"]
        return codes.detail("scale_differs", x=x, relation=relation, size=size)

    def _contracted_where(self, scores: Contraction) -> str:
        operand = self._strip(scores.operands[0])
        positions = [index_of(self.infos[id(operand)].axes or (), scores.infos[0].axes[p])
                     for p in scores.summed[0] if scores.infos[0].axes]
        value = self.types.get(id(operand))
        if value is None or not positions or positions[0] is None:
            return ""
        return codes.detail("contracted_axis", index=positions[0] - len(value.shape or ()),
                            operand=self._text(operand), shape=value.text())

    def _unscaled(self, product: Product) -> None:
        key = ("SC405", id(product.contraction.node))
        size = product.size
        if key in self._reported or size is None:
            return
        self._reported.add(key)
        text = to_text(size)
        self._report(codes.UNSCALED.diag(
            product.node.span, scores=self._text(product.node), size=text,
            help=[codes.help_text("scale_by", size=symbolic.spaced(text))]))


def _whole_radicand(scale: Scale) -> Dim:
    """X of a scale by `1 / sqrt(X)` with its number in it: `sqrt(4 * h * h)` is a
    coefficient 1/2 on `1 / sqrt(h * h)`, and X is `4 * h * h` (the head width squared
    under `dim d = 2 * h`), not `h * h`."""
    assert scale.radicand is not None
    if not scale.coefficient:
        return scale.radicand
    root = round(1 / scale.coefficient)
    if root < 1 or abs(root * scale.coefficient - 1) > 1e-12:
        return scale.radicand
    return scale.radicand * symbolic.integer(root * root)

