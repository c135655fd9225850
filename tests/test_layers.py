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
    # The rules of issue 21's rows (element types, gathers), below the table of rows.
    "value_rules": {"codes", "complex_values", "program", "rules", "symbolic"},
    "gathers": {"codes", "nodes", "program", "rules", "symbolic"},
    "complex_values": {"codes", "program", "rules", "symbolic"},
    "builtins": {"codes", "complex_values", "diagnostics", "einsum", "gathers", "nodes",
                 "program", "rules", "symbolic", "value_rules"},
    # The axis-meaning pass reads the checked program; it stands beside the formats, the
    # report and the backends, never below the checker.
    "meaning": {"codes", "nodes", "symbolic", "builtins", "diagnostics", "einsum", "program",
                "value_rules"},
    # Loading a spec, the first stage of every path: the passes, never what runs or shows it.
    "loader": {"checker", "codes", "config", "diagnostics", "fileio", "fixcheck", "incremental",
             "infer", "meaning", "nodes", "options", "parser", "program", "suppress", "symbolic"},
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


# The run path only goes down (load -> bind -> plan -> execute -> report): what executes a
# spec, and what binds a real function to one, read specs through `loader` and never call
# back up into the face of the package. Imports inside functions count too.
FACE = {"api", "cli"}
RUN_PATH = sorted({f"backend/{path.name}" for path in (PACKAGE / "backend").glob("*.py")}
                  | {"conform.py", "testing.py", "loader.py"})


def _top_modules(tree: ast.Module, folder: tuple[str, ...]) -> set[str]:
    """The shapecheck modules (first name under the package) a file in ``folder`` imports."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[1] for alias in node.names
                      if alias.name.startswith("shapecheck.")}
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if node.module != "shapecheck" and not (node.module or "").startswith("shapecheck."):
                    continue
                parts = node.module.split(".")[1:]
            else:
                parts = [*folder[:len(folder) - node.level + 1], *(node.module or "").split(".")]
                parts = [part for part in parts if part]
            found |= {parts[0]} if parts else {alias.name for alias in node.names}
    return found


@pytest.mark.parametrize("name", RUN_PATH)
def test_the_run_path_imports_nothing_above_it(name: str) -> None:
    path = PACKAGE / name
    folder = path.parent.relative_to(PACKAGE).parts
    imported = _top_modules(ast.parse(path.read_text(encoding="utf-8")), folder)
    assert not imported & FACE, imported & FACE


@pytest.mark.parametrize("text", [
    "from ..api import check_path", "from .. import api", "import shapecheck.cli",
    "from shapecheck.api import check_text", "from shapecheck import cli",
    "def f():\n    from ..api import check_text",
])
def test_the_run_path_scan_sees_a_call_back_up(text: str) -> None:
    """The scan above catches each way of writing the import it forbids (in backend/)."""
    assert _top_modules(ast.parse(text), ("backend",)) & FACE


def test_the_run_path_scan_lets_the_way_down_pass() -> None:
    text = "from ..loader import check_path\nfrom . import runtime\nfrom .. import fileio"
    assert _top_modules(ast.parse(text), ("backend",)) == {"loader", "backend", "fileio"}
