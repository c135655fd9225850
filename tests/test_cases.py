"""Tests as data: every ``tests/cases/*.attn`` file is checked with ``check_text``.

A case file is a spec whose expected diagnostics sit next to the offending line,
as trailing comments (mypy's ``test-data`` style)::

    S = Q @ K                 # E: SC301
    S = Q @ K                 # E: SC301 inner dimensions
    dim A, B                  # W: SC401 # W: SC401
    S = Q @ K.T               # => [N, N]
    P = softmax(S); O = P @ V # P => [N, N] # O => [N, d]

- ``# E: CODE`` expects an error, ``# W: CODE`` a warning, ``# N: CODE`` a note,
  reported on that line (the line where the diagnostic's span starts). Text after
  the code, up to the next ``#``, is a fragment that must occur in the message;
  text after ``help:`` in it must occur in one of the diagnostic's help lines.
- ``# => SHAPE`` expects the tensor defined by the statement that starts on the line
  to have that shape, printed as the checker prints it (``[N, H*d]``, ``bool[N, N]``);
  ``# NAME => SHAPE`` names the tensor (for ``;``-separated statements).
- An optional header line ``# dims: N=4 d=2`` gives the bindings (``--dim``).
- A case file that is not UTF-8 is checked with ``check_bytes`` (as ``verify`` reads
  files); every other one with ``check_text``.

The expected diagnostics must equal the reported ones exactly, as a multiset of
(line, severity, code): a missing one and an extra one both fail.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from shapecheck.messages import codes
from shapecheck.api import check_bytes, check_text
from shapecheck.messages.diagnostics import Diagnostic
from shapecheck.check.program import Program

CASES = Path(__file__).parent / "cases"
CASE_FILES = sorted(CASES.glob("*.attn"))

_EXPECT = re.compile(r"#\s*([EWN]):\s*(SC\d{3})\b([^#]*)")
# `# NAME => SHAPE` names the tensor; any other text before `=>` is a comment.
_SHAPE = re.compile(r"#\s*(?:([A-Za-z_][A-Za-z0-9_]*)\s+=>|[^#]*?=>)\s*([^#]*)")
_DIMS = re.compile(r"^#\s*dims:([^#\n]*)", re.MULTILINE)
_SEVERITY = {"E": "error", "W": "warning", "N": "note"}


@dataclass
class Case:
    path: Path
    data: bytes
    text: str
    bindings: dict[str, int]
    # (line, severity, code) -> fragments the messages must contain
    expected: list[tuple[int, str, str, str]] = field(default_factory=list)
    shapes: list[tuple[int, str | None, str]] = field(default_factory=list)


def load_case(path: Path) -> Case:
    # Bytes, not read_text: "\r\n" stays as written, as `verify` reads it. A case
    # that is not UTF-8 (SC002) is read for its markers with replacement characters.
    data = path.read_bytes()
    text = data.decode("utf-8", errors="replace")
    case = Case(path, data, text, parse_bindings(text))
    for number, line in enumerate(text.split("\n"), start=1):
        for match in _EXPECT.finditer(line):
            letter, code, fragment = match.groups()
            case.expected.append((number, _SEVERITY[letter], code, fragment.strip()))
        for match in _SHAPE.finditer(line):
            name, shape = match.groups()
            case.shapes.append((number, name, shape.strip()))
    return case


def parse_bindings(text: str) -> dict[str, int]:
    match = _DIMS.search(text)
    if match is None:
        return {}
    bindings = {}
    for item in match.group(1).split():
        name, _, value = item.partition("=")
        bindings[name] = int(value)
    return bindings


def run_case(case: Case) -> Program:
    """`check_text` on the text; a file that is not UTF-8 goes through `check_bytes`."""
    try:
        text = case.data.decode("utf-8")
    except UnicodeDecodeError:
        return check_bytes(case.data, case.bindings)
    return check_text(text, case.bindings)


def describe(diagnostic: Diagnostic) -> str:
    helps = "".join(f"\n      help: {h}" for h in diagnostic.help)
    return (f"  line {diagnostic.span.line}:{diagnostic.span.column}: "
            f"{diagnostic.severity.value}[{diagnostic.code}] {diagnostic.message}{helps}")


@pytest.mark.parametrize("path", CASE_FILES, ids=[p.stem for p in CASE_FILES])
def test_case(path: Path) -> None:
    case = load_case(path)
    program = run_case(case)
    reported = Counter((d.span.line, d.severity.value, d.code) for d in program.diagnostics)
    expected = Counter((line, severity, code) for line, severity, code, _ in case.expected)
    if reported != expected:
        missing = sorted((expected - reported).elements())
        extra = sorted((reported - expected).elements())
        lines = [f"{path.name}: diagnostics differ"]
        lines += [f"  missing: line {ln}: {sev}[{code}]" for ln, sev, code in missing]
        lines += [f"  unexpected: line {ln}: {sev}[{code}]" for ln, sev, code in extra]
        lines.append("all reported:")
        lines += [describe(d) for d in program.diagnostics]
        pytest.fail("\n".join(lines), pytrace=False)
    for line, severity, code, fragment in case.expected:
        if not fragment:
            continue
        candidates = [d for d in program.diagnostics
                      if d.span.line == line and d.code == code and d.severity.value == severity]
        message, _, wanted_help = (part.strip() for part in fragment.partition("help:"))
        ok = any(message in d.message and any(wanted_help in h for h in d.help or ("",))
                 for d in candidates)
        if not ok:
            pytest.fail(f"{path.name}:{line}: no {code} contains {fragment!r}:\n"
                        + "\n".join(describe(d) for d in candidates), pytrace=False)
    check_shapes(case, program)


def check_shapes(case: Case, program: Program) -> None:
    """`# => SHAPE` names the tensor of the statement that spans the marker's line."""
    where = case.path.name
    for line, name, shape in case.shapes:
        if name is None:
            defined = [t for t in program.tensors.values() if t.span.line <= line <= t.span.end_line]
            if len(defined) != 1:
                pytest.fail(f"{where}:{line}: `=>` needs exactly one tensor defined by the "
                            f"statement on this line, found {[t.name for t in defined]}",
                            pytrace=False)
            tensor = defined[0]
        elif name in program.tensors:
            tensor = program.tensors[name]
        else:
            pytest.fail(f"{where}:{line}: no tensor `{name}`", pytrace=False)
        if tensor.value.text() != shape:
            pytest.fail(f"{where}:{line}: `{tensor.name}` has shape {tensor.value.text()}, "
                        f"expected {shape}", pytrace=False)


