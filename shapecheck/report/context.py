"""What every part of the report asks of a checked program.

:class:`Spec` wraps a :class:`Program`: the source text of a node, the shape of an
expression (symbolic and at the bindings), the statement that defines a tensor, the
problems reported inside a span, how a fact about dims was proved (as words), and which
constraint served as a proof where. SymPy stays behind :mod:`shapecheck.symbolic`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import field

from ..records import Record
from ..syntax import nodes
from ..syntax.nodes import children, strip_parens
from ..messages.diagnostics import Diagnostic, Span
from ..formats.source import SourceLines, printable_line
from ..check.program import UNKNOWN, Program, Value
from ..symbolic import Dim, DimBuilder, Proof, Verdict, explain_divides, explain_equal, free_names, growth, pretty
from .templates import Rich, code, join, listing, rich, text

ITEM_SIZES = {"float32": 4, "float64": 8}
_METHOD_RANK = ["identical", "algebra", "definition", "constraint", "bindings", "relations"]


class Use(Record, frozen=True):
    """A check that relied on a constraint."""

    line: int
    what: str


class Spec(Record):
    program: Program
    path: str
    bindings: dict[str, int]
    dtype: str = "float64"
    lines: SourceLines = field(init=False)
    definitions: dict[str, nodes.Define | nodes.Output] = field(init=False)
    uses: dict[int, list[Use]] = field(default_factory=dict)  # constraint index -> uses
    _printed: dict[Dim, str] = field(default_factory=dict, repr=False)
    _growth: dict[tuple[Dim, frozenset[str]], tuple[int, int]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.lines = SourceLines(self.program.source)
        self.definitions = {}
        for statement in self.program.statements:
            if isinstance(statement, (nodes.Define, nodes.Output)) and statement.value is not None:
                tensor = self.program.tensors.get(statement.name.name)
                if tensor is not None and tensor.span == statement.span:
                    self.definitions[statement.name.name] = statement

    # --- source --------------------------------------------------------------------------

    def text(self, node: nodes.Expr | nodes.Shape | nodes.Stmt) -> str:
        """The node's source text, on one line, with whitespace collapsed."""
        return printable_line(" ".join(self.span_text(node.span).split()))

    def span_text(self, span: Span) -> str:
        parts = []
        for number in range(span.line, span.end_line + 1):
            line = self.lines.get(number) or ""
            start = span.column - 1 if number == span.line else 0
            end = span.end_column - 1 if number == span.end_line else len(line)
            parts.append(line[start:end])
        return "\n".join(parts)

    def operand(self, node: nodes.Expr) -> str:
        """How a node is named in a formula: its name, or its text in parentheses."""
        node = strip_parens(node)
        if isinstance(node, nodes.Name):
            return node.name
        text = self.text(node)
        simple = isinstance(node, (nodes.Call, nodes.Transpose))
        return text if simple else f"({text})"

    # --- shapes -----------------------------------------------------------------------------

    def value(self, node: nodes.Expr) -> Value:
        return self.program.type_of(node)

    def shape_of(self, name: str) -> Value:
        tensor = self.program.tensors.get(name)
        return tensor.value if tensor is not None else UNKNOWN

    def concrete(self, value: Value) -> str | None:
        """The shape at the bindings, when every dim in it has a value."""
        if value.shape is None or not self.bindings:
            return None
        sizes = [self.program.dims.evaluate(d) for d in value.shape]
        if any(size is None for size in sizes):
            return None
        inner = "[" + ", ".join(str(size) for size in sizes) + "]"
        return "bool" + inner if value.is_bool else inner

    def unbound(self, dims: tuple[Dim, ...] | list[Dim]) -> list[str]:
        """The dims (by name, in the spec's order) that keep ``dims`` from having a value."""
        if not self.bindings:
            return []
        # In terms of the dims a binding can give (D_model under `D_model == H * d` is H and d).
        system = self.program.dims
        names = set().union(*(free_names(system.canonical(dim)) for dim in dims)) if dims else set()
        return [name for name in self.program.dims.dims
                if name in names and self.program.dims.value_of(name) is None]

    def pretty(self, dim: Dim) -> str:
        """A formula as the cost tables print it (memoised: printing is the slow part)."""
        printed = self._printed.get(dim)
        if printed is None:
            printed = self._printed[dim] = pretty(dim)
        return printed

    def growth(self, dim: Dim, names: frozenset[str]) -> tuple[int, int]:
        key = (dim, names)
        if key not in self._growth:
            self._growth[key] = growth(self.program.dims, dim, names)
        return self._growth[key]

    def evaluate(self, dim: Dim) -> int | None:
        return self.program.dims.evaluate(dim) if self.bindings else None

    def dims_of(self, expr: nodes.Expr) -> Dim | None:
        """A dim expression rebuilt from the tree (constraints' sides, annotations)."""
        dims = self.program.dims
        builder = DimBuilder(dims, lambda name: dims.symbol_of(name.name), [])
        return builder.build(expr, allow_minus_one=True)

    def shape_dims(self, shape: nodes.Shape) -> tuple[Dim, ...] | None:
        built = [self.dims_of(entry) for entry in shape.dims]
        if any(dim is None for dim in built):
            return None
        return tuple(built)  # type: ignore[arg-type]

    def definition(self, node: nodes.Expr) -> nodes.Expr:
        """Follow a name to the expression that defines it (once)."""
        node = strip_parens(node)
        if isinstance(node, nodes.Name) and node.name in self.definitions:
            value = self.definitions[node.name].value
            assert value is not None
            return strip_parens(value)
        return node

    # --- problems -------------------------------------------------------------------------

    def problems_in(self, span: Span) -> list[Diagnostic]:
        return [d for d in self.program.diagnostics if inside(d.span, span)]

    def cause(self, node: nodes.Expr) -> Diagnostic | None:
        """The first error that keeps ``node`` from having a shape: one inside it, or, followed
        back through the names it reads, the one in the statement where their shape was lost."""
        seen: set[str] = set()
        pending = [node]
        while pending:
            current = pending.pop(0)
            errors = [d for d in self.program.diagnostics if d.is_error and within(d.span, current.span)]
            if errors:
                return errors[0]
            for inner in postorder(current):
                if not isinstance(inner, nodes.Name) or inner.name in seen:
                    continue
                seen.add(inner.name)
                tensor = self.program.tensors.get(inner.name)
                statement = self.definitions.get(inner.name)
                if tensor is None or statement is None or tensor.value.known:
                    continue
                errors = [d for d in self.problems_in(statement.span) if d.is_error]
                if errors:
                    return errors[0]
                assert statement.value is not None
                pending.append(statement.value)
        if self.value(node).known:
            return None
        # Lost further up (a dim whose declaration failed, say): the last error above it.
        above = [d for d in self.program.diagnostics if d.is_error and d.span.line <= node.span.line]
        return above[-1] if above else None

    def problem_ref(self, span: Span) -> Rich:
        errors = [d for d in self.problems_in(span) if d.is_error]
        if not errors:
            return ()
        return rich("see_problem", code=errors[0].code, line=str(errors[0].span.line))

    # --- proofs -----------------------------------------------------------------------------

    def equal(self, left: Dim, right: Dim) -> Proof:
        return explain_equal(self.program.dims, left, right)

    def divides(self, numerator: Dim, denominator: Dim) -> Proof:
        return explain_divides(self.program.dims, numerator, denominator)

    def record(self, proof: Proof, line: int, what: str) -> None:
        for index in proof.constraints:
            uses = self.uses.setdefault(index, [])
            if Use(line, what) not in uses:
                uses.append(Use(line, what))

    def how(self, proof: Proof) -> Rich:
        """How a fact was proved, in words (empty when it is the same expression)."""
        if proof.method == "algebra":
            return rich("how_algebra")
        if proof.method == "definition":
            return rich("how_definition", names=listing([(code(n),) for n in proof.definitions]))
        constraints = self.constraint_refs(proof.constraints)
        if proof.method == "constraint":
            return rich("how_constraint", constraints=constraints)
        if proof.method == "bindings":
            bound = ", ".join(f"{n}={self.program.dims.value_of(n)}" for n in proof.bound)
            key = "how_bindings_with" if proof.constraints else "how_bindings"
            return rich(key, bound=(code(bound),), constraints=constraints)
        if proof.method == "relations":
            return rich("how_relations")
        return ()

    def constraint_refs(self, indices: tuple[int, ...]) -> Rich:
        refs = []
        for index in indices:
            use = self.program.dims.constraints[index]
            refs.append(rich("constraint_ref", constraint=code(f"constraint {use.text}"),
                             line=str(use.span.line)))
        return listing(refs, text("and"))


