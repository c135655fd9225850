"""Rebinding, slice writes and tuple assignment -> one definition per version.

Python code rebinds names (`att = att.masked_fill(...)`, `k = k.view(...).transpose(1, 2)`)
and writes into slices (`cache_k[:, P:P + S] = xk`). Each such statement makes a new
*version* of the tensor: later uses see it, earlier uses keep the old one. :func:`number`
gives every version a name of its own, so that every later pass (checker, backends,
meaning, report, language server) sees a spec in which each name is defined once:

- the last version of a name keeps the name as written (it is what the outputs and the
  user see); an earlier one is ``name′1``, ``name′2``, ... — the mark ``′`` cannot be
  written in a spec, and messages show a version by its name (:func:`shown`). An `input`
  or `param` keeps its name (a run is given it by that name), and its later versions are
  marked (a run names its outputs as written);
- `cache[...] = v` is the definition `cache′k+1 = Update(cache′k, [...], v)`;
- `q, k, v = <parts>` is one definition per target (the parts come from
  :mod:`shapecheck.spellings`, which has resolved the value already).

Only tensors are versioned: a dim is defined once, and a second `input` of a name is
still the error it was (SC102).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any

from . import nodes, spellings
from ..messages.diagnostics import VERSION_MARK as MARK
from ..messages.diagnostics import Diagnostic, Span, shown


def version_name(name: str, index: int) -> str:
    return f"{name}{MARK}{index}"


def is_superseded(name: str) -> bool:
    """A version that a later statement of the spec replaces."""
    return MARK in name


def lower(statements: list[nodes.Stmt], diagnostics: list[Diagnostic],
          plain: dict[int, nodes.Stmt] | None = None) -> tuple[list[nodes.Stmt], list[Diagnostic]]:
    """The parsed statements as the checker reads them: PyTorch's spellings resolved
    (:mod:`shapecheck.spellings`; ``plain`` as there), then every version of a tensor
    named on its own."""
    dims = frozenset(nodes.declared_dims(statements))
    declared = dims | {ident.name for statement in statements for ident in _defined(statement)}
    resolved = spellings.resolve(statements, declared, dims, plain)
    found = resolved.diagnostics
    return number(resolved.statements), (list(diagnostics) + found if found else diagnostics)


def number(statements: list[nodes.Stmt]) -> list[nodes.Stmt]:
    """The statements with every version of a tensor named on its own; unchanged (the
    same list) when no name is rebound and nothing is written into."""
    counts = _definition_counts(statements)
    rebound = {name for name, count in counts.items() if count > 1}
    if not rebound and not any(isinstance(s, (nodes.Write, nodes.Unpack)) for s in statements):
        return statements
    dims = nodes.declared_dims(statements)
    rebound -= dims
    declared = {s.name.name for s in statements if isinstance(s, nodes.TensorDecl)}
    numbering = _Numbering(counts, rebound, declared)
    return [numbering.statement(statement) for statement in statements]


def _definition_counts(statements: list[nodes.Stmt]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for statement in statements:
        for ident in _defined(statement):
            counts[ident.name] = counts.get(ident.name, 0) + 1
    return counts


def _defined(statement: nodes.Stmt) -> tuple[nodes.Ident, ...]:
    """The tensor names a statement defines (a new version of each)."""
    if isinstance(statement, (nodes.TensorDecl, nodes.Define)):
        return (statement.name,)
    if isinstance(statement, nodes.Output) and statement.value is not None:
        return (statement.name,)
    if isinstance(statement, nodes.Write):
        return (statement.target,)
    if isinstance(statement, nodes.Unpack):
        return statement.targets
    return ()


class _Numbering:
    def __init__(self, counts: dict[str, int], rebound: set[str], declared: set[str]) -> None:
        self.counts = counts
        self.declared = declared
        self.rebound = rebound
        self.seen: dict[str, int] = {}  # versions defined so far
        self.declarations: set[str] = set()  # names an `input`/`param` declared

    def current(self, name: str) -> str:
        """The name the version visible here has (before any: the first version's)."""
        if name not in self.rebound:
            return name
        return self._name_of(name, max(self.seen.get(name, 0), 1))

    def _name_of(self, name: str, index: int) -> str:
        """A declared input or param keeps its name (it is what a run is given), and its
        later versions are marked; otherwise the last version keeps the name (it is what
        a run gives back)."""
        if name in self.declared:
            return name if index == 1 else version_name(name, index)
        return name if index >= self.counts[name] else version_name(name, index)

    def define(self, ident: nodes.Ident, declaration: bool = False) -> nodes.Ident:
        """The next version of ``ident``'s name. A second declaration (`input x` twice) is
        not a version: it keeps the name, and the checker reports it."""
        name = ident.name
        if name not in self.rebound:
            return ident
        if declaration and name in self.declarations:
            return replace(ident, name=self.current(name))
        if declaration:
            self.declarations.add(name)
        index = self.seen.get(name, 0) + 1
        self.seen[name] = index
        return replace(ident, name=self._name_of(name, index))

    def statement(self, statement: nodes.Stmt) -> nodes.Stmt:
        if isinstance(statement, nodes.Write):
            return self._write(statement)
        if isinstance(statement, nodes.Unpack):
            return statement  # resolved into definitions by the spellings pass
        if isinstance(statement, (nodes.Assert,)) or (
                isinstance(statement, nodes.Output) and statement.value is None):
            renamed = replace(statement.name, name=self.current(statement.name.name))
            return replace(self.uses(statement), name=renamed)
        used = self.uses(statement)
        if isinstance(used, nodes.TensorDecl):
            return replace(used, name=self.define(used.name, declaration=True))
        if isinstance(used, (nodes.Define, nodes.Output)):
            return replace(used, name=self.define(used.name))
        return used

    def _write(self, statement: nodes.Write) -> nodes.Stmt:
        target = statement.target
        operand = nodes.Name(self.current(target.name), target.span)
        indices = self.uses(statement.indices)
        value = self.uses(statement.value)
        depth = 1 + max([value.depth, *(getattr(i, "depth", 1) for i in indices)])
        update = nodes.Update(operand, indices, value, statement.span, statement.bracket, depth)
        return nodes.Define(self.define(target), None, update, statement.span)

    def uses(self, node: Any) -> Any:
        """``node`` with each name that is used in it renamed to the version seen here.
        The names a statement defines are not uses (the caller renames them)."""
        if isinstance(node, nodes.ShapeOf):
            if node.tensor is not None and node.tensor.name in self.rebound:
                return replace(node, tensor=self.uses(node.tensor))
            return node
        if isinstance(node, nodes.Name):
            if node.name in self.rebound:
                return replace(node, name=self.current(node.name))
            return node
        if isinstance(node, tuple) and not isinstance(node, Span):
            items = tuple(self.uses(item) for item in node)
            return node if all(a is b for a, b in zip(items, node)) else items
        if not is_dataclass(node) or isinstance(node, (Span, type, nodes.Ident)):
            return node
        changes = {}
        for f in fields(node):
            value = getattr(node, f.name)
            new = self.uses(value)
            if new is not value:
                changes[f.name] = new
        return replace(node, **changes) if changes else node


__all__ = ["MARK", "is_superseded", "lower", "number", "shown", "version_name"]