def test_there_are_cases() -> None:
    assert len(CASE_FILES) >= 10


# Codes that no spec text can produce: they describe a path or the tool itself.
# Each is tested where it arises.
NOT_FROM_A_SPEC = {
    "SC006": "tests/test_cli.py::test_an_internal_failure_in_one_file_is_a_diagnostic_for_that_file",
    "SC007": "tests/test_cli.py::test_a_missing_path_is_a_diagnostic_and_the_rest_is_checked",
    # A Python target's diagnostics: their examples are PyTorch code, not specs.
    "SC601": "tests/test_torchfront.py::test_untraceable_code_is_one_diagnostic_at_its_line",
    "SC602": "tests/test_torchfront.py::test_an_unknown_operator_is_named_and_the_rest_is_checked",
    "SC603": "tests/test_torchfront.py::test_a_bad_target_is_a_usage_error",
    "SC610": "tests/test_whole_models.py::test_a_mask_the_model_builds_wrong_is_flagged_at_its_line",
    "SC611": "tests/test_whole_models.py::test_other_masks_the_model_builds_wrong_are_flagged_at_their_line",
    "SC612": "tests/test_whole_models.py::test_positions_numbered_from_zero_at_a_decode_step_are_flagged_at_their_arange",
    "SC613": "tests/test_flex_public2.py::test_reads_past_an_axis_are_flagged_at_the_mask_mod",
}


def test_every_registered_code_is_exercised() -> None:
    """Each code in the registry is expected by at least one case file."""
    used = {code for path in CASE_FILES for _, _, code, _ in load_case(path).expected}
    missing = sorted(set(codes.REGISTRY) - used - set(NOT_FROM_A_SPEC))
    assert not missing, f"no case file expects {missing}"


def test_expected_codes_are_registered_with_their_severity() -> None:
    for path in CASE_FILES:
        for line, severity, code, _ in load_case(path).expected:
            assert code in codes.REGISTRY, f"{path.name}:{line}: unknown code {code}"
            assert codes.REGISTRY[code].severity.value == severity, (
                f"{path.name}:{line}: {code} is a {codes.REGISTRY[code].severity.value}")


def test_examples_match_their_markers() -> None:
    """The shipped examples follow the same convention: broken ones carry `# E:`."""
    examples = Path(__file__).parent.parent / "examples"
    for path in sorted(examples.rglob("*.attn")):
        case = load_case(path)
        program = run_case(case)
        reported = sorted((d.span.line, d.severity.value, d.code) for d in program.diagnostics)
        expected = sorted((line, severity, code) for line, severity, code, _ in case.expected)
        assert reported == expected, f"{path}: {[describe(d) for d in program.diagnostics]}"


@pytest.mark.parametrize("code", sorted(codes.REGISTRY))
def test_explain_example_produces_its_code(code: str) -> None:
    """The example `shapecheck explain CODE` prints really gives that diagnostic."""
    example = codes.REGISTRY[code].example
    if example.startswith("("):  # described in words (a binary file, ...), not a spec
        pytest.skip("the example is a description")
    if code in NOT_FROM_A_SPEC and code.startswith("SC6"):
        pytest.skip(f"the example is Python; tested by {NOT_FROM_A_SPEC[code]}")
    bindings = {name: int(value) for name, value in re.findall(r"--dim (\w+)=(\d+)", example)}
    reported = [d.code for d in check_text(example, bindings).diagnostics]
    assert code in reported, f"{code}'s example gives {reported}:\n{example}"


def test_limit_explanation_states_the_real_limits() -> None:
    from shapecheck.syntax import parser
    from shapecheck import symbolic

    what = codes.REGISTRY["SC003"].what
    for limit in (parser.MAX_NESTING, parser.MAX_INT_DIGITS, symbolic.MAX_EXPONENT):
        assert f" {limit} " in what, (limit, what)
    for limit in (symbolic.MAX_TERMS, symbolic.MAX_DEGREE, symbolic.MAX_BITS, symbolic.MAX_WORK,
                  symbolic.MAX_STEPS):
        assert f"{limit:,}" in what, (limit, what)
