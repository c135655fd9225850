"""What the mask model finds in a checked program (the entry point :func:`analyse`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from collections.abc import Collection
from typing import Any

from ..check.program import Program
from ..messages import codes
from ..messages.diagnostics import Diagnostic, Span, line_starts, span_text
from ..symbolic import SEARCH_SIZE, Outcome, Question, Unsupported
from ..syntax import nodes
from ..syntax.functions import Functions, mask_roles, score_roles
from .lift import lift, lift_along
from .polarity import against, stated_masks

# The properties a claim may name: the kind of function each applies to, and whether it
# takes one argument.
PROPERTIES = {"causal": ("mask", False), "window": ("mask", True), "every_row": ("mask", False),
              "reads_keys": ("mask", True), "same_as": ("mask", True),
              "keeps_masked": ("score", False), "decays": ("score", False)}


@dataclass
class Finding:
    """One property of one function: ``outcome.status`` is "proved", "refuted" or
    "undetermined"; ``text`` the property in words; ``stated`` whether the spec claimed it
    (or a convention implied it) rather than the model checking it on its own."""

    function: str
    property: str
    text: str
    outcome: Outcome
    span: Span
    stated: bool = True


@dataclass
class MaskFunction:
    """A function of positions: a ``mask`` (bool body) or a ``score`` change."""

    name: str
    kind: str
    params: tuple[str, ...]
    roles: tuple[str, ...]
    definition: nodes.FunctionDef
    question: Question | None  # None: the body has no formula over positions
    sizes: dict[str, object] = field(default_factory=dict)  # role -> the applied length


@dataclass
class MaskModel:
    functions: dict[str, MaskFunction] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


def padding_diagnostics(program: Program) -> list[Diagnostic]:
    """SC412 for a padding vector and-ed into a mask on the query side, in a spec the mask
    model does not otherwise analyse (no function of positions, no convention)."""
    model = MaskModel()
    _Analysis(program, Functions(), model)._tensor_padding_sides()
    return model.diagnostics


def analyse(program: Program) -> MaskModel:
    """The functions of ``program``, every claim and stated convention about them proved or
    refuted, and every mask `flex_attention` applies checked for fully masked rows."""
    functions: Functions = program.functions or Functions()
    model = MaskModel()
    _Analysis(program, functions, model).run()
    return model


class _Analysis:
    def __init__(self, program: Program, functions: Functions, model: MaskModel) -> None:
        self.program, self.functions, self.model = program, functions, model
        declarations = [s for s in program.statements if isinstance(s, nodes.TensorDecl)]
        self.inputs = {d.name.name for d in declarations}
        self.bools = {d.name.name for d in declarations if d.shape.is_bool}
        self.choosable = self.bools | {d.name.name for d in declarations
                                       if d.shape.element == "int"}
        self.constraints = [s for s in program.statements if isinstance(s, nodes.Constraint)]
        self.starts = line_starts(program.source)

    def run(self) -> None:
        applied = self._applied_sizes()
        for name, definition in self.functions.definitions.items():
            self._add(name, definition, applied.get(name, {}))
        for claim in self.functions.claims:
            self._claim(claim)
        self._conventions()
        self._masks_on_scores()
        reported: set[tuple[str, str]] = set()
        for mask_name, _score, _q, _k, span in self.functions.applications:
            self._rows(mask_name, span)
            self._padding_sides(self.model.functions.get(mask_name or ""), reported)
        for table_name, lengths, _span in self.functions.tables:
            self._padding_sides(self._at_lengths(table_name, lengths), reported)
        self._tensor_padding_sides()
        for definition in self.functions.definitions.values():
            self._self_comparisons(definition)
        for function in list(self.model.functions.values()):
            self._parts_never_true(function)

    # --- the functions ---------------------------------------------------------------

    def _applied_sizes(self) -> dict[str, dict[str, object]]:
        """Each function's query and key lengths, from the first `flex_attention` applying it."""
        found: dict[str, dict[str, object]] = {}
        for mask_name, score_name, q, k, _span in self.functions.applications:
            sizes = {role: self._length(name, axis) for role, name, axis in
                     (("q", q, -2), ("k", k, -2), ("h", q, -3), ("b", q, -4))}
            known = {r: s for r, s in sizes.items() if s is not None}
            stack = [n for n in (mask_name, score_name) if n is not None]
            while stack:  # the functions an applied one calls share its lengths
                name = stack.pop()
                if name not in found:
                    found[name] = known
                    stack.extend(self.functions.calls.get(name, set())
                                 - self.functions.moved.get(name, set()))
        for claim in self.functions.claims:
            if len(claim.lengths) == 2:
                found[claim.name.name] = dict(zip(("q", "k"), claim.lengths))
        return found

    def _length(self, tensor: str, axis: int) -> object | None:
        found = self.program.tensors.get(tensor)
        shape = found.value.shape if found is not None else None
        return shape[axis] if shape is not None and len(shape) >= -axis else None

    def _add(self, name: str, definition: nodes.FunctionDef, sizes: dict[str, object]) -> None:
        params = tuple(p.name for p in definition.params)
        # FlexAttention's signatures tell them apart: a score change takes the score first.
        kind = "score" if score_roles(len(params)) else "mask"
        roles = (score_roles if kind == "score" else mask_roles)(len(params))
        if roles is None:
            self._error(definition.name.span, codes.MASK_TEXT["arity"].format(
                name=name, count=len(params)))
            return
        try:
            question: Question | None = Question(params, roles, definition.body, self.inputs,
                                                 self.bools, sizes, self.constraints,
                                                 self.choosable)
        except (Unsupported, TypeError, ValueError):
            question = None
        self.model.functions[name] = MaskFunction(name, kind, params, roles, definition,
                                                  question, sizes)

    # --- claims ------------------------------------------------------------------------

    def _claim(self, claim: nodes.Claim) -> None:
        function = self.model.functions.get(claim.name.name)
        if function is None:
            self._error(claim.name.span, codes.MASK_TEXT["unknown_function"].format(
                name=claim.name.name))
            return
        for item in claim.items:
            word = item.word.name
            wanted = PROPERTIES.get(word)
            if wanted is None or wanted[1] != (len(item.args) == 1) or len(item.args) > 1:
                self._error(item.span, codes.MASK_TEXT["unknown_property"].format(
                    word=word, choices="`causal`, `decays`, `every_row`, `keeps_masked`, "
                    "`reads_keys(x)`, `same_as(f)`, `window(W)`"))
                continue
            if wanted[0] != function.kind:
                self._error(item.span, codes.MASK_TEXT["wrong_kind"].format(
                    word=word, wanted=codes.MASK_TEXT[wanted[0]], name=function.name,
                    kind=codes.MASK_TEXT[function.kind]))
                continue
            argument = item.args[0] if item.args else None
            self._prove(function, word, argument, item.span,
                        inclusive=word == "window" and self._inclusive(argument))

    def _prove(self, function: MaskFunction, word: str, argument: nodes.Expr | None,
               span: Span, inclusive: bool = False, convention: str | None = None) -> None:
        if word == "reads_keys":
            self._reads_keys(function, argument, span)
            return
        width = self._source(argument) if argument is not None else ""
        text = codes.MASK_TEXT[word].format(width=width, other=width)
        question = function.question
        if question is None:
            self._undetermined(function, text, span, codes.MASK_TEXT["not_a_formula"].format(
                part=self._source(function.definition.body)))
            return
        checks = {"causal": [("later_key", question.later_key), ("own_hidden", question.own_key)],
                  "every_row": [("empty_row", question.every_row)],
                  "keeps_masked": [("masked_becomes", question.keeps_masked)],
                  "decays": [("farther_favoured", question.decays)]}
        if word == "same_as":
            other = self.model.functions.get(width)
            if other is None or other.question is None or other.kind != "mask":
                self._error(span, codes.MASK_TEXT["unknown_function"].format(name=width))
                return
            checks["same_as"] = [("differs", lambda: question.same_as(other.question))]
        if word == "window" and argument is not None:
            checks["window"] = [
                ("beyond_window", lambda: question.beyond(argument, inclusive)),
                ("edge_hidden", lambda: question.edge(argument, inclusive))]
        for reason, check in checks[word]:
            outcome = check()
            if outcome.status != "proved":
                break
        self.model.findings.append(Finding(function.name, word, text, outcome, span))
        if outcome.status == "refuted":
            self._refuted(function, text, span, reason, outcome, convention)
        elif outcome.status == "undetermined":
            self._undetermined(function, text, span, self._why_undetermined(outcome))

    def _refuted(self, function: MaskFunction, text: str, span: Span, reason: str,
                 outcome: Outcome, convention: str | None) -> None:
        question = function.question
        assert question is not None
        sizes = ", ".join(f"{n}={v}" for n, v in outcome.sizes) or codes.MASK_TEXT["any_size"]
        values = dict(outcome.positions)
        q = values.get(question.role_param.get("q", ""), 0)
        k = values.get(question.role_param.get("k", ""), 0)
        fields: dict[str, object] = {"sizes": sizes, "q": q, "k": k, "value": outcome.detail}
        if "q" in question.role_param and outcome.sizes:
            own = question.own_position(outcome.sizes, outcome.positions)
            fields.update(own=own, distance=own - k)
        because = codes.MASK_TEXT[reason].format(**fields)
        counterexample = tuple(outcome.sizes)
        if convention is not None:
            self.model.diagnostics.append(codes.MASK_CONVENTION.diag(
                span, name=function.name, what=codes.MASK_TEXT["not_property"].format(claim=text, reason=because),
                convention=convention, counterexample=counterexample))
            return
        self.model.diagnostics.append(codes.MASK_CLAIM_REFUTED.diag(
            span, name=function.name, claim=text, reason=because, counterexample=counterexample))

    def _undetermined(self, function: MaskFunction, text: str, span: Span, reason: str) -> None:
        self.model.diagnostics.append(codes.MASK_CLAIM_UNDETERMINED.diag(
            span, name=function.name, claim=text, reason=reason))

    def _why_undetermined(self, outcome: Outcome) -> str:
        if outcome.depends:
            return codes.MASK_TEXT["depends_on"].format(
                inputs=", ".join(f"`{name}`" for name in outcome.depends))
        if outcome.detail:
            return codes.MASK_TEXT["nonlinear"].format(parts=outcome.detail)
        return codes.MASK_TEXT["no_proof"].format(limit=SEARCH_SIZE)

    def _reads_keys(self, function: MaskFunction, argument: nodes.Expr | None,
                    span: Span) -> None:
        """Every read of the input is at the key position (its last index is the key)."""
        name = argument.name if isinstance(argument, nodes.Name) else self._source(argument)
        text = codes.MASK_TEXT["reads_keys"].format(input=name)
        key = function.params[function.roles.index("k")]
        for read in _reads(function.definition.body, name):
            last = nodes.strip_parens(read.indices[-1]) if read.indices else None
            if not (isinstance(last, nodes.Name) and last.name == key):
                index = self._source(read.indices[-1]) if read.indices else name
                self.model.diagnostics.append(codes.MASK_CLAIM_REFUTED.diag(
                    span, name=function.name, claim=text, reason=codes.MASK_TEXT[
                        "reads_query"].format(input=name, index=index, key=key)))
                self.model.findings.append(Finding(function.name, "reads_keys", text,
                                                   Outcome("refuted"), span))
                return
        self.model.findings.append(Finding(function.name, "reads_keys", text,
                                           Outcome("proved"), span))

    # --- conventions -----------------------------------------------------------------

    def _conventions(self) -> None:
        for statement in self.program.statements:
            if isinstance(statement, nodes.DimFree) and statement.conventions:
                self._window_convention(statement)
            elif isinstance(statement, nodes.TensorDecl) and statement.conventions:
                self._mask_convention(statement)
                self._cache_convention(statement)
            elif isinstance(statement, nodes.Define) and statement.conventions:
                self._relative_convention(statement)

    def _cache_convention(self, statement: nodes.TensorDecl) -> None:
        """A cache stated `cache_first` (or `cache_last`) is concatenated with the new keys
        or values at that end, wherever the concatenation is an attention's key axis."""
        words = {c.name for c in statement.conventions} & {"cache_first", "cache_last"}
        meaning = self.program.meaning
        if not words or meaning is None:
            return
        first = "cache_first" in words
        name = statement.name.name
        keys = {id(axis) for pattern in meaning.patterns
                for role in (pattern.key, pattern.value) if role is not None
                for axis, label in zip(meaning.axes(role.node) or (), role.axes)
                if label == "key"}
        for define in self.program.statements:
            joined = _concatenation(define)
            if joined is None:
                continue
            parts, axis = joined
            names = [nodes.strip_parens(p) for p in parts]
            at = [i for i, p in enumerate(names) if isinstance(p, nodes.Name) and p.name == name]
            axes = meaning.axes(define.value) or ()
            if not at or not -len(axes) <= axis < len(axes) or id(axes[axis]) not in keys:
                continue
            if at[0] != (0 if first else len(parts) - 1):
                self.model.diagnostics.append(codes.MASK_CONVENTION.diag(
                    define.span, name=define.name.name,
                    what=codes.MASK_TEXT["cache_after" if first else "cache_before"].format(
                        input=name),
                    convention=self._source(statement)))

    def _relative_convention(self, statement: nodes.Define) -> None:
        """Relative positions stated `key_minus_query` (or the reverse) point that way where
        they reach an attention's scores (a bias: ALiBi's distances, a relative table's
        index): the key's position counts up, the query's down."""
        meaning = self.program.meaning
        axes = meaning.axes(statement.value) if meaning is not None else None
        if not axes:
            return
        wanted = (-1, 1) if statement.conventions[0].name == "key_minus_query" else (1, -1)
        for pattern in meaning.patterns:
            for bias in pattern.biases:
                bias_axes = meaning.axes(bias.node) or ()
                by_axis = {id(a): {"query": "q", "key": "k"}.get(role or "")
                           for a, role in zip(bias_axes, bias.axes)}
                if not {id(a) for a in axes} & {i for i, r in by_axis.items() if r}:
                    continue
                body = lift_along(self.program, statement.value, by_axis)
                if body is None:
                    continue
                try:
                    question = Question(("q", "k"), ("q", "k"), body, self.inputs, self.bools,
                                        {}, self.constraints, self.choosable)
                except (Unsupported, TypeError, ValueError):
                    continue
                found = question.direction()
                if found is not None and found != wanted:
                    key = {(1, -1): "query_minus_key", (-1, 1): "key_minus_query"}.get(
                        found, "not_relative")
                    stated = statement.name.span.to(statement.conventions[-1].span)
                    self.model.diagnostics.append(codes.MASK_CONVENTION.diag(
                        statement.span, name=statement.name.name,
                        what=codes.MASK_TEXT[key], convention=span_text(
                            self.program.source, self.starts, stated)))
                return

    def _inclusive(self, width: nodes.Expr | None) -> bool:
        """A claimed `window(W)` of a dim stated `window inclusive` counts the key at W."""
        width = nodes.strip_parens(width) if width is not None else None
        return isinstance(width, nodes.Name) and any(
            isinstance(s, nodes.DimFree) and s.names[0].name == width.name
            and "inclusive" in {c.name for c in s.conventions} for s in self.program.statements)

    def _window_convention(self, statement: nodes.DimFree) -> None:
        words = {c.name for c in statement.conventions}
        if "window" not in words or not words & {"inclusive", "exclusive"}:
            return
        width = statement.names[0]
        stated = self._source(statement)
        against: set[str] = set()  # the functions found against it
        for function in [*self.model.functions.values(), *self._lifted()]:
            if function.kind != "mask" or width.name not in nodes.names_in(
                    function.definition.body) or "k" not in function.roles:
                continue
            if self.functions.calls.get(function.name, set()) & against:
                against.add(function.name)  # through a function it calls: said there
                continue
            argument = nodes.Name(width.name, width.span)
            before = len(self.model.diagnostics)
            self._prove(function, "window", argument, function.definition.span,
                        inclusive="inclusive" in words, convention=stated)
            if len(self.model.diagnostics) > before:
                against.add(function.name)

    def _masks_on_scores(self) -> None:
        """A mask written as tensors (`where(pad[:, None, :], S, -inf)`, `(1 - am) * -1e9`)
        that reads a stated input the other way round."""
        for node, name, keeps, declaration in against(self.program, stated_masks(self.program)):
            what = codes.MASK_TEXT["hides_kept" if not keeps else "keeps_dropped"].format(
                input=name)
            self.model.diagnostics.append(codes.MASK_CONVENTION.diag(
                node.span, name=self._source(node), what=what,
                convention=self._source(declaration)))

    def _lifted(self) -> list[MaskFunction]:
        """The attention's masks written as tensors, each as a function of the query and
        key positions where it can be read so (:mod:`.lift`): what they let through."""
        meaning = self.program.meaning
        found: list[MaskFunction] = []
        for pattern in meaning.patterns if meaning is not None else ():
            for mask in pattern.masks:
                if mask.after_softmax or mask.additive:
                    continue
                body = lift(self.program, mask.condition.node, mask.condition.axes)
                axes = meaning.axes(mask.condition.node)
                if body is None or axes is None:
                    continue
                if not mask.keeps:  # `where(m, -inf, S)` lets through where m is false
                    body = nodes.Unary("~", nodes.Paren(body, body.span), body.span)
                sizes = {{"query": "q", "key": "k"}[role]: axis.size
                         for axis, role in zip(axes, mask.condition.axes)
                         if role in ("query", "key")}
                name, span = self._written_at(mask.node, mask.condition.node)
                definition = nodes.FunctionDef(nodes.Ident(name, span),
                                               (nodes.Ident("q", span), nodes.Ident("k", span)),
                                               body, span)
                try:
                    question = Question(("q", "k"), ("q", "k"), body, self.inputs, self.bools,
                                        sizes, self.constraints, self.choosable)
                except (Unsupported, TypeError, ValueError):
                    continue
                found.append(MaskFunction(name, "mask", ("q", "k"), ("q", "k"), definition,
                                          question, sizes))
        return found

    def _written_at(self, mask: nodes.Expr, condition: nodes.Expr) -> tuple[str, Span]:
        """A mask written as tensors is named, and found, where its condition is written:
        at the definition of a named condition (`local = (j <= i) & (i - j < W)`, Gemma 3's
        window: where its width is read), else at the mask itself."""
        condition = nodes.strip_parens(condition)
        if isinstance(condition, nodes.Name):
            for statement in self.program.statements:
                if isinstance(statement, nodes.Define) and statement.name.name == condition.name:
                    return condition.name, statement.span
        return self._source(mask), mask.span

    def _mask_convention(self, statement: nodes.TensorDecl) -> None:
        words = {c.name for c in statement.conventions}
        if not words & {"keep", "drop"} or not statement.shape.is_bool:
            return
        name = statement.name.name
        keep = "keep" in words
        for function in self.model.functions.values():
            if function.question is None or function.kind != "mask":
                continue
            polarity = function.question.polarity(name)
            if (not keep) in polarity:
                what = codes.MASK_TEXT["hides_kept" if keep else "keeps_dropped"].format(
                    input=name)
                self.model.diagnostics.append(codes.MASK_CONVENTION.diag(
                    function.definition.span, name=function.name, what=what,
                    convention=self._source(statement)))

    # --- rows ------------------------------------------------------------------------

    def _rows(self, mask_name: str | None, span: Span) -> None:
        """A mask `flex_attention` applies hides no query's every key (SC433), or says
        nothing when that is not decided (it may depend on the inputs)."""
        function = self.model.functions.get(mask_name or "")
        if function is None or function.question is None or function.kind != "mask":
            return
        outcome = function.question.every_row()
        self.model.findings.append(Finding(function.name, "every_row",
                                           codes.MASK_TEXT["every_row"], outcome, span, False))
        if outcome.status == "refuted":
            sizes = ", ".join(f"{n}={v}" for n, v in outcome.sizes)
            query = dict(outcome.positions).get(function.question.role_param["q"], 0)
            self.model.diagnostics.append(codes.FULLY_MASKED_ROW.diag(
                span, name=function.name, query=query, sizes=sizes,
                counterexample=tuple(outcome.sizes)))

    def _tensor_padding_sides(self) -> None:
        """SC412 for a mask written as tensors that and-s a bool padding vector broadcast
        along the queries (`causal & pad[:, None, :, None]`) with other conditions: the same
        mistake as `pad[b, q_idx]` in a mask_mod, which the meaning pass's SC412 (a whole
        mask constant along the keys) does not see once a triangle is and-ed in. Added as
        well as replacing (`S + where(causal & pad[:, None, :, None], 0, -inf)`): the padded
        keys are seen all the same (issue 33)."""
        meaning = self.program.meaning
        if meaning is None:
            return
        definitions = {s.name.name: s.value for s in self.program.statements
                       if isinstance(s, nodes.Define)}
        lengths = self._vectors()
        seen: set[int] = set()
        shape_of = lambda node: self.program.type_of(node).shape  # noqa: E731
        for pattern in meaning.patterns:
            # every read of each input in this attention's masks: (part, sides, conjunct,
            # the query and key sizes)
            reads: dict[str, list[tuple[nodes.Expr, set[str | None], bool, object, object]]] = {}
            for mask in pattern.masks:
                if mask.after_softmax or id(mask.condition.node) in seen:
                    continue
                seen.add(id(mask.condition.node))
                axes = meaning.axes(mask.condition.node)
                roles = mask.condition.axes
                keys = [a.size for a, r in zip(axes or (), roles) if r == "key"]
                queries = [a.size for a, r in zip(axes or (), roles) if r == "query"]
                if len(keys) != 1 or len(queries) != 1:
                    continue
                parts = _parts(mask.condition.node, mask.keeps, definitions)
                alone = sum(conjunct for _p, conjunct in parts) < 2  # the meaning pass's SC412
                for part, conjunct in parts:
                    name, places = _broadcast_read(part, lengths, shape_of)
                    if name is None or places is None:
                        continue
                    at, rank = places[0], places[1]  # aligned with the condition from the right
                    sides = {roles[len(roles) - rank + i] if 0 <= len(roles) - rank + i
                             < len(roles) else None for i in at}
                    reads.setdefault(name, []).append(
                        (part, sides, conjunct and not alone, queries[0], keys[0]))
            for name, found in reads.items():
                if any("key" in sides for _p, sides, _c, _q, _k in found):
                    continue  # read at the key somewhere: a key padding (too)
                for part, sides, conjunct, query_size, key_size in found:
                    if conjunct and "query" in sides and str(lengths[name]) == str(key_size):
                        self.model.diagnostics.append(codes.MASK_AXIS.diag(
                            part.span, where=self._source(part), size=str(query_size),
                            key_size=str(key_size),
                            notes=[codes.note("padding_read", input=name)],
                            help=[codes.help_text("mask_keys")]))
                        break

    def _at_lengths(self, name: str, lengths: dict[str, nodes.Expr]) -> MaskFunction | None:
        """The mask function ``name`` at the lengths a table of it spans (a Hugging Face
        table: queries and keys of their own lengths, a decode step's too)."""
        function = self.model.functions.get(name)
        if function is None or function.kind != "mask":
            return None
        try:
            question = Question(function.params, function.roles, function.definition.body,
                                self.inputs, self.bools, lengths, self.constraints,
                                self.choosable)
        except (Unsupported, TypeError, ValueError):
            return None
        return MaskFunction(function.name, function.kind, function.params, function.roles,
                            function.definition, question, dict(lengths))

    def _padding_sides(self, function: MaskFunction | None,
                       reported: set[tuple[str, str]]) -> None:
        """SC412 for a mask `flex_attention` applies that reads a padding vector on the
        query side (`pad[b, q_idx]`): an input bool vector as long as the keys, read at the
        query position and never at the key's, one value of which hides the query's whole
        row. Padded queries see nothing and every query still sees the padded keys. Read at
        both positions (`pad[b, q_idx] & pad[b, kv_idx]`) it is a key padding too: nothing
        is said. Reported at the function that reads it (not at those that call it)."""
        if function is None or function.question is None or function.kind != "mask" \
                or "q" not in function.roles or "k" not in function.roles \
                or not function.question.reads_key_position():
            return  # a mask constant along the keys: the meaning pass's SC412
        for name, length in self._vectors().items():
            if not function.question.padding_on_queries(name, length):
                continue
            for reader in self._readers(function.name, name):
                if (reader.name, name) in reported:
                    continue
                reported.add((reader.name, name))
                where = self._read_text(reader.definition.body, name) or name
                size, key_size = function.question.lengths()
                key = reader.params[reader.roles.index("k")] if "k" in reader.roles else "k"
                self.model.diagnostics.append(codes.MASK_AXIS.diag(
                    reader.definition.span, where=where, size=size, key_size=key_size,
                    notes=[codes.note("padding_read", input=name)],
                    help=[codes.help_text("padding_keys", input=name, key_index=key)]))

    def _vectors(self) -> dict[str, object]:
        """The bool inputs and their last axis's size (a padding vector's length)."""
        found: dict[str, object] = {}
        for statement in self.program.statements:
            if isinstance(statement, nodes.TensorDecl) and statement.kind == "input" \
                    and statement.shape.is_bool:
                tensor = self.program.tensors.get(statement.name.name)
                shape = tensor.value.shape if tensor is not None else None
                if shape:
                    found[statement.name.name] = shape[-1]
        return found

    def _readers(self, applied: str, name: str) -> list[MaskFunction]:
        """The functions ``applied`` reaches (itself included) that read ``name`` at the
        query position themselves, not only through a function they call."""
        def reads(function_name: str) -> bool:
            found = self.model.functions.get(function_name)
            return found is not None and found.question is not None and "q" in found.roles \
                and "k" in found.roles and bool(found.question.reads_at_query(name))

        readers = []
        for current in sorted(self._reach(applied)):
            callees = self._reach(current) - {current}
            if reads(current) and not any(reads(c) for c in callees):
                readers.append(self.model.functions[current])
        return readers

    def _reach(self, name: str) -> set[str]:
        """``name`` and the functions it calls, directly or not."""
        seen, stack = set(), [name]
        while stack:
            current = stack.pop()
            if current not in seen:
                seen.add(current)
                stack.extend(self.functions.calls.get(current, ()))
        return seen

    def _read_text(self, body: nodes.Expr, name: str) -> str:
        """The source text of a read of ``name`` in ``body`` (`pad[b, q_idx]`)."""
        stack: list[object] = [body]
        while stack:
            node = stack.pop()
            if isinstance(node, nodes.Subscript):
                operand = nodes.strip_parens(node.operand)
                inner = nodes.strip_parens(operand.args[0]) if isinstance(operand, nodes.Call) \
                    and operand.func.name == "reshape" and operand.args else operand
                if isinstance(inner, nodes.Name) and inner.name == name:
                    return self._unflattened(node, name) if inner is not operand \
                        else self._source(node)
            if isinstance(node, (nodes.BinOp, nodes.Unary, nodes.Paren, nodes.Subscript,
                                 nodes.Call, nodes.ListExpr, nodes.Transpose)):
                stack.extend(nodes.children(node))
        return ""

    def _unflattened(self, read: nodes.Subscript, name: str) -> str:
        """A flat read of a two-axis input as the code wrote it: `reshape(pad, [B * T])[b *
        T + q_idx]` is `pad[b, q_idx]` (docs/torch.md: a read by two positions is written
        flattened); any other form as it is."""
        index = nodes.strip_parens(read.indices[0]) if len(read.indices) == 1 else None
        tensor = self.program.tensors.get(name)
        shape = tensor.value.shape if tensor is not None else None
        if isinstance(index, nodes.BinOp) and index.op == "+" and shape is not None \
                and len(shape) == 2:
            row = nodes.strip_parens(index.left)
            if isinstance(row, nodes.BinOp) and row.op == "*":
                return f"{name}[{self._source(row.left)}, {self._source(index.right)}]"
        return self._source(read)

    # --- comparisons of a value with itself ---------------------------------------------

    def _self_comparisons(self, definition: nodes.FunctionDef) -> None:
        """SC435: a comparison in a function's body whose two sides are the same expression
        (`ids[b, q_idx] == ids[b, q_idx]`) does not depend on the positions; an `|` or `&`
        of an expression with itself (`g[q_idx] | g[q_idx]`) is that expression. A score
        function's score is left alone (`score != score` is a NaN test)."""
        params = [p.name for p in definition.params]
        score = params[0] if score_roles(len(params)) else None
        roles = (score_roles if score else mask_roles)(len(params)) or ()
        positions = {role: name for role, name in zip(roles, params)}
        said: list[Span] = []  # an operation with itself inside one said is not said again
        for node in _operations(definition.body, _COMPARISONS):
            if any(d.code == codes.SELF_COMPARISON.id and d.span == node.op_span
                   for d in self.model.diagnostics) or any(s.contains(node.span) for s in said):
                continue  # a caller's body holds the callee's comparison, inlined, once more
            side = self._source(node.left)
            if not side or "".join(side.split()) != "".join(self._source(node.right).split()) \
                    or score is not None and score in set(nodes.names_in(node.left)):
                continue
            value = codes.MASK_TEXT["itself"].format(side=side) if node.op in ("&", "|") \
                else codes.MASK_TEXT["always_true" if node.op in ("==", "<=", ">=")
                                     else "always_false"]
            self.model.diagnostics.append(codes.SELF_COMPARISON.diag(
                node.op_span, comparison=self._source(node), side=side, value=value,
                help=self._other_position(node, positions)))
            said.append(node.span)

    def _other_position(self, node: nodes.BinOp, positions: dict[str, str]) -> list[str]:
        """`did you mean ids[q] == ids[k]?`: the right side read at the other position, when
        it reads exactly one of the query's and the key's."""
        query, key = positions.get("q"), positions.get("k")
        read = set(nodes.names_in(node.right))
        if query is None or key is None or (query in read) == (key in read):
            return []
        old, new = (query, key) if query in read else (key, query)
        right = _renamed(self._source(node.right), old, new)
        return [codes.help_text("self_comparison",
                                fixed=f"{self._source(node.left)} {node.op} {right}")]

    # --- a side of `|` that is never true ---------------------------------------------

    def _parts_never_true(self, function: MaskFunction) -> None:
        """SC436: a side of an `|` in a mask function's body that no position, size or
        value of the integer inputs makes true (`(k >= iv[p]) & (k < iv[p])`): the `|`
        adds nothing. A constant side (`False | m`) is left alone, and one holding a
        comparison with itself (SC435 says why: `(k < k) | ...`)."""
        if function.question is None or function.kind != "mask":
            return
        for node in _operations(function.definition.body, {"|"}):
            for side in (node.left, node.right):
                try:
                    never = function.question.never_true(side)
                except (Unsupported, TypeError, ValueError):
                    continue
                if never and not any(d.code == codes.NEVER_TRUE_PART.id and d.span == side.span
                                     or d.code == codes.SELF_COMPARISON.id
                                     and side.span.contains(d.span)
                                     for d in self.model.diagnostics):  # said once
                    self.model.diagnostics.append(codes.NEVER_TRUE_PART.diag(
                        side.span, part=self._source(side), name=function.name))

    # --- helpers -----------------------------------------------------------------------

    def _error(self, span: Span, problem: str) -> None:
        self.model.diagnostics.append(codes.MASK_CLAIM_UNKNOWN.diag(span, problem=problem))

    def _source(self, node: object) -> str:
        span = getattr(node, "span", None)
        return "" if span is None else span_text(self.program.source, self.starts, span)


