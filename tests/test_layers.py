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
    "value_rules": {"codes", "program", "rules", "symbolic"},
    "gathers": {"codes", "nodes", "program", "rules", "symbolic"},
    "complex_values": {"codes", "program", "rules", "symbolic"},
    "builtins": {"codes", "complex_values", "diagnostics", "einsum", "gathers", "nodes",
                 "program", "rules", "symbolic", "value_rules"},
    # The axis-meaning pass reads the checked program; it stands beside the formats, the
    # report and the backends, never below the checker.
    "meaning": {"codes", "nodes", "symbolic", "builtins", "diagnostics", "einsum", "program",
                "value_rules"},
}


def _imported(module: str) -> set[str]:
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found |= {alias.name for alias in node.names}
    return found


@pytest.mark.parametrize("module", sorted(BELOW))
def test_imports_point_down(module: str) -> None:
    assert _imported(module) <= BELOW[module], _imported(module) - BELOW[module]
