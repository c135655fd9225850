"""The one-way imports of the checked-program layer (docs/design.md): a module never
imports one above it, so there is no cycle to untangle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "shapecheck"

# module -> the package modules it may import (directly, `from . import x` or `from .x`)
BELOW: dict[str, set[str]] = {
    "diagnostics": set(),
    "codes": {"diagnostics", "i18n"},
    "nodes": {"diagnostics"},
    "symbolic": {"codes", "nodes", "diagnostics"},
    "program": {"nodes", "diagnostics", "symbolic"},
    "rules": {"codes", "diagnostics", "nodes", "program", "symbolic"},
    "einsum": {"codes", "program", "rules", "symbolic"},
    "builtins": {"codes", "diagnostics", "einsum", "nodes", "program", "rules", "symbolic"},
    # The axis-meaning pass reads the checked program; it stands beside the formats, the
    # report and the backends, never below the checker.
    "meaning": {"codes", "nodes", "symbolic", "builtins", "diagnostics", "einsum", "program"},
}


def _imported_by(path: Path, level: int) -> set[str]:
    """The package modules one file imports, ``level`` dots up from it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == level:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found |= {alias.name for alias in node.names}
    return found


def _imported(module: str) -> set[str]:
    """What a module imports from the package; for a package (``symbolic/``), what its
    files import from outside it."""
    folder = PACKAGE / module
    if folder.is_dir():
        return set().union(*(_imported_by(path, 2) for path in folder.glob("*.py")))
    return _imported_by(PACKAGE / f"{module}.py", 1)


@pytest.mark.parametrize("module", sorted(BELOW))
def test_imports_point_down(module: str) -> None:
    assert _imported(module) <= BELOW[module], _imported(module) - BELOW[module]


# The symbolic package by job, lowest first: each file imports (at run time) only the
# ones before it. The budget names `Dim` for type checkers only.
SYMBOLIC = ("budget", "dims", "groebner", "counterexamples", "proofs", "builder", "unify")


def _runtime_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    checking_only = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If)
                     and ast.unparse(node.test) == "TYPE_CHECKING" for inner in ast.walk(node)}
    return {node.module.split(".")[0] for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
            and id(node) not in checking_only}


@pytest.mark.parametrize("index", range(len(SYMBOLIC)))
def test_the_symbolic_package_is_layered(index: int) -> None:
    module = SYMBOLIC[index]
    assert _runtime_imports(PACKAGE / "symbolic" / f"{module}.py") <= set(SYMBOLIC[:index])


def test_every_symbolic_module_has_its_layer() -> None:
    files = {path.stem for path in (PACKAGE / "symbolic").glob("*.py")} - {"__init__"}
    assert files == set(SYMBOLIC)