#: the operations whose two sides, the same expression, make it constant or redundant
_COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">=", "&", "|"})


def _operations(node: nodes.Expr, ops: Collection[str]) -> list[nodes.BinOp]:
    """The binary operations of ``ops`` in ``node``, outermost first."""
    found = [node] if isinstance(node, nodes.BinOp) and node.op in ops else []
    return found + [o for child in nodes.children(node) for o in _operations(child, ops)]


def _renamed(text: str, old: str, new: str) -> str:
    return re.sub(rf"\b{re.escape(old)}\b", new, text)


def _concatenation(statement: nodes.Stmt) -> tuple[tuple[nodes.Expr, ...], int] | None:
    """The parts and the axis of a definition `x = concat([a, b], axis=k)`."""
    if not isinstance(statement, nodes.Define):
        return None
    value = nodes.strip_parens(statement.value)
    if not (isinstance(value, nodes.Call) and value.func.name == "concat" and value.args
            and isinstance(value.args[0], nodes.ListExpr)):
        return None
    given = [k.value for k in value.keywords if k.name.name in ("axis", "dim")]
    given += list(value.args[1:2])
    axis = nodes.strip_parens(given[0]) if given else nodes.Integer(0, "0", value.span)
    if isinstance(axis, nodes.Unary) and axis.op == "-" and isinstance(axis.operand, nodes.Integer):
        return value.args[0].items, -axis.operand.value
    if isinstance(axis, nodes.Integer):
        return value.args[0].items, axis.value
    return None


