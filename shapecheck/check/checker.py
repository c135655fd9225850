"""Syntax tree -> checked program: shapes for every statement, and diagnostics.

User mistakes are diagnostics, never exceptions. A statement that fails gets
an unknown shape, and unknown shapes cause no further errors.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any

from ..messages import codes
from ..records import Record
from ..syntax import invisible, nodes
from .builtins import (
    BUILTINS, KEYWORD_SYNONYMS, VARIADIC, Builtin, Kind, axis_index, broadcast, matmul,
    transpose_last_two,
)
from ..messages.diagnostics import (
    VERSION_MARK, Diagnostic, DiagnosticSink, Edit, Fix, Note, Span, line_starts, shown, span_text,
)
from .program import SCALAR, UNKNOWN, CallInfo, Inferred, Program, Tensor, Value
from .. import symbolic
from .rules import (
    AXIS_SAME_MEANING, MAX_ELEMENTS, MAX_RANK, Anchor, needed_fixes, needed_help, relation,
)
from .value_rules import combined_element
from ..symbolic import (
    Claim, Decision, Dim, DimBuilder, DimSystem, TooComplex, Verdict, as_int, free_names, to_text,
)

if TYPE_CHECKING:
    from .indexing import Entry

# `indexing` and `gathers` are imported where a subscript or gather is checked: a spec with
# neither never loads them (issue 36, the cold start).

RESERVED_WORDS = frozenset(
    "dim constraint input param output assert bool inf row col true false True False".split()
)
# A statement keyword where it cannot start its statement is a name (`output = O @ W`).
STATEMENT_KEYWORDS = frozenset("dim constraint input param output assert".split())
_UNSUPPORTED = "<unsupported>"  # a spelling that shapecheck.spellings reported already


class _Names(Record):
    """What each name is: a dim, a tensor, or unknown (its statement failed)."""

    kind: dict[str, str] = field(default_factory=dict)  # "dim" | "tensor" | "unknown"
    used: set[str] = field(default_factory=set)


class Checker:
    """Checks one spec. ``dims`` replaces the usual :class:`DimSystem` (inference passes
    its unifier); ``inferred`` declares what the spec uses without declaring it, before
    any statement (a sketch: :mod:`shapecheck.infer`); ``complete`` checks every
    statement however many diagnostics there are (inference collects every undeclared
    name so), instead of stopping after MAX_DIAGNOSTICS."""

    def __init__(self, source: str, bindings: dict[str, int] | None = None,
                 warn_unknown_bindings: bool = True, *, dims: DimSystem | None = None,
                 inferred: Inferred | None = None, complete: bool = False) -> None:
        self.source = source
        # Off when several files share the bindings: the CLI then warns once.
        self.warn_unknown_bindings = warn_unknown_bindings
        self._line_starts = line_starts(source)
        self.dims = dims if dims is not None else DimSystem(bindings=dict(bindings or {}))
        self._inferred = inferred
        self.sink = DiagnosticSink(limit=sys.maxsize) if complete else DiagnosticSink()
        self.names = _Names()
        self.program = Program(source=source, statements=[], dims=self.dims)
        self._has_output_statement = False
        self._builder = DimBuilder(self.dims, self._resolve_dim, [],
                                   needed_fixes=lambda decision: needed_fixes(decision, self.anchor))
        # Where a suggested dim or constraint goes, and each `input`/`param` statement.
        self._anchor = Anchor(Span(1, 1, 1, 1), at_start=True)
        self.declarations: dict[str, nodes.TensorDecl] = {}
        self._position = Span(1, 1, 1, 1)  # the statement being checked
        self._in_dims_phase = False
        # `dim` definitions whose positivity waits for every constraint: (name, node, value).
        self._deferred: list[tuple[str, nodes.Expr, Dim]] = []
        # Where each name is first defined, and as what: dims and constraints
        # are checked before tensors, but "first" is still by position.
        self._first: dict[str, tuple[Span, str]] = {}
        # `&` / `|` nodes that are an operand of a comparison: when they fail, the
        # cause is most likely precedence (`m & x > 0` is `(m & x) > 0`).
        self._compared: set[int] = set()
        # A builtin's name taken by a tensor (it shadows the builtin from there on).
        self._shadowed: dict[str, Span] = {}
        # Tensors defined as a dim expression (`hs = q.shape[-1]`, `n = C // H`): they also
        # stand for that dim where a size is needed, as a Python int does.
        self._dim_values: dict[str, Dim] = {}
        self._handlers: dict[type, Callable[[Any], None]] = {
            nodes.DimFree: self._dim_free, nodes.DimDef: self._dim_def,
            nodes.Constraint: self._constraint, nodes.TensorDecl: self._tensor_decl,
            nodes.Define: self._define, nodes.Assert: self._assert, nodes.Output: self._output,
            nodes.Broken: self._broken,
        }

    # --- driving ----------------------------------------------------------------------

    def run(self, statements: list[nodes.Stmt], parse_diagnostics: Sequence[Diagnostic]) -> Program:
        for statement in self.start(statements, parse_diagnostics):
            if not self.check(statement):
                break  # the rest is not checked
        return self.finish()

    # `run` in three steps, for a driver that checks some statements and reuses what
    # checking others did (:mod:`shapecheck.incremental`).

    def start(self, statements: list[nodes.Stmt],
              parse_diagnostics: Sequence[Diagnostic]) -> list[nodes.Stmt]:
        """Begin checking ``statements``; returns them in the order :meth:`check` must
        take them (dims and constraints first, see ``_dims_first``)."""
        self.sink.extend(list(parse_diagnostics) + invisible.find(self.source))
        self.program.statements = statements
        self._first = _first_definitions(statements)
        self.dims.taken = frozenset(self._first)
        self._anchor = _anchor(statements, self.source)
        for statement in statements:
            if isinstance(statement, nodes.TensorDecl):
                self.declarations.setdefault(statement.name.name, statement)
        if self._inferred is not None:
            self._declare_inferred(self._inferred)
        return _dims_first(statements)

    def check(self, statement: nodes.Stmt) -> bool:
        """Check the next statement; False (and nothing checked) once the diagnostics
        are full: the rest is not checked."""
        if self.sink.full:
            self.sink.dropped += 1
            return False
        self._position = self.dims.at = statement.span
        self._in_dims_phase = isinstance(statement, (nodes.DimFree, nodes.DimDef, nodes.Constraint))
        if self._deferred and not is_dim_statement(statement):
            self._decide_deferred()
        reported = len(self.sink.items) + self.sink.dropped
        try:
            self._handlers[type(statement)](statement)
        except TooComplex as error:
            self._too_complex(statement, error)
        if len(self.sink.items) + self.sink.dropped > reported:
            # A statement that failed may have stopped before looking at every name in
            # it; they are used all the same (no SC401 for an input used only there).
            self.names.used.update(nodes.names_in(statement))
        return True

    def finish(self) -> Program:
        """The checked program, once every statement has been checked (or skipped)."""
        self._finish()
        self.program.recheck_statements = self._recheck_statements
        return self.program

    def _recheck_statements(self, source: str, statements: Sequence[nodes.Stmt],
                            redefined: set[str]) -> list[list[Diagnostic]]:
        """Check some tensor statements again, as they would be in an edited spec
        (``source``), against this checked spec: its dims and constraints, and the tensors
        it already knows (:mod:`shapecheck.fixcheck` verifies a suggested edit so).
        ``redefined`` names are defined anew by ``statements``. The diagnostics of each."""
        trial = Checker(source, dict(self.dims.bindings), self.warn_unknown_bindings,
                        dims=self.dims.fork(), inferred=self._inferred)
        trial.names.kind = dict(self.names.kind)
        trial.names.used = set(self.names.used)
        trial.program.tensors = dict(self.program.tensors)
        trial._anchor, trial.declarations = self._anchor, dict(self.declarations)
        trial._first = dict(self._first)
        for name in redefined:
            trial.names.kind.pop(name, None)
            trial.program.tensors.pop(name, None)
        for name, first in _first_definitions(list(statements)).items():
            if name in redefined or name not in trial._first:
                trial._first[name] = first
        for statement in statements:
            if isinstance(statement, nodes.TensorDecl):
                trial.declarations[statement.name.name] = statement
        found = []
        for statement in statements:
            before = len(trial.sink.items)
            trial.check(statement)
            found.append(trial.sink.items[before:])
        return found

    def first_definition(self, name: str) -> tuple[Span, str] | None:
        """Where ``name`` is first defined in the spec, and as what ("dim", "tensor")."""
        return self._first.get(name)

    @property
    def position(self) -> Span:
        """The statement being checked."""
        return self._position

    @property
    def anchor(self) -> Anchor:
        """Where a suggested dim or constraint goes: after the last dim or constraint
        statement, or, for a dim or constraint statement (checked in file order, before
        any later constraint), on the line before it."""
        if self._in_dims_phase:
            span = Span(self._position.line, 1, self._position.line, 1)
            return Anchor(span, at_start=True, newline=self._anchor.newline)
        return self._anchor

    def _declare_inferred(self, inferred: Inferred) -> None:
        """Declare what the spec uses undeclared, as if the declarations stood first.
        The dims are used by those tensors, so none is reported unused."""
        for name, span in inferred.dims:
            self.dims.declare_free(name, span)
            self.names.kind[name] = "dim"
            self.names.used.add(name)
        for tensor in inferred.tensors:
            self.program.tensors[tensor.name] = Tensor(
                tensor.name, "input", tensor.value, tensor.span, tensor.span, inferred=True)
            self.names.kind[tensor.name] = "tensor"
            self.names.used.add(tensor.name)  # inferred from its uses: never unused
        self.program.inferred = inferred

    def _declared_later(self, node: nodes.Name) -> bool:
        """A dim used by a tensor statement above its declaration (see _dims_first)."""
        declared = self._first[node.name][0] if node.name in self._first else None
        if declared is None or (declared.line, declared.column) < (
                self._position.line, self._position.column):
            return False
        self.report(codes.UNDEFINED.diag(
            node.span, name=node.name,
            notes=[codes.note("declared_later", declared, name=node.name)]))
        return True

    def _too_complex(self, statement: nodes.Stmt, error: TooComplex) -> None:
        """The algebra this statement needs passed the budget: SC003, and what it
        defines is unknown (so its uses cause no further errors)."""
        self._flush_builder()
        self.report(codes.LIMIT.diag(statement.span, detail=error.detail))
        for name in _defined_names(statement):
            self.names.kind.setdefault(name, "unknown")

    def _finish(self) -> None:
        if self._deferred:
            self._decide_deferred()
        self._warn_unused()
        self._warn_unknown_bindings()
        if not self._has_output_statement:
            # A version that a later statement replaces is not an output (`y = a; y = b`).
            self.program.outputs = [
                name for name, tensor in self.program.tensors.items()
                if tensor.kind == "defined" and name not in self.names.used
                and VERSION_MARK not in name
            ]
        if self.sink.dropped:
            last = self.sink.items[-1].span
            self.sink.items.append(codes.TOO_MANY.diag(last, count=self.sink.limit))
        self.program.diagnostics = self.sink.sorted()

    def report(self, diagnostic: Diagnostic) -> None:
        self.sink.add(diagnostic)

    def _flush_builder(self) -> None:
        for diagnostic in self._builder.diagnostics:
            self.report(diagnostic)
        self._builder.diagnostics.clear()

    # --- names ------------------------------------------------------------------------

    def _claim(self, ident: nodes.Ident, kind: str) -> bool:
        """Register a new name; report reserved words, builtins and redefinitions."""
        name = ident.name
        shadowing = kind == "tensor" and name in BUILTINS
        keyword = kind == "tensor" and name in STATEMENT_KEYWORDS
        if (name in RESERVED_WORDS and not keyword) or (name in BUILTINS and not shadowing):
            what = codes.detail("reserved_word" if name in RESERVED_WORDS else "builtin_function")
            self.report(codes.RESERVED.diag(ident.span, name=name, what_kind=what))
            self.names.kind.setdefault(name, "unknown")
            return False
        first_here = self._first.get(name)
        first = first_here[0] if first_here is not None else None
        if name in self.names.kind or (first is not None and first != ident.span):
            fresh = self._fresh_name(name)
            rename = codes.help_text("rename", name=fresh)
            self.report(codes.REDEFINED.diag(
                ident.span, name=name,
                notes=[codes.note("first_defined", first, name=name)] if first else [],
                help=[rename] if kind == "tensor" else [],
                fixes=[Fix(rename, (Edit(ident.span, fresh),))] if kind == "tensor" else [],
            ))
            return False
        self.names.kind[name] = kind
        if shadowing:
            self._shadowed[shown(name)] = ident.span
        return True

    def _undefined(self, name: str, span: Span, role: str) -> None:
        """SC101; the use is recorded for inference, with its ``role``: "dim" (a dim is
        needed), "value" (a value: a tensor, or a dim as a scalar) or "tensor" (only a
        tensor will do: `output X`, `assert X: [...]`)."""
        self.program.undeclared.setdefault(name, []).append((span, role))
        candidates = [n for n, k in self.names.kind.items() if k != "unknown"]
        close = _close_matches(name, candidates, n=1, cutoff=0.6)
        if not close:
            close = [n for n in candidates if n.lower() == name.lower()][:1]
        self.report(codes.UNDEFINED.diag(span, name=name, **_did_you_mean(span, close)))

    def _resolve_dim(self, node: nodes.Name, role: str = "dim") -> Dim | None:
        """The dim a name stands for, or report why there is none (``role`` "value":
        the name stands where a value is needed, and is not a dim or a tensor)."""
        if isinstance(node, nodes.ShapeOf):
            return self._shape_of(node)
        kind = self.names.kind.get(node.name)
        if kind == "dim":
            self.names.used.add(node.name)
            return None if self._declared_later(node) else self.dims.symbol_of(node.name)
        if kind == "tensor" and node.name in self._dim_values:
            self.names.used.add(node.name)
            return self._dim_values[node.name]
        if kind == "unknown":
            self.names.used.add(node.name)
            return None
        first = self._first.get(node.name)
        if role == "value" and kind is None and first is not None and first[1] == "tensor":
            # a tensor used above its definition
            self.report(codes.UNDEFINED.diag(
                node.span, name=node.name,
                notes=[codes.note("defined_later", first[0], name=node.name)]))
            return None
        if kind == "tensor" or (kind is None and first is not None and first[1] == "tensor"):
            self.report(codes.WRONG_KIND.diag(node.span, name=node.name,
                                              actual=codes.detail("noun_tensor"),
                                              expected=codes.detail("noun_dim")))
            return None
        if node.name in BUILTINS or node.name in RESERVED_WORDS:
            what = codes.detail("builtin_function" if node.name in BUILTINS else "reserved_word")
            self.report(codes.RESERVED.diag(node.span, name=node.name, what_kind=what))
            return None
        self._undefined(node.name, node.span, role)
        return None

    # --- dims and constraints ----------------------------------------------------------------

    def _dim_free(self, stmt: nodes.DimFree) -> None:
        for ident in stmt.names:
            if self._claim(ident, "dim"):
                self.dims.declare_free(ident.name, ident.span)

    def _dim_def(self, stmt: nodes.DimDef) -> None:
        value = self._dim_expr(stmt.value, defer=stmt.name.name)
        if not self._claim(stmt.name, "dim"):
            return
        if value is None:
            self.names.kind[stmt.name.name] = "unknown"
            return
        name = stmt.name.name
        fixed = as_int(value)
        if fixed is not None:
            bound = self.dims.bindings.get(name)
            if bound is not None and bound != fixed:
                self.report(codes.BAD_BINDING.diag(stmt.span, detail=codes.detail(
                    "binding_contradicts_value", name=name, bound=bound, value=fixed)))
            self.dims.declare_fixed(name, fixed, stmt.name.span)
            return
        self.dims.declare_derived(name, value, stmt.name.span)
        for dim_name, bound, definition in self.dims.check_derived_bindings():
            self.report(codes.BAD_BINDING.diag(stmt.span, detail=codes.detail(
                "binding_contradicts_definition", name=dim_name, bound=bound,
                definition=to_text(value), value=to_text(definition))))

    def _dim_expr(self, node: nodes.Expr, allow_minus_one: bool = False,
                  defer: str | None = None) -> Dim | None:
        """A whole dim expression: built, and proved a positive integer. ``defer``: the
        name a `dim` statement defines; a positivity it cannot prove yet is decided once
        every dim statement is checked, since a constraint below it may prove it."""
        value = self._builder.build(node, allow_minus_one)
        self._flush_builder()
        if value is None:
            return None
        if allow_minus_one and value == -1:
            return value
        verdict = self.dims.positive(value)
        if verdict is Verdict.UNPROVED and defer is not None:
            self._deferred.append((defer, node, value))
            return value
        if not verdict:
            self.report(self._not_positive(node, value, self.dims.decide(Claim.positive(value))))
            return None
        return value

    def _decide_deferred(self) -> None:
        """The definitions whose positivity waited for the spec's constraints (issue 18):
        SC201 now for each one that the whole spec still does not make a size; the dim
        is then unknown, so that nothing that uses it is reported again."""
        deferred, self._deferred = self._deferred, []
        for name, node, value in deferred:
            try:
                if self.dims.positive(value):
                    continue
                found = self._not_positive(
                    node, value, self.dims.decide_definition(name, Claim.positive(value)))
            except TooComplex as error:  # past the budget: SC003 at the definition
                found = codes.LIMIT.diag(node.span, detail=error.detail)
            self.report(found)
            self.names.kind[name] = "unknown"

    def _not_positive(self, node: nodes.Expr, value: Dim, decision: Decision) -> Diagnostic:
        """SC201: refuted (the sizes where it is not positive), undetermined, or not
        positive at the bindings; the help adds the constraint, or binds a dim."""
        # "at the bindings" only when there are dims to bind: `0` is simply not positive.
        at_bindings = decision.verdict is Verdict.DIFFERENT and free_names(value)
        reason = codes.detail("not_positive_at_bindings") if at_bindings else ""
        example = decision.counterexample
        if example is not None:
            reason = codes.detail("not_positive_at", value=example.sides[0], values=example.text())
        helps: list[str] = []
        if decision.verdict is Verdict.UNPROVED:
            helps = needed_help(decision) + [
                codes.help_text("bind_dim", name=n) for n in sorted(free_names(value))[:1]]
        return codes.NOT_POSITIVE.diag(node.span, expr=to_text(value), reason=reason, help=helps,
                                       fixes=needed_fixes(decision, self.anchor),
                                       counterexample=example.values if example else ())

    def _constraint(self, stmt: nodes.Constraint) -> None:
        left = self._builder.constraint_side(stmt.left)
        right = self._builder.constraint_side(stmt.right)
        self._flush_builder()
        if left is None or right is None:
            return
        text = f"{to_text(left)} {stmt.op} {to_text(right)}"
        outcome = self.dims.add_constraint(left, stmt.op, right, text, stmt.span)
        if outcome.status == "trivial":
            self.report(codes.CONSTRAINT_UNPROVABLE.diag(stmt.span, constraint=text))
        elif outcome.status in ("violated", "unsatisfiable"):
            assert outcome.values is not None
            lhs_value, rhs_value, bound = outcome.values
            if outcome.status == "violated":
                reason = codes.constraint_reason(
                    "values", lhs_value=lhs_value, rhs_value=rhs_value,
                    op_negated=_NEGATED[stmt.op], bindings=bound)
            else:
                reason = codes.constraint_reason(
                    "no_integer", name=outcome.unknown, lhs_value=lhs_value,
                    rhs_value=rhs_value, bindings=bound)
            self.report(codes.CONSTRAINT_VIOLATED.diag(stmt.span, constraint=text, reason=reason))

    # --- tensors -----------------------------------------------------------------------------

    def _shape(self, shape: nodes.Shape) -> Value:
        # Every entry is checked, so that each independent mistake is reported
        # and every dim in the shape counts as used.
        dims = [self._dim_expr(entry) for entry in shape.dims]
        if any(dim is None for dim in dims):
            return UNKNOWN
        return self._within_rank(Value(tuple(dims), shape.is_bool, element=shape.element),  # type: ignore[arg-type]
                                 shape.span)

    def _tensor_decl(self, stmt: nodes.TensorDecl) -> None:
        value = self._shape(stmt.shape)
        if self._claim(stmt.name, "tensor"):
            self._add_tensor(stmt.name, stmt.kind, value, stmt.span)

    def _add_tensor(self, ident: nodes.Ident, kind: str, value: Value, span: Span) -> None:
        self.program.tensors[ident.name] = Tensor(ident.name, kind, value, span, ident.span)
        if not value.known:
            self.names.kind[ident.name] = "unknown"

    def _define(self, stmt: nodes.Define) -> None:
        self._define_value(stmt.name, stmt.annotation, stmt.value, stmt.span, "define")

    def _define_value(self, ident: nodes.Ident, annotation: nodes.Shape | None,
                      expr: nodes.Expr, span: Span, where: str) -> None:
        value = self.value(expr)
        size = value.dim
        if value.dim is not None or (value.known and value.shape == () and _is_literal(expr)):
            value = Value((), value.is_bool, element=value.element)
        declared = self._shape(annotation) if annotation is not None else None
        if declared is not None and declared.known and value.known:
            if self._compare(ident, value, declared, annotation, where):
                # provably equal: keep the spec's own notation; `[N, N]` checks the shape
                # only, so a bool value (`M: [N, N] = X > 0`) stays bool, and an int or
                # complex one keeps its element type
                value = Value(declared.shape, value.is_bool, element=value.element)
        elif declared is not None and declared.known and not value.known:
            value = declared
        if self._claim(ident, "tensor"):
            self._add_tensor(ident, "defined", value, span)
            if size is not None and annotation is None:
                self._dim_values[ident.name] = size

    def _compare(self, ident: nodes.Ident, actual: Value, declared: Value,
                 annotation: nodes.Shape | None, where: str) -> bool:
        assert actual.shape is not None and declared.shape is not None
        # `[N, N]` checks the shape only; `bool[N, N]` also asks for a bool value.
        mismatch = len(actual.shape) != len(declared.shape) or (
            declared.is_bool and not actual.is_bool)
        decisions: list[Decision] = []
        if not mismatch:
            for got, want in zip(actual.shape, declared.shape):
                verdict = self.dims.equal(got, want)
                if not verdict:
                    mismatch = True
                    decisions.append(self.dims.decide(Claim.equal(want, got)))
        if mismatch:
            span = annotation.span if annotation is not None else ident.span
            helps = [h for d in decisions if d.verdict is Verdict.UNPROVED for h in needed_help(d)]
            # One entry that cannot be proved equal: its constraint is a fix (with several,
            # no one constraint would repair the annotation).
            fixes = needed_fixes(decisions[0], self.anchor) if len(decisions) == 1 else []
            self.report(codes.SHAPE_ANNOTATION.diag(
                span, name=ident.name, actual=actual.text(), declared=declared.text(),
                where=codes.detail(f"where_{where}"), help=helps, fixes=fixes,
                notes=self._origin_notes(ident.name) if where != "define" else [],
            ))
        return not mismatch

    def _assert(self, stmt: nodes.Assert) -> None:
        declared = self._shape(stmt.shape)
        # An assert only looks at a tensor: it does not make it "used", so a
        # tensor that is asserted and nothing else is still an output.
        actual = self._tensor_value(stmt.name, mark_used=False)
        if actual is not None and actual.known and declared.known:
            self._compare(stmt.name, actual, declared, stmt.shape, "assert")

    def _output(self, stmt: nodes.Output) -> None:
        self._has_output_statement = True
        self.program.outputs.append(stmt.name.name)
        if stmt.value is not None:
            self._define_value(stmt.name, stmt.annotation, stmt.value, stmt.span, "output")
            return
        actual = self._tensor_value(stmt.name)
        if stmt.annotation is not None:
            declared = self._shape(stmt.annotation)
            if actual is not None and actual.known and declared.known:
                self._compare(stmt.name, actual, declared, stmt.annotation, "output")

    def _tensor_value(self, ident: nodes.Ident, mark_used: bool = True) -> Value | None:
        kind = self.names.kind.get(ident.name)
        if kind == "tensor":
            if mark_used:
                self.names.used.add(ident.name)
            return self.program.tensors[ident.name].value
        if kind == "dim":
            self.report(codes.WRONG_KIND.diag(ident.span, name=ident.name,
                                              actual=codes.detail("noun_dim"),
                                              expected=codes.detail("noun_tensor")))
        elif kind is None:
            self._undefined(ident.name, ident.span, "tensor")
        elif kind == "unknown" and mark_used:
            self.names.used.add(ident.name)  # its statement failed; it is still used here
        return None

    def _broken(self, stmt: nodes.Broken) -> None:
        self.names.used.update(stmt.mentions)
        for name in stmt.defines:
            self.names.kind.setdefault(name, "unknown")

    # --- expressions ---------------------------------------------------------------------------

    def value(self, node: nodes.Expr) -> Value:
        result = self._within_rank(self._value(node), node.span)
        self.program.types[id(node)] = result
        return result

    def _within_rank(self, value: Value, span: Span) -> Value:
        """NumPy holds at most MAX_RANK axes, and MAX_ELEMENTS elements: a value with
        more cannot run (SC003). The elements counted are the sizes known as numbers
        (at bindings, every size; the others are at least 1)."""
        if value.rank <= MAX_RANK:
            elements = 1
            for size in value.shape or ():
                number = as_int(size)
                if number is None and self.dims.bindings:  # at bindings: its value
                    number = self.dims.evaluate(size)
                elements *= number if number is not None and number > 0 else 1
            if elements <= MAX_ELEMENTS:
                return value
            self.report(codes.LIMIT.diag(span, detail=codes.detail(
                "too_many_elements", power=elements.bit_length() - 1,
                limit=MAX_ELEMENTS.bit_length())))
            return UNKNOWN
        self.report(codes.LIMIT.diag(span, detail=codes.detail(
            "rank_too_large", rank=value.rank, limit=MAX_RANK)))
        return UNKNOWN

    def _value(self, node: nodes.Expr) -> Value:
        if isinstance(node, nodes.Name):
            return self._name_value(node)
        if isinstance(node, nodes.Integer):
            return _INTEGER  # `ids + 1` and `positions % 4` stay integers
        if isinstance(node, (nodes.Decimal, nodes.Inf)):
            return SCALAR
        if isinstance(node, nodes.Boolean):
            return Value((), is_bool=True)
        if isinstance(node, nodes.Paren):
            return self.value(node.inner)
        if isinstance(node, nodes.BinOp):
            return self._binop(node)
        if isinstance(node, nodes.Unary):
            return self._unary(node)
        if isinstance(node, nodes.Transpose):
            operand = self.value(node.operand)
            if not operand.known:
                return UNKNOWN
            ctx = self._ctx(node, {"x": node.operand})
            result = transpose_last_two(ctx, operand, "`.T`", self.text(node.operand))
            return result or UNKNOWN
        if isinstance(node, nodes.Call):
            return self._call(node)
        if isinstance(node, nodes.Subscript):
            return self._subscript(node)
        if isinstance(node, nodes.Update):
            return self._update(node)
        self.report(codes.SCALAR_OPERAND.diag(node.span, detail=_not_a_value(node)))
        return UNKNOWN

    def _shape_of(self, node: nodes.ShapeOf) -> Dim | None:
        """`x.shape[i]`, `x.size(i)`: the size of the tensor's axis i."""
        assert node.tensor is not None
        ident = nodes.Ident(node.tensor.name, node.tensor.span)
        value = self._tensor_value(ident)
        if value is None or not value.known:
            return None
        assert value.shape is not None
        if node.rank is not None and node.rank != value.rank:
            if node.axis == 0:  # once per `B, T, C = x.shape`
                self.report(codes.CALL_ARGS.diag(node.span, detail=codes.detail(
                    "unpack_shape", shape=value.text(), tensor=node.tensor.name,
                    count=node.rank)))
            return None
        axis = node.axis + value.rank if node.axis < 0 else node.axis
        if not 0 <= axis < value.rank:
            self.report(codes.AXIS.diag(node.span, axis=node.axis, rank=value.rank,
                                        shape=value.text()))
            return None
        return value.shape[axis]

    def _name_value(self, node: nodes.Name) -> Value:
        if isinstance(node, nodes.ShapeOf):
            size = self._shape_of(node)
            return UNKNOWN if size is None else Value((), dim=size)
        kind = self.names.kind.get(node.name)
        if kind == "tensor":
            self.names.used.add(node.name)
            return self.program.tensors[node.name].value
        if kind == "dim":
            self.names.used.add(node.name)
            if self._declared_later(node):
                return UNKNOWN
            return Value((), dim=self.dims.symbol_of(node.name), element="int")
        if kind == "unknown":
            self.names.used.add(node.name)
            return UNKNOWN
        self._resolve_dim(node, role="value")  # reports undefined / reserved
        return UNKNOWN

    def _unary(self, node: nodes.Unary) -> Value:
        operand = self.value(node.operand)
        if not operand.known:
            return UNKNOWN
        if node.op == "~":
            return Value(operand.shape, True) if self._logical_operand(node, node.operand, operand) \
                else UNKNOWN
        if operand.is_bool:
            self._warn_bool(node.operand, codes.detail("bool_in_unary", op=node.op))
        return Value(operand.shape, element=operand.element)

    def _logical_operand(self, node: nodes.BinOp | nodes.Unary, operand: nodes.Expr,
                         value: Value) -> bool:
        """`&`, `|` and `~` take bool operands (SC321)."""
        if value.is_bool:
            return True
        text = self.text(operand)
        helps = [codes.help_text("parenthesize_comparisons")] if id(node) in self._compared \
            else [codes.help_text("compare_first", operand=text)]
        self.report(codes.LOGICAL_OPERAND.diag(operand.span, op=node.op, operand=text,
                                               shape=value.text(), help=helps))
        return False

    def _warn_bool(self, operand: nodes.Expr, operation: str,
                   masked: tuple[nodes.BinOp, nodes.Expr] | None = None) -> None:
        """SC403. ``masked``: the operation `S + M` (or `S * M`) and its other operand,
        when the mask can be applied as written: `where(M, S, -inf)` (`0` for `*`)."""
        text = self.text(operand)
        if masked is None:
            self.report(codes.BOOL_ARITHMETIC.diag(
                operand.span, operand=text, operation=operation,
                help=[codes.help_text("apply_mask", mask=text)]))
            return
        whole, other = masked
        fill = "-inf" if whole.op == "+" else "0"
        fix = f"where({text}, {self.text(other)}, {fill})"
        help_text = codes.help_text("transpose", fix=fix)
        self.report(codes.BOOL_ARITHMETIC.diag(
            operand.span, operand=text, operation=operation, help=[help_text],
            fixes=[Fix(help_text, (Edit(whole.span, fix),), safe=False)]))

    def _fresh_name(self, name: str) -> str:
        """`Q2` for a second `Q` (or `Q3`, ...): a name no statement defines."""
        name = shown(name)
        index = 2
        while f"{name}{index}" in self._first:
            index += 1
        return f"{name}{index}"

    def _binop(self, node: nodes.BinOp) -> Value:
        if node.op in nodes.COMPARISONS:
            self._compared.update(id(operand) for operand in (node.left, node.right)
                                  if isinstance(operand, nodes.BinOp) and operand.op in nodes.LOGICAL)
        left, right = self.value(node.left), self.value(node.right)
        if not (left.known and right.known):
            return UNKNOWN
        ctx = self._ctx(node, {"left": node.left, "right": node.right})
        if node.op == "@":
            for operand, value in ((node.left, left), (node.right, right)):
                if value.is_bool:
                    self._warn_bool(operand, "`@`")
            result = matmul(ctx, left, right)
            return result or UNKNOWN
        if node.op in nodes.LOGICAL:
            valid = [self._logical_operand(node, operand, value)
                     for operand, value in ((node.left, left), (node.right, right))]
            if not all(valid):
                return UNKNOWN
        as_bools = node.op in nodes.LOGICAL or (
            left.is_bool and right.is_bool and node.op in _BOOL_WITH_BOOL) \
            or _set_or_not(node)
        for operand, value, other in ((node.left, left, node.right),
                                      (node.right, right, node.left)):
            if value.is_bool and not as_bools:
                # `S + M` with a bool mask M: `where(M, S, -inf)` applies it as written.
                masking = node.op in _MASKING and not (left.is_bool and right.is_bool)
                self._warn_bool(operand, f"`{node.op}`", (node, other) if masking else None)
        if node.op in _ORDERED and "complex" in (left.element, right.element):
            # Complex numbers have no order: `<`, `//`, `%` of them fail in NumPy and PyTorch.
            operand = node.left if left.element == "complex" else node.right
            self.report(codes.WRONG_ELEMENT.diag(operand.span, detail=codes.detail(
                "complex_input", builtin=node.op, text=self.text(operand),
                shape=(left if left.element == "complex" else right).text())))
            return UNKNOWN
        shape = broadcast(ctx, left, right, node.op)
        if shape is None:
            return UNKNOWN
        is_bool = as_bools or node.op in nodes.COMPARISONS
        return Value(shape, is_bool, element="" if is_bool else arithmetic_element(node.op, left, right))

    def _subscript(self, node: nodes.Subscript) -> Value:
        gather = self._gather_entry(node)
        if gather is not None:
            return self._gather(node, *gather)
        operand = self.value(node.operand)
        params: dict[str, Any] = {"x": node.operand}
        entries = self._entries(node.indices, params)
        if entries is None:
            return UNKNOWN
        if not operand.known:
            return UNKNOWN
        from .indexing import subscript_shape
        result = subscript_shape(self._ctx(node, params), operand, entries)
        if result is None:
            return UNKNOWN
        value, resolved = result
        self.program.subscripts[id(node)] = resolved
        return value

    def _entries(self, indices: Any, params: dict[str, Any]) -> list[Entry] | None:
        """The subscript's entries, each index recorded in ``params`` by its position (the
        rule reports through them); None when one cannot be read."""
        entries: list[Entry] = []
        for position, item in enumerate(indices):
            key = str(position)
            params[key] = item
            entry = self._index_entry(item, key, params)
            if entry is None:
                return None
            entries.append(entry)
        return entries

    def _update(self, node: nodes.Update) -> Value:
        """`cache[...] = value`: the operand's shape, once the slice's bounds are proved
        and the value has the slice's shape (or broadcasts to it)."""
        operand = self.value(node.operand)
        written = self.value(node.value)
        params: dict[str, Any] = {"x": node.operand}
        entries = self._entries(node.indices, params)
        if entries is None:
            return UNKNOWN
        if not (operand.known and written.known):
            return UNKNOWN
        from .indexing import subscript_shape
        result = subscript_shape(self._ctx(node, params), operand, entries)
        if result is None:
            return operand  # the new version has the old one's shape all the same
        part, resolved = result
        assert part.shape is not None and written.shape is not None
        problem = _write_problem(self.dims, part.shape, written.shape)
        if problem is not None:
            target = span_text(self.source, self._line_starts,
                               Span(node.span.line, node.span.column, node.bracket.end_line,
                                    node.bracket.end_column))
            self.report(codes.SLICE_WRITE.diag(
                node.value.span, value=self.text(node.value), shape=written.text(),
                target=target, slice=part.text(), reason=problem,
                notes=self.operand_notes(node.value)))
            return operand
        if written.is_bool and not operand.is_bool:
            self._warn_bool(node.value, "`=`")
        self.program.subscripts[id(node)] = resolved
        return operand
    def _gather_entry(self, node: nodes.Subscript) -> tuple[nodes.Expr, int] | None:
        """`E[ids]`, `x[:, positions]`, `freqs[..., pos]`: one integer tensor among whole
        axes is a gather (NumPy's integer-array indexing); its entry and its axis. Only a
        tensor that holds integers qualifies; anything else is indexed as before."""
        tensors = [i for i, item in enumerate(node.indices) if self._is_tensor_index(item)]
        if len(tensors) != 1:
            return None
        at = tensors[0]
        others = [item for i, item in enumerate(node.indices) if i != at]
        whole = all(isinstance(item, nodes.EllipsisIndex) or (
            isinstance(item, nodes.Slice) and item.start is None and item.stop is None
            and item.step is None) for item in others)
        index = node.indices[at]
        assert not isinstance(index, (nodes.Slice, nodes.EllipsisIndex, nodes.NewAxis))
        if not whole or self.value(index).element != "int":
            return None
        if any(isinstance(item, nodes.EllipsisIndex) for item in node.indices[at + 1:]):
            return None  # counted from the end: known only with the operand's rank
        if any(isinstance(item, nodes.EllipsisIndex) for item in node.indices[:at]):
            return index, at - len(node.indices)  # `x[..., pos]`: counted from the end
        return index, at

    def _is_tensor_index(self, item: nodes.Index) -> bool:
        """An entry of `x[...]` that is a tensor, not a dim expression: a tensor's name, a
        call, a subscript, an operator only tensors have, or arithmetic on any of them
        (`positions % W`, `arange(T) + 1`)."""
        if isinstance(item, (nodes.Slice, nodes.EllipsisIndex, nodes.NewAxis)):
            return False
        for node in _names_below(nodes.strip_parens(item)):
            if isinstance(node, nodes.Name) and self.names.kind.get(node.name) == "tensor":
                return True
            if isinstance(node, (nodes.Call, nodes.Subscript, nodes.Transpose)) or (
                    isinstance(node, nodes.BinOp) and node.op not in nodes.DIM_OPERATORS) or (
                    isinstance(node, nodes.Unary) and node.op == "~"):
                return True
        return False

    def _gather(self, node: nodes.Subscript, index: nodes.Expr, axis: int) -> Value:
        """The gather `x[..., ids, ...]`: `take(x, ids, axis)`, recorded as that call for
        every later pass (meaning, cost, backends)."""
        operand = self.value(node.operand)
        if not operand.known:
            return UNKNOWN
        params = {"x": node.operand, "indices": index}
        args = {"x": operand, "indices": self.value(index), "axis": axis}
        from .gathers import take
        result = take(self._ctx(node, params), args, "[...]", "indices")
        if result is None:
            return UNKNOWN
        self.program.calls[id(node)] = CallInfo("take", {"x": node.operand, "indices": index,
                                                         "axis": axis})
        return result

    def _index_entry(self, item: nodes.Index, key: str, params: dict[str, Any]) -> Entry | None:
        """One entry of `x[...]` with its dims built; None after reporting an error."""
        from .indexing import Entry
        if isinstance(item, nodes.EllipsisIndex):
            return Entry("ellipsis", key)
        if isinstance(item, nodes.NewAxis):
            return Entry("new", key)
        if not isinstance(item, nodes.Slice):
            index = self._index_dim(item)
            return None if index is None else Entry("index", key, index=index)
        parts: dict[str, Dim | None] = {}
        for part in ("start", "stop", "step"):
            part_node = getattr(item, part)
            params[f"{key}.{part}"] = part_node
            parts[part] = None if part_node is None else self._index_dim(part_node)
            if part_node is not None and parts[part] is None:
                return None
        return Entry("slice", key, **parts)

    def _index_dim(self, node: nodes.Expr) -> Dim | None:
        """An index or slice bound: a dim expression of any sign, never a tensor."""
        inner = nodes.strip_parens(node)
        if self._is_tensor_index(inner):
            # Its own mistakes are still reported, once (a gather may have looked at it).
            value = self.program.types[id(node)] if id(node) in self.program.types \
                else self.value(node)
            self.report(codes.BAD_INDEX.diag(node.span, detail=_tensor_index_detail(
                self.text(node), value)))
            return None
        value = self._builder.build(node)
        self._flush_builder()
        return value

    # --- calls ---------------------------------------------------------------------------------

    def _call(self, node: nodes.Call) -> Value:
        if node.func.name == _UNSUPPORTED:
            self.names.used.update(nodes.names_in(node.args))
            return UNKNOWN
        shadowed = self._shadowed.get(node.func.name)
        builtin = BUILTINS.get(node.func.name) if shadowed is None else None
        if shadowed is not None:
            self.report(codes.NOT_CALLABLE.diag(
                node.func.span, name=node.func.name,
                notes=[codes.note("shadows_builtin", shadowed, name=node.func.name)],
                help=[codes.help_text("rename", name=f"{node.func.name}_")]))
            self._check_arguments(node)
            return UNKNOWN
        if builtin is None:
            close = _close_matches(node.func.name, list(BUILTINS), n=1)
            self.report(codes.NOT_CALLABLE.diag(node.func.span, name=node.func.name,
                                                **_did_you_mean(node.func.span, close)))
            self._check_arguments(node)
            return UNKNOWN
        bound = self._bind_arguments(builtin, node)
        if bound is None:
            return UNKNOWN
        args: dict[str, Any] = {}
        backend_args: dict[str, Any] = {}
        failed = False
        for param in builtin.params:
            arg_node = bound.get(param.name)
            if arg_node is None:
                args[param.name] = backend_args[param.name] = param.default
                continue
            # Every argument is resolved, so each independent mistake is reported.
            resolved = self._resolve_argument(param.kind, arg_node, builtin, param.name)
            failed = failed or resolved is _FAILED
            args[param.name] = resolved
            backend_args[param.name] = arg_node if param.kind in (Kind.TENSOR, Kind.TENSORS) else resolved
        if failed:
            return UNKNOWN
        ctx = self._ctx(node, bound)
        result = builtin.rule(ctx, args)
        if result is None:
            return UNKNOWN
        backend_args.update(ctx.normalised)
        if param_nodes := bound.get(VARIADIC.get(builtin.name, "")):
            backend_args[VARIADIC[builtin.name]] = param_nodes
        self.program.calls[id(node)] = CallInfo(builtin.name, backend_args)
        return result

    def _bind_arguments(self, builtin: Builtin, node: nodes.Call) -> dict[str, Any] | None:
        """Match positional and keyword arguments to the builtin's parameters."""
        bound: dict[str, Any] = {}
        params = list(builtin.params)
        variadic = VARIADIC.get(builtin.name)
        positional = list(node.args)
        for param in params:
            if not positional:
                break
            if param.name == variadic:
                bound[param.name] = nodes.ListExpr(tuple(positional), node.span)
                positional = []
                break
            bound[param.name] = positional.pop(0)
        if positional:
            self._call_error(node, positional[0].span, codes.detail(
                "too_many_positional", builtin=builtin.name, limit=len(params),
                count=len(node.args)))
            return None
        for keyword in node.keywords:
            name = keyword.name.name
            if builtin.param(name) is None and builtin.param(KEYWORD_SYNONYMS.get(name, "")):
                name = KEYWORD_SYNONYMS[name]  # `dim=-1`, PyTorch's word for `axis`
            if builtin.param(name) is None:
                close = _close_matches(name, [p.name for p in params], n=1)
                self._call_error(node, keyword.name.span,
                                 codes.detail("no_keyword", builtin=builtin.name, name=name),
                                 **_did_you_mean(keyword.name.span, close))
                return None
            if name in bound:
                self._call_error(node, keyword.span,
                                 codes.detail("keyword_twice", builtin=builtin.name, name=name))
                return None
            bound[name] = keyword.value
        missing = [p.name for p in params if p.required and p.name not in bound]
        if missing:
            self._call_error(node, node.span, codes.detail(
                "missing_argument", builtin=builtin.name, name=missing[0]))
            return None
        return bound

    def _call_error(self, node: nodes.Call, span: Span, detail: str,
                    help: Sequence[str] = (), fixes: Sequence[Fix] = ()) -> None:
        self._check_arguments(node)
        self.report(codes.CALL_ARGS.diag(span, detail=detail, help=help, fixes=fixes))

    def _check_arguments(self, node: nodes.Call) -> None:
        """A call that failed still reports the mistakes inside its arguments."""
        pending = list(node.args)
        while pending:
            arg = pending.pop(0)
            if isinstance(arg, nodes.ListExpr):  # `stack([A, B])`: the tensors inside
                pending[:0] = arg.items
            elif not isinstance(arg, (nodes.String, nodes.AxisName)):
                self.value(arg)

    def _resolve_argument(self, kind: Kind, node: nodes.Expr, builtin: Builtin, param: str) -> Any:
        resolver = _RESOLVERS[kind]
        result = resolver(self, node)
        if result is _WRONG_KIND:
            same = AXIS_SAME_MEANING.get(node.name) if kind in (Kind.AXIS, Kind.AXES) \
                and isinstance(node, nodes.Name) else None
            helps, fixes = [], []
            if same is not None:  # `axis=rows`: the word with the same meaning, as an edit
                helps = [codes.help_text("did_you_mean", name=same)]
                fixes = [Fix(helps[0], (Edit(node.span, same),))]
            self.report(codes.CALL_ARGS.diag(node.span, detail=codes.detail(
                "argument_kind", param=param, builtin=builtin.name, kind=kind.description),
                help=helps, fixes=fixes))
            return _FAILED
        return result

    def _arg_tensor(self, node: nodes.Expr) -> Any:
        if isinstance(node, (nodes.ListExpr, nodes.String, nodes.AxisName)):
            return _WRONG_KIND
        value = self.value(node)
        return value if value.known else _FAILED

    def _arg_tensors(self, node: nodes.Expr) -> Any:
        if not isinstance(node, nodes.ListExpr):
            return _WRONG_KIND
        values = [self.value(item) for item in node.items]
        return values if all(v.known for v in values) else _FAILED

    def _arg_dim(self, node: nodes.Expr) -> Any:
        dim = self._dim_expr(node)
        return _FAILED if dim is None else dim

    def _arg_offset(self, node: nodes.Expr) -> Any:
        offset = self._builder.build(node)
        self._flush_builder()
        return _FAILED if offset is None else offset

    def _arg_shape(self, node: nodes.Expr) -> Any:
        if not isinstance(node, nodes.ListExpr):
            return _WRONG_KIND
        dims = [self._dim_expr(item, allow_minus_one=True) for item in node.items]
        return _FAILED if any(d is None for d in dims) else tuple(dims)

    def _arg_axis(self, node: nodes.Expr) -> Any:
        if isinstance(node, nodes.AxisName):
            return node.name
        number = _int_literal(node)
        return _WRONG_KIND if number is None else number

    def _arg_axes(self, node: nodes.Expr) -> Any:
        """One axis, or a tuple (or list) of them: `axis=(-1, -2)`."""
        if isinstance(node, nodes.ListExpr):
            items = [_int_literal(item) if not isinstance(item, nodes.AxisName) else item.name
                     for item in node.items]
            return _WRONG_KIND if not items or any(i is None for i in items) else tuple(items)
        return self._arg_axis(node)

    def _arg_perm(self, node: nodes.Expr) -> Any:
        if not isinstance(node, nodes.ListExpr):
            return _WRONG_KIND
        items = [_int_literal(item) for item in node.items]
        return _WRONG_KIND if any(i is None for i in items) else tuple(items)

    def _arg_string(self, node: nodes.Expr) -> Any:
        return node.value if isinstance(node, nodes.String) else _WRONG_KIND

    def _arg_number(self, node: nodes.Expr) -> Any:
        inner = node.operand if isinstance(node, nodes.Unary) else node
        if not isinstance(inner, (nodes.Integer, nodes.Decimal)):
            return _WRONG_KIND
        value = float(inner.value)
        return -value if isinstance(node, nodes.Unary) and node.op == "-" else value

    def _arg_bool(self, node: nodes.Expr) -> Any:
        return node.value if isinstance(node, nodes.Boolean) else _WRONG_KIND

    # --- context for shape rules -----------------------------------------------------------------

    def _ctx(self, node: nodes.Expr, params: dict[str, Any]) -> _RuleCtx:
        return _RuleCtx(self, node, params)

    def text(self, node: nodes.Expr | nodes.Shape) -> str:
        return span_text(self.source, self._line_starts, node.span)

    def _origin_notes(self, name: str) -> list[Note]:
        tensor = self.program.tensors.get(name)
        if tensor is None or not tensor.value.known:
            return []
        if tensor.inferred:
            assert self._inferred is not None
            found = self._inferred.tensor(name)
            origins = list(found.origins) if found is not None else []
            return [codes.note("inferred", tensor.name_span, name=name,
                               shape=tensor.value.text())] + origins
        key = "defined" if tensor.kind == "defined" else "declared"
        return [codes.note(key, tensor.name_span, name=name, shape=tensor.value.text())]

    def operand_notes(self, node: nodes.Expr) -> list[Note]:
        node = nodes.strip_parens(node)
        if isinstance(node, nodes.Name):
            return self._origin_notes(node.name)
        value = self.program.type_of(node)
        if not value.known or isinstance(node, nodes.ListExpr):
            return []
        return [codes.note("operand", node.span, text=self.text(node), shape=value.text())]

    # --- warnings ----------------------------------------------------------------------------

    def _warn_unused(self) -> None:
        for name, tensor in self.program.tensors.items():
            # One whose shape failed already has its error.
            if tensor.kind in ("input", "param") and name not in self.names.used \
                    and tensor.value.known:
                self.report(codes.UNUSED.diag(tensor.name_span, kind=tensor.kind, name=name))
        for name, info in self.dims.dims.items():
            if name not in self.names.used and name not in self.dims.bindings:
                self.report(codes.UNUSED.diag(info.span, kind="dim", name=name))

    def _warn_unknown_bindings(self) -> None:
        first = Span(1, 1, 1, 1)
        for name, value in self.dims.bindings.items():
            # A dim whose declaration failed is declared: its error is reported.
            if name not in self.dims.dims and name not in self.names.kind \
                    and self.warn_unknown_bindings:
                self.report(codes.UNKNOWN_BINDING.diag(first, name=name, value=value))


