"""Where a number a statement reads was set, and where a traced function compares a value
with itself (docs/torch.md, "Notes at their lines").

torch.export inlines a module's Python numbers: `dots = q @ k.T * self.scale` is traced with
the value of `self.scale`, not with the line of `__init__` that computed it, which is where a
scale by the wrong width is written (`self.scale = dim ** -0.5`). :func:`root_definitions`
reads the file's own syntax tree to find those lines: the assignments, to a name the
statement reads, of a root (`x ** -0.5`, `math.sqrt(x)`) — a local of the same function
before the statement, or an attribute of the same class (`self.scale = ...`).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator

#: calls whose result is a root: `math.sqrt(d)`, `torch.rsqrt(d)`, `np.sqrt(d)`
_ROOT_CALLS = frozenset({"sqrt", "rsqrt"})


def root_definitions(text: str, line: int) -> list[int]:
    """The lines, in the file ``text``, that set a root read by the statement on ``line``:
    for each name it reads (`scale`, `self.scaling`), the last assignment of a root to it
    before the statement in its function, or in its class; empty when there is none or
    the file does not parse."""
    tree = _parsed(text)
    if tree is None:
        return []
    function, owner = _enclosing(tree, line)
    statement = _statement_at(function, line) if function is not None else None
    if statement is None or function is None:
        return []
    found: list[int] = []
    for name, is_attribute in _names_read(statement):
        scope: ast.AST | None = owner if is_attribute else function
        if scope is None:
            continue
        lines = [assigned for assigned in _root_assignments(scope, name, is_attribute)
                 if is_attribute or assigned < statement.lineno]
        if lines and lines[-1] != line and lines[-1] not in found:
            found.append(lines[-1])
    return found


def self_comparisons(text: str, line: int) -> list[int]:
    """The lines of the function holding ``line`` (a traced `mask_mod`, whose body the
    trace maps to its `return`) that compare or combine an expression with itself
    (`ids[b, q_idx] == ids[b, q_idx]`, `g[q_idx] | g[q_idx]`), other than ``line``."""
    tree = _parsed(text)
    if tree is None:
        return []
    function, _ = _enclosing(tree, line)
    if function is None:
        return []
    found = {node.lineno for node in ast.walk(function) if _same_sides(node)}
    return sorted(found - {line})


def _same_sides(node: ast.AST) -> bool:
    """`a == a` (one comparison), `a | a`, `a & a`: an operation of an expression with itself."""
    if isinstance(node, ast.Compare):
        return len(node.comparators) == 1 and ast.dump(node.left) == ast.dump(node.comparators[0])
    return isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitOr, ast.BitAnd)) \
        and ast.dump(node.left) == ast.dump(node.right)


@functools.lru_cache(maxsize=8)
def _parsed(text: str) -> ast.Module | None:
    """The file's syntax tree, parsed once for all the diagnostics in it (never changed)."""
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _enclosing(tree: ast.Module, line: int) -> tuple[ast.FunctionDef | None, ast.ClassDef | None]:
    """The innermost function holding ``line`` and the class that holds that function."""
    function: ast.FunctionDef | None = None
    owner: ast.ClassDef | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and _holds(node, line):
            for child in node.body:
                if isinstance(child, ast.FunctionDef) and _holds(child, line):
                    owner, function = node, child
        elif isinstance(node, ast.FunctionDef) and _holds(node, line) and (
                function is None or node.lineno > function.lineno):
            function = node
    if owner is not None and function is not None and not _holds(owner, function.lineno):
        owner = None
    return function, owner


def _holds(node: ast.stmt, line: int) -> bool:
    return node.lineno <= line <= (node.end_lineno or node.lineno)


def _statement_at(function: ast.FunctionDef, line: int) -> ast.stmt | None:
    """The simple statement of ``function`` spanning ``line``."""
    for node in ast.walk(function):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)) \
                and _holds(node, line):
            return node
    return None


def _names_read(statement: ast.stmt) -> Iterator[tuple[str, bool]]:
    """The plain names (False) and `self.` attributes (True) the statement reads."""
    for node in ast.walk(statement):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and \
                isinstance(node.value, ast.Name) and node.value.id == "self":
            yield node.attr, True
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id != "self":
            yield node.id, False


def _root_assignments(scope: ast.AST, name: str, is_attribute: bool) -> list[int]:
    """The lines in ``scope`` that assign a root to ``name`` (`self.name` when
    ``is_attribute``), in order."""
    lines: list[int] = []
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and node.value is not None and _is_root(node.value) \
                and any(_is_target(t, name, is_attribute) for t in node.targets):
            lines.append(node.lineno)
    return sorted(lines)


def _is_target(target: ast.expr, name: str, is_attribute: bool) -> bool:
    if is_attribute:
        return isinstance(target, ast.Attribute) and target.attr == name and \
            isinstance(target.value, ast.Name) and target.value.id == "self"
    return isinstance(target, ast.Name) and target.id == name


def _is_root(value: ast.expr) -> bool:
    """Whether an expression computes a root: a power by a fractional exponent
    (`d ** -0.5`, `d ** 0.25`) or a `sqrt`/`rsqrt` call, anywhere in it."""
    for node in ast.walk(value):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and \
                _fractional(node.right):
            return True
        if isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else \
                node.func.id if isinstance(node.func, ast.Name) else ""
            if called in _ROOT_CALLS:
                return True
    return False


def _fractional(exponent: ast.expr) -> bool:
    if isinstance(exponent, ast.UnaryOp) and isinstance(exponent.op, (ast.USub, ast.UAdd)):
        exponent = exponent.operand
    return isinstance(exponent, ast.Constant) and isinstance(exponent.value, float) and \
        not float(exponent.value).is_integer()