def _parts(node: nodes.Expr, keeps: bool, definitions: dict[str, nodes.Expr],
           depth: int = 0) -> list[tuple[nodes.Expr, bool]]:
    """The parts of a mask condition, each with whether it is a conjunct of what the mask
    lets through (every one must hold for a score to be kept): `a & b` kept, `~(a | b)`
    hidden, through `~`, parentheses and definitions; the reads inside another conjunct
    (`pad[...] | flag`) are listed too, as not conjuncts."""
    bare = nodes.strip_parens(node)
    if depth > 32:
        return [(bare, False)]
    if isinstance(bare, nodes.Name) and bare.name in definitions:
        return _parts(definitions[bare.name], keeps, definitions, depth + 1)
    if isinstance(bare, nodes.Unary) and bare.op == "~":
        return _parts(bare.operand, not keeps, definitions, depth + 1)
    if isinstance(bare, nodes.BinOp) and bare.op == ("&" if keeps else "|"):
        return [*_parts(bare.left, keeps, definitions, depth + 1),
                *_parts(bare.right, keeps, definitions, depth + 1)]
    if isinstance(bare, (nodes.Subscript, nodes.Name)):
        return [(bare, True)]
    found = [(bare, True)]  # a conjunct that is not a read itself
    stack: list[object] = [bare]
    while stack:  # reads inside another part: not conjuncts
        current = stack.pop()
        if isinstance(current, nodes.Subscript) and current is not bare:
            found.append((current, False))
        if isinstance(current, (nodes.BinOp, nodes.Unary, nodes.Paren, nodes.Call,
                                nodes.ListExpr, nodes.Transpose)):
            stack.extend(nodes.children(current))
    return found