class _RuleCtx(Record):
    """The :class:`builtins.Ctx` a shape rule reports through."""

    checker: Checker
    node: nodes.Expr
    params: dict[str, Any]
    normalised: dict[str, Any] = field(default_factory=dict)

    @property
    def dims(self) -> DimSystem:
        return self.checker.dims

    @property
    def anchor(self) -> Anchor:
        return self.checker.anchor

    def normalise(self, param: str, value: Any) -> None:
        self.normalised[param] = value

    def report(self, code: codes.Code, at: str | None = None, *, notes: Sequence[Note] = (),
               help: Sequence[str] = (), counterexample: Sequence[tuple[str, int]] = (),
               item: int | None = None, fixes: Sequence[Fix] = (),
               needed: Decision | None = None, **fields: object) -> None:
        target = self.params.get(at) if at is not None else None
        if item is not None and isinstance(target, nodes.ListExpr) and item < len(target.items):
            target = target.items[item]
        span = target.span if target is not None else self.node.span
        if needed is not None:
            help = [*help, *needed_help(needed)]
            fixes = [*fixes, *needed_fixes(needed, self.anchor)]
        self.checker.report(code.diag(span, notes=notes, help=help, fixes=fixes,
                                      counterexample=counterexample, **fields))

    def text(self, param: str) -> str:
        target = self.params.get(param)
        return self.checker.text(target) if target is not None else ""

    def source(self, node: nodes.Expr) -> str:
        return self.checker.text(node)

    def argument(self, param: str) -> nodes.Expr | None:
        target = self.params.get(param)
        return nodes.strip_parens(target) if target is not None else None

    def defined_as(self, name: str) -> nodes.Expr | None:
        before = (self.node.span.line, self.node.span.column)
        found = None
        for statement in self.checker.program.statements:
            if isinstance(statement, nodes.Define) and statement.name.name == name and \
                    (statement.span.line, statement.span.column) < before:
                found = statement.value
        return found

    def span(self, param: str | None) -> Span | None:
        target = self.params.get(param) if param is not None else self.node
        return target.span if target is not None else None

    def declaration(self, param: str) -> nodes.TensorDecl | None:
        target = self.argument(param)
        if not isinstance(target, nodes.Name):
            return None
        return self.checker.declarations.get(target.name)

    def notes(self, *params: str) -> list[Note]:
        result: list[Note] = []
        for param in params:
            target = self.params.get(param)
            if isinstance(target, nodes.ListExpr):
                for item in target.items:
                    result += self.checker.operand_notes(item)
            elif target is not None:
                result += self.checker.operand_notes(target)
        return result