def merge(proofs: list[Proof]) -> Proof:
    """One proof for several facts checked together (the axes of a shape)."""
    if not proofs:
        return Proof(Verdict.PROVED, "identical")
    verdict = Verdict.PROVED
    for proof in proofs:
        if not proof.verdict:
            verdict = proof.verdict
    method = max((p.method for p in proofs if p.method), key=_METHOD_RANK.index, default="")
    return Proof(
        verdict, method if verdict else "",
        tuple(sorted({n for p in proofs for n in p.definitions})),
        tuple(sorted({i for p in proofs for i in p.constraints})),
        tuple(sorted({n for p in proofs for n in p.bound})),
    )


def postorder(node: nodes.Expr) -> Iterator[nodes.Expr]:
    """Operands before the operation that uses them: the order a reader evaluates."""
    stack: list[tuple[nodes.Expr, bool]] = [(node, False)]
    while stack:
        current, expanded = stack.pop()
        if expanded:
            yield current
            continue
        stack.append((current, True))
        for child in reversed(list(children(current))):
            stack.append((child, False))


def within(inner: Span, outer: Span) -> bool:
    """``inner`` lies wholly inside ``outer`` (a problem *in* an operand, not around it)."""
    return outer.contains(inner)


def inside(inner: Span, outer: Span) -> bool:
    return (outer.line, outer.column) <= (inner.line, inner.column) < (outer.end_line, outer.end_column) \
        or (inner.line, inner.column) == (outer.line, outer.column)


def joined(*parts: Rich | str) -> Rich:
    return join([], *parts)


def einsum_terms(subscripts: str, operands: list[Value]) -> tuple[list[list[tuple[str, Dim]]], str] | None:
    """The letters of each einsum operand with their sizes, and the output term."""
    from ..check.einsum import SubscriptError, parse_subscripts

    try:
        parsed = parse_subscripts(subscripts, len(operands))
    except SubscriptError:
        return None
    terms, output = parsed.inputs, parsed.output
    named: list[list[tuple[str, Dim]]] = []
    for term, operand in zip(terms, operands):
        if operand.shape is None:
            return None
        head, _, tail = term.partition("...")
        rank = len(operand.shape)
        pairs = list(zip(head, operand.shape[: len(head)]))
        if tail:
            pairs += list(zip(tail, operand.shape[rank - len(tail):]))
        named.append(pairs)
    return named, output