def _broadcast_read(node: nodes.Expr, inputs: dict[str, object], shape_of: Any
                    ) -> tuple[str | None, tuple[list[int], int] | None]:
    """The bool input a part reads whole, under new axes only (`pad[:, None, :, None]`,
    `pad[:, None, ...][..., None]`): its name, the place of each of its axes in the part
    and the part's rank; else (None, None)."""
    chain: list[nodes.Subscript] = []
    bare = nodes.strip_parens(node)
    while isinstance(bare, nodes.Subscript) and all(
            isinstance(i, (nodes.NewAxis, nodes.Slice, nodes.EllipsisIndex))
            and (not isinstance(i, nodes.Slice) or (i.start, i.stop, i.step) == (None,) * 3)
            for i in bare.indices):
        chain.append(bare)
        bare = nodes.strip_parens(bare.operand)
    if not chain or not isinstance(bare, nodes.Name) or bare.name not in inputs:
        return None, None
    shape = shape_of(bare)
    if shape is None:
        return None, None
    places: list[int | None] = list(range(len(shape)))  # input axis -> its place now
    rank = len(shape)
    for subscript in reversed(chain):  # innermost first
        kept = sum(not isinstance(i, (nodes.NewAxis, nodes.EllipsisIndex))
                   for i in subscript.indices)
        moves: list[int | None] = []  # operand place -> result place
        out = 0
        for index in subscript.indices:
            if isinstance(index, nodes.NewAxis):
                out += 1
            elif isinstance(index, nodes.EllipsisIndex):
                for _ in range(rank - kept):
                    moves.append(out)
                    out += 1
            else:
                moves.append(out)
                out += 1
        while len(moves) < rank:  # trailing axes not indexed
            moves.append(out)
            out += 1
        if len(moves) != rank:
            return None, None
        places = [moves[p] if p is not None else None for p in places]
        rank = out
    if None in places:
        return None, None
    return bare.name, ([p for p in places if p is not None], rank)


def _reads(body: nodes.Expr, name: str) -> list[nodes.Subscript]:
    found: list[nodes.Subscript] = []
    stack: list[object] = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, nodes.Subscript) and isinstance(node.operand, nodes.Name) \
                and node.operand.name == name:
            found.append(node)
        if isinstance(node, (nodes.BinOp, nodes.Unary, nodes.Paren, nodes.Subscript,
                             nodes.Call, nodes.ListExpr, nodes.Transpose)):
            stack.extend(nodes.children(node))
    return found