_FAILED = object()  # the argument had an error, already reported
_WRONG_KIND = object()  # the argument is not of the kind the parameter takes

_RESOLVERS: dict[Kind, Callable[[Checker, nodes.Expr], Any]] = {
    Kind.TENSOR: Checker._arg_tensor, Kind.TENSORS: Checker._arg_tensors,
    Kind.DIM: Checker._arg_dim, Kind.OFFSET: Checker._arg_offset,
    Kind.SHAPE: Checker._arg_shape, Kind.AXIS: Checker._arg_axis, Kind.AXES: Checker._arg_axes,
    Kind.PERM: Checker._arg_perm, Kind.STRING: Checker._arg_string,
    Kind.NUMBER: Checker._arg_number, Kind.BOOL: Checker._arg_bool,
}

# Two bool operands stay bools (no SC403) only here: NumPy's logical or / and for
# `+` / `*`, and bool comparison for `==` / `!=`.
_BOOL_WITH_BOOL = frozenset({"+", "*", "==", "!="})


def _set_or_not(node: nodes.BinOp) -> bool:
    """`M > 0`, `M != 0`, `M == 0` (either way round): whether each entry is set, of a mask
    whatever its dtype (LongT5's `where(local_attention_mask > 0, 0.0, -1e10)` of a bool
    mask): exactly M or ~M for a bool M, no number read from it."""
    def zero(operand: nodes.Expr) -> bool:
        return isinstance(operand, nodes.Integer) and operand.value == 0 or \
            isinstance(operand, nodes.Decimal) and operand.value == 0.0
    if zero(node.right):
        return node.op in (">", "!=", "==")
    return zero(node.left) and node.op in ("<", "!=", "==")
