"""Message text lives in the code registry: the passes never build prose themselves."""

from __future__ import annotations

import ast
import re
import string
from pathlib import Path

import pytest

from shapecheck.messages import codes
from shapecheck.check.builtins import Kind

PACKAGE = Path(codes.__file__).resolve().parents[1]
# The passes whose message fields must come from `codes.DETAILS`.
PASSES = ("check/checker.py", "check/builtins.py", "check/rules.py", "check/einsum.py",
          "check/indexing.py",
          *sorted(path.relative_to(PACKAGE).as_posix()
                  for path in (PACKAGE / "symbolic").glob("*.py")),
          "syntax/invisible.py", "messages/suppress.py", "cli/verify.py",
          *sorted(path.relative_to(PACKAGE).as_posix()
                  for path in (PACKAGE / "meaning").glob("*.py")),
          "check/value_rules.py", "check/gathers.py", "check/complex_values.py",
          "syntax/notspec.py", "syntax/spellings.py", "syntax/versions.py")

# Two words of two letters or more, outside backticks: "the first", "is ambiguous".
# Code in backticks (`split_heads`, `.T`) and lone words ("tensor") pass.
_WORDS = re.compile(r"[A-Za-z]{2,} +[A-Za-z]{2,}")


def _fields(template: str) -> list[str | None]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


@pytest.mark.parametrize("key", sorted(codes.DETAILS))
def test_every_detail_formats_given_its_fields(key: str) -> None:
    fields = _fields(codes.DETAILS[key])
    assert all(name and name.isidentifier() for name in fields), (key, fields)
    text = codes.detail(key, **{name: f"<{name}>" for name in fields if name})
    for name in fields:
        assert f"<{name}>" in text


def test_every_detail_is_used() -> None:
    sources = "\n".join((PACKAGE / name).read_text(encoding="utf-8") for name in PASSES)
    dynamic = {f"kind_{kind.value}" for kind in Kind} | {
        f"where_{where}" for where in ("define", "assert", "output")}
    unused = [key for key in codes.DETAILS if f'"{key}"' not in sources and key not in dynamic]
    assert unused == []


def test_every_argument_kind_has_a_description() -> None:
    for kind in Kind:
        assert kind.description == codes.DETAILS[f"kind_{kind.value}"]


def _literal_text(node: ast.AST) -> str | None:
    """The literal text of a string or f-string (``{}`` for each interpolation)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "{}"
                       for part in node.values)
    return None


def _not_prose(tree: ast.Module) -> set[int]:
    """Strings that are not message text: docstrings, word lists, the builtins' doc column."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skip.add(id(node.value))  # docstrings, including attribute docstrings
        elif isinstance(node, ast.JoinedStr):
            skip.update(id(part) for part in node.values)  # checked as a whole
        elif isinstance(node, ast.Attribute) and node.attr == "split":
            skip.add(id(node.value))  # "dim constraint input ...".split()
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Builtin":
            # The documentation column of a shape-rule row, not a diagnostic.
            skip.update(id(arg) for arg in node.args[3:])
            skip.update(id(kw.value) for kw in node.keywords if kw.arg == "doc")
        elif isinstance(node, ast.Call) and _is_click(node.func):
            # click's --help texts stay English by decision (docs/i18n.md), in the command
            # modules: an option's help, a command's epilog.
            skip.update(id(inner) for kw in node.keywords if kw.arg in ("help", "epilog")
                        for inner in ast.walk(kw.value))
        elif isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id.endswith(("_EPILOG", "_HELP"))
                for target in node.targets):
            skip.update(id(inner) for inner in ast.walk(node.value))  # an epilog's text
    return skip


def _is_click(function: ast.expr) -> bool:
    """``click.option(...)``, ``cli.command(...)``: a call that declares the command line."""
    return (isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name)
            and function.value.id in ("click", "cli"))


def _sentences(tree: ast.Module) -> list[tuple[int, str]]:
    skip = _not_prose(tree)
    found = []
    for node in ast.walk(tree):
        text = _literal_text(node)
        if text is None or id(node) in skip:
            continue
        if _WORDS.search(re.sub(r"`[^`]*`", "", text)):
            found.append((node.lineno, text))
    return found


@pytest.mark.parametrize("module", PASSES)
def test_no_sentence_is_written_outside_the_registry(module: str) -> None:
    found = _sentences(ast.parse((PACKAGE / module).read_text(encoding="utf-8")))
    assert found == [], f"move these texts of {module} into codes.DETAILS: {found}"


MESSAGE_FIELDS = {"detail", "reason", "requirement", "operation", "what_found", "what_kind",
                  "relation", "where", "claim", "target_count", "operand"}


def _literal_fields(tree: ast.Module) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.keyword) or node.arg not in MESSAGE_FIELDS:
            continue
        parts = {id(part) for inner in ast.walk(node.value) if isinstance(inner, ast.JoinedStr)
                 for part in inner.values}
        for inner in ast.walk(node.value):
            text = None if id(inner) in parts else _literal_text(inner)
            if text is not None and " " in re.sub(r"`[^`]*`", "", text).strip():
                found.append((inner.lineno, f"{node.arg}={text!r}"))
    return found


@pytest.mark.parametrize("module", PASSES)
def test_message_fields_take_no_literal_prose(module: str) -> None:
    """`detail=` and its kin get a registry text, a name in backticks, or computed values."""
    found = _literal_fields(ast.parse((PACKAGE / module).read_text(encoding="utf-8")))
    assert found == [], f"move these texts of {module} into codes.DETAILS: {found}"


def test_the_scans_find_inline_prose() -> None:
    """The two scans above would catch the texts that used to be written inline."""
    tree = ast.parse(
        'ctx.report(codes.CONCAT, "tensors", detail=f"tensor {index} has shape {shape}")\n'
        'ctx.report(codes.RESHAPE, "shape", relation="is ambiguous", operation="`split_heads`")\n'
        '_WHERE = {"define": "its annotation"}\n'
        'raise SubscriptError(f"output `{output}` repeats a letter")\n'
        'Builtin("softmax", (X,), _softmax, "shape of x; each slice sums to 1")\n'
        'RESERVED = "dim constraint input".split()\n'
    )
    assert sorted(line for line, _ in _sentences(tree)) == [1, 2, 3, 4]
    assert _literal_fields(tree) == [(1, "detail='tensor {} has shape {}'"),
                                     (2, "relation='is ambiguous'")]