# A bool mask added to (or multiplied with) numbers: applied with `where` (SC403's fix).
_MASKING = frozenset({"+", "*"})

_NEGATED = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


_INTEGER = Value((), element="int")
_ORDERED = frozenset({"<", "<=", ">", ">=", "//", "%"})  # operators of real numbers only


def arithmetic_element(op: str, left: Value, right: Value) -> str:
    """The element type of `left op right`: ints stay ints under `+ - * // %` and the
    pairwise builtins; `/` and `**` give real numbers (`2 ** -1` is 0.5); complex numbers
    win over both."""
    element = combined_element(left, right)
    return "" if op in ("/", "**") and element == "int" else element


def _tensor_index_detail(text: str, value: Value) -> str:
    """Why a tensor cannot index here: a mask's result depends on its values; a float is
    not a position; an integer tensor gathers only beside whole axes."""
    if not value.known:
        return codes.detail("tensor_index")
    if value.is_bool:
        return codes.detail("mask_index", text=text, shape=value.text())
    if value.element == "int":
        return codes.detail("one_tensor_index")
    return codes.detail("float_index", text=text, shape=value.text())


def _names_below(node: nodes.Expr) -> list[nodes.Expr]:
    found: list[nodes.Expr] = []
    pending = [node]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(nodes.children(current))
    return found


def _did_you_mean(span: Span, close: list[str]) -> dict[str, Any]:
    """`help:` and the fix for a misspelled name: the closest one, written instead."""
    if not close:
        return {}
    help_text = codes.help_text("did_you_mean", name=close[0])
    return {"help": [help_text], "fixes": [Fix(help_text, (Edit(span, close[0]),))]}


def _anchor(statements: list[nodes.Stmt], source: str) -> Anchor:
    """Where a suggested `dim` or `constraint` goes: at the end of the line of the last
    dim or constraint statement, or at the start of a file that has none."""
    newline = "\r\n" if "\r\n" in source else "\n"
    last = max((s.span for s in statements
                if isinstance(s, (nodes.DimFree, nodes.DimDef, nodes.Constraint))),
               key=lambda span: (span.end_line, span.end_column), default=None)
    if last is None:
        return Anchor(Span(1, 1, 1, 1), at_start=True, newline=newline)
    lines = source.split("\n")
    end = len(lines[last.end_line - 1].rstrip("\r")) + 1
    return Anchor(Span(last.end_line, end, last.end_line, end), newline=newline)


def _first_definitions(statements: list[nodes.Stmt]) -> dict[str, tuple[Span, str]]:
    first: dict[str, tuple[Span, str]] = {}
    for statement in statements:
        if isinstance(statement, nodes.DimFree):
            for ident in statement.names:
                first.setdefault(ident.name, (ident.span, "dim"))
        elif isinstance(statement, nodes.DimDef):
            first.setdefault(statement.name.name, (statement.name.span, "dim"))
        elif isinstance(statement, (nodes.TensorDecl, nodes.Define)) or (
                isinstance(statement, nodes.Output) and statement.value is not None):
            first.setdefault(statement.name.name, (statement.name.span, "tensor"))
    return first


def _defined_names(statement: nodes.Stmt) -> list[str]:
    if isinstance(statement, nodes.DimFree):
        return [ident.name for ident in statement.names]
    if isinstance(statement, (nodes.DimDef, nodes.TensorDecl, nodes.Define)) or (
            isinstance(statement, nodes.Output) and statement.value is not None):
        return [statement.name.name]
    return []


def _dims_first(statements: list[nodes.Stmt]) -> list[nodes.Stmt]:
    """Dims and constraints first, each group in file order.

    A constraint holds for the whole spec (language.md, section 1), so a
    statement above it may use it. Names are still declared before use: a
    tensor statement that uses a dim declared below it is an error.
    """
    return [s for s in statements if is_dim_statement(s)] + \
        [s for s in statements if not is_dim_statement(s)]


def _close_matches(word: str, candidates: list[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """``difflib.get_close_matches``, imported only when a name is wrong (not at start-up)."""
    import difflib

    return difflib.get_close_matches(word, candidates, n=n, cutoff=cutoff)


def is_dim_statement(statement: nodes.Stmt) -> bool:
    """A statement about dims (declaration, definition, constraint): checked before
    every tensor statement, and the only kind that changes the :class:`DimSystem`."""
    return isinstance(statement, (nodes.DimFree, nodes.DimDef, nodes.Constraint)) or (
        isinstance(statement, nodes.Broken) and statement.is_dim)


def _int_literal(node: nodes.Expr) -> int | None:
    if isinstance(node, nodes.Integer):
        return node.value
    if isinstance(node, nodes.Unary) and isinstance(node.operand, nodes.Integer):
        return -node.operand.value if node.op == "-" else node.operand.value
    return None


def _write_problem(dims: DimSystem, part: tuple[Dim, ...],
                   written: tuple[Dim, ...]) -> str | None:
    """Why a value of shape ``written`` cannot be written into a slice of shape ``part``
    (NumPy: it must broadcast to the slice), or None."""
    if len(written) > len(part):
        return codes.detail("write_rank", rank=len(written), slice_rank=len(part))
    for want, got in zip(part[len(part) - len(written):], written):
        if symbolic.is_literal_one(got):
            continue
        if not dims.equal(want, got):
            decision = dims.decide(Claim.equal(want, got))
            return codes.detail("write_sizes", slice=to_text(want), value=to_text(got),
                                relation=relation(decision))
    return None


def _is_literal(node: nodes.Expr) -> bool:
    return isinstance(node, (nodes.Integer, nodes.Decimal, nodes.Inf, nodes.Boolean))


def _not_a_value(node: nodes.Expr) -> str:
    if isinstance(node, nodes.ListExpr):
        return codes.detail("list_not_a_tensor")
    if isinstance(node, nodes.String):
        return codes.detail("string_not_a_tensor")
    if isinstance(node, nodes.AxisName):
        return codes.detail("axis_not_a_tensor", name=node.name)
    return codes.detail("not_a_value")



def check(source: str, statements: list[nodes.Stmt], parse_diagnostics: Sequence[Diagnostic] = (),
          bindings: dict[str, int] | None = None, *, warn_unknown_bindings: bool = True) -> Program:
    checker = Checker(source, bindings, warn_unknown_bindings=warn_unknown_bindings)
    return checker.run(statements, parse_diagnostics)


__all__ = ["Checker", "check", "is_dim_statement"]
