"""Malformed and hostile input: always diagnostics, never a traceback, never a hang.

Every input here goes through ``check_bytes`` in-process (with a time budget and
the span invariants) and, all together, through the installed command in a
subprocess with a timeout (exit status 0 or 1, no traceback). Hypothesis then
feeds generated specs and mutated examples to ``check_text`` and every output format.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shapecheck.messages import codes
from shapecheck.api import check_bytes, check_text, file_result
from shapecheck.messages.diagnostics import Severity
from shapecheck.formats import render
from shapecheck.check.program import Program

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").rglob("*.attn"))
EXAMPLE_TEXTS = [path.read_text(encoding="utf-8") for path in EXAMPLES]
# CPU seconds for one input. A guard against hangs (minutes), not a speed target: on a
# shared, loaded machine even CPU time stretches, so the guard is generous; the figures
# themselves are printed by benchmarks/bench_hostile.py (most take milliseconds).
HANG_GUARD = 120.0

HEAD = b"dim N, d\ninput Q: [N, d]\n"
LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _names(count: int) -> str:
    return ", ".join(f"a{i}" for i in range(count))


def _five_megabytes() -> bytes:
    """A large but ordinary spec: 10,000 statements, each with a long comment."""
    comment = b"  # " + b"the scores of one head, scaled; " * 15
    lines = [HEAD, b"input K: [N, d]\n"]
    lines += [b"S%d = Q @ K.T / sqrt(d)%s\n" % (i, comment) for i in range(10_000)]
    data = b"".join(lines)
    assert len(data) >= 5_000_000
    return data


# name -> (bytes, codes that must be reported; None: the spec must be clean)
HOSTILE: dict[str, tuple[bytes, set[str] | None]] = {
    "binary junk": (bytes(range(256)) * 64, {"SC002"}),
    "pseudo-random bytes": (random.Random(0).randbytes(100_000), {"SC002"}),
    "invalid utf-8 in a comment": (HEAD + b"# caf\xe9\noutput Q\n", {"SC002"}),
    "overlong utf-8": (b"dim N\n# \xc0\xaf\n", {"SC002"}),
    "utf-16 surrogate in utf-8": (b"dim N\n# \xed\xa0\x80\n", {"SC002"}),
    "truncated utf-8 at the end": (b"dim N\n# \xe2\x82", {"SC002"}),
    "utf-16 file": ("dim N\ninput X: [N]\n".encode("utf-16"), {"SC002"}),
    "nul bytes": (b"dim N\x00\ninput X: [N]\x00\noutput X\n", {"SC001"}),
    "only nul bytes": (b"\x00" * 10_000, {"SC001"}),
    "a byte order mark": (b"\xef\xbb\xbf" + HEAD + b"output Q\n", None),
    "empty": (b"", None),
    "only a comment": (b"# nothing", None),
    "200,000 blank lines": (b"\n" * 200_000 + HEAD + b"output Q\n", None),
    "200,000 semicolons": (HEAD + b";" * 200_000 + b"\noutput Q\n", None),
    "100,000 comment lines": (HEAD + b"# c\n\n" * 100_000 + b"output Q\n", None),
    "lone carriage returns": (b"dim N\rinput X: [N]\routput X\r", {"SC001"}),
    "10,000 nested parentheses": (HEAD + b"S = " + b"(" * 10_000 + b"Q" + b")" * 10_000 + b"\n",
                                  {"SC003"}),
    "10,000 unclosed parentheses": (HEAD + b"S = " + b"(" * 10_000 + b"Q\noutput Q\n", {"SC003"}),
    "10,000 closing parentheses": (HEAD + b"S = Q" + b")" * 10_000 + b"\noutput Q\n", {"SC001"}),
    "10,000 nested brackets in a shape": (b"dim N\ninput X: " + b"[" * 10_000 + b"N"
                                          + b"]" * 10_000 + b"\n", {"SC003"}),
    "300 nested calls": (HEAD + b"S = " + b"exp(" * 300 + b"Q" + b")" * 300 + b"\n", {"SC003"}),
    "10,000 unary minus": (HEAD + b"S = " + b"-" * 10_000 + b"Q\noutput S\n", {"SC003"}),
    "10,000 unary minus in a shape": (b"dim N\ninput X: [" + b"-" * 10_000 + b"N]\n", {"SC003"}),
    "a 5 MB spec": (_five_megabytes(), None),
    "a 1 MB name": (b"dim " + b"N" * 1_000_000 + b"\ninput X: [" + b"N" * 1_000_000
                    + b"]\noutput X\n", None),
    "a 1 MB string": (HEAD + b'S = einsum("' + b"i" * 1_000_000 + b'", Q)\n', {"SC310"}),
    "a 1 MB unterminated string": (HEAD + b'S = "' + b"i" * 1_000_000 + b"\n", {"SC001"}),
    "N ** 100000": (b"dim N\ninput X: [N ** 100000]\noutput X\n", {"SC003"}),
    "a power tower": (b"dim N\ninput X: [((N ** 64) ** 64) ** 64]\noutput X\n", {"SC003"}),
    "2 ** 4000 as a fixed dim": (b"dim T = 2 ** 4000\n", {"SC003"}),
    "a 5000-digit literal": (b"dim N\ninput X: [N * " + b"9" * 5000 + b"]\noutput X\n",
                             {"SC003"}),
    "a 5000-digit literal as a value": (HEAD + b"S = Q * " + b"9" * 5000 + b"\n", {"SC003"}),
    "a 100,000-digit decimal": (HEAD + b"S = Q * 0." + b"1" * 100_000 + b"\noutput S\n", None),
    "1e999999": (HEAD + b"S = Q * 1e999999\noutput S\n", None),
    "dim T = 99999999999999999999999999": (
        b"dim T = 99999999999999999999999999\ninput X: [T, T * T]\noutput X\n", None),
    "a huge fixed dim to a high power": (
        b"dim T = 99999999999999999999999999\ninput X: [T ** 64]\noutput X\n", None),
    "a huge axis": (HEAD + b"S = softmax(Q, axis=" + b"9" * 39 + b")\n", {"SC305"}),
    "200-term sum of dims": (f"dim {_names(200)}\ninput X: [{' + '.join(f'a{i}' for i in range(200))}]"
                             "\noutput X\n".encode(), None),
    "200-term product of dims": (f"dim {_names(200)}\ninput X: [{' * '.join(f'a{i}' for i in range(200))}]"
                                 "\noutput X\n".encode(), None),
    "200-term difference of dims": (
        f"dim {_names(200)}\ninput X: [{' - '.join(f'a{i}' for i in range(200))}]\n".encode(),
        {"SC201"}),
    "200-term sum of tensors": (HEAD + b"S = " + b" + ".join([b"Q"] * 200) + b"\noutput S\n", None),
    "200-term matmul chain": (b"dim N\ninput X: [N, N]\nS = " + b" @ ".join([b"X"] * 200)
                              + b"\noutput S\n", None),
    "200 chained constraints": (
        f"dim {_names(200)}\n".encode()
        + b"".join(b"constraint a%d == 2 * a%d\n" % (i, i + 1) for i in range(199))
        + b"input X: [a0]\nY = reshape(X, [a199, -1])\noutput Y\n", None),
    "200 chained derived dims": (
        b"dim a0\n" + b"".join(b"dim a%d = a%d + a%d\n" % (i + 1, i, i) for i in range(199))
        + b"input X: [a199]\noutput X\n", None),
    "a product of 40 sums": (
        f"dim {_names(40)}\ninput X: [{' * '.join(f'(a{i} + 1)' for i in range(40))} - 1]\n".encode(),
        {"SC003"}),
    "5,000 dims": (f"dim {_names(5000)}\n".encode(), {"SC401", "SC004"}),
    "rank 5,000": (b"dim N\ninput X: [" + b", ".join([b"N"] * 5000) + b"]\nS = X.T + X\noutput S\n",
                   {"SC003"}),  # NumPy holds 64 axes
    "concat of 3,000 tensors": (HEAD + b"S = concat([" + b", ".join([b"Q"] * 3000) + b"])\noutput S\n",
                                None),
    "einsum with every letter": (
        f"dim N\ninput X: [{', '.join(['N'] * 52)}]\nS = einsum(\"{LETTERS}->{LETTERS[::-1]}\", X)"
        "\noutput S\n".encode(), None),
    "10,000 chained subscripts": (HEAD + b"S = Q" + b"[0, None]" * 10_000 + b"\n", {"SC003"}),
    "10,000 nested subscripts": (HEAD + b"S = Q[" + b"Q[" * 10_000 + b"0" + b"]" * 10_001 + b"\n",
                                 {"SC003"}),
    "10,000 logical nots": (HEAD + b"S = " + b"~" * 10_000 + b"(Q > 0)\noutput S\n", {"SC003"}),
    "10,000 chained comparisons": (HEAD + b"S = Q" + b" < Q" * 10_000 + b"\n", {"SC001"}),
    "a 10,000-entry subscript": (HEAD + b"S = Q[" + b"None, " * 10_000 + b"...]\noutput S\n",
                                 {"SC003"}),  # more than the 64 axes NumPy holds
    "a slice with a huge bound": (HEAD + b"S = Q[:" + b"9" * 39 + b"]\n", {"SC317"}),
    # the counterexample of `d // E` under E == H*d does not depend on d
    "a floor a constraint cancels": (b"dim d, H, E\nconstraint E == H * d\ninput X: [d // E]\n",
                                     {"SC201"}),
    "300 syntax errors": (b"x = @\n" * 300, {"SC008"}),  # plainly not a spec (issue 18)
    # a declared file (a sketch would infer `u`), so each use of `u` is an error
    "300 undefined names": (b"dim N\n" + b"".join(b"t%d = u\n" % i for i in range(300)),
                            {"SC101", "SC004"}),
    # a sketch: 600 inputs inferred, in one attempt (every one an operand of `@`)
    "600 undeclared names in a sketch": (b"".join(b"t%d = u%d @ v%d.T\n" % (i, i, i)
                                                  for i in range(300)), None),
}


_TERMINALS = re.compile(r"\$END|_SEP|\b(?:[A-Z]{2,}_?)+\b|Token\(|Tree\(")


def assert_well_formed(program: Program, text: str) -> None:
    """Codes registered with their severity; 1-based spans inside the text."""
    lines = text.split("\n")
    for diagnostic in program.diagnostics:
        code = codes.REGISTRY.get(diagnostic.code)
        assert code is not None, diagnostic
        assert diagnostic.severity is code.severity, diagnostic
        span = diagnostic.span
        assert 1 <= span.line <= span.end_line <= len(lines), (span, len(lines))
        assert (span.line, span.column) <= (span.end_line, span.end_column), span
        # A span may end just after its line (an "end of line" error points there).
        assert 1 <= span.column <= len(lines[span.line - 1]) + 1, (span, lines[span.line - 1][:80])
        assert 1 <= span.end_column <= len(lines[span.end_line - 1]) + 2, span
        for note in diagnostic.notes:
            if note.span is not None:
                assert 1 <= note.span.line <= note.span.end_line <= len(lines), note
        if diagnostic.code == "SC001":  # in words: no parser internals outside the quotes
            words = re.sub(r"`[^`]*`|'[^']*'", "", diagnostic.message)
            assert not _TERMINALS.search(words), diagnostic.message
    assert len(program.diagnostics) <= 201  # 200, and SC004 saying so
    for name, dims in program.shapes().items():
        assert isinstance(name, str) and all(isinstance(d, str) for d in dims)


def assert_renders(program: Program) -> None:
    result = file_result(program, "spec.attn")
    for fmt in ("text", "json", "sarif", "github"):
        output = render([result], fmt, color=True, fail_on="error")
        assert isinstance(output, str)
    json.loads(render([result], "json", color=False, fail_on="error"))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_input_gives_diagnostics_without_hanging(name: str) -> None:
    data, expected = HOSTILE[name]
    start = time.process_time()
    program = check_bytes(data)
    elapsed = time.process_time() - start
    assert elapsed < HANG_GUARD, f"{name}: {elapsed:.1f} s"
    assert_well_formed(program, program.source)
    assert_renders(program)
    reported = {d.code for d in program.diagnostics}
    if expected is None:
        assert not [d for d in program.diagnostics if d.severity is Severity.ERROR], \
            [(d.code, d.message[:100]) for d in program.diagnostics]
    else:
        assert expected <= reported, (expected, [(d.code, d.message[:100]) for d in program.diagnostics])


def test_the_first_bad_byte_is_located() -> None:
    program = check_bytes(b"dim N\ninput X: [N]   # caf\xe9\n")
    (diagnostic,) = program.diagnostics
    assert diagnostic.code == "SC002"
    assert (diagnostic.span.line, diagnostic.span.column) == (2, 21)
    assert "0xe9" in diagnostic.message and "offset 26" in diagnostic.message


@pytest.mark.slow
def test_the_installed_command_survives_every_hostile_file(tmp_path: Path) -> None:
    paths = []
    for index, (name, (data, _)) in enumerate(HOSTILE.items()):
        path = tmp_path / f"{index:02d}.attn"
        path.write_bytes(data)
        paths.append(path)
    process = subprocess.run(
        [sys.executable, "-m", "shapecheck", "verify", "--format", "json", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False)
    assert process.returncode == 1, process.stderr[-2000:]
    assert "Traceback" not in process.stderr and process.stderr == ""
    document = json.loads(process.stdout)
    assert document["summary"]["files"] == len(HOSTILE)
    by_path = {Path(entry["path"]).name: entry for entry in document["files"]}
    for index, (name, (_, expected)) in enumerate(HOSTILE.items()):
        entry = by_path[f"{index:02d}.attn"]
        assert entry["ok"] is (expected is None), name
        if expected is not None:
            assert expected <= {d["code"] for d in entry["diagnostics"]}, name


@pytest.mark.slow
@pytest.mark.parametrize("name, fmt", [("binary junk", "text"), ("a 5 MB spec", "text"),
                                       ("10,000 nested parentheses", "sarif")])
def test_a_hostile_file_alone_exits_0_or_1(tmp_path: Path, name: str, fmt: str) -> None:
    data, expected = HOSTILE[name]
    path = tmp_path / "spec.attn"
    path.write_bytes(data)
    process = subprocess.run(
        [sys.executable, "-m", "shapecheck", "verify", "--format", fmt, str(path)],
        capture_output=True, text=True, timeout=60, check=False)
    assert process.returncode == (0 if expected is None else 1), process.stderr[-2000:]
    assert "Traceback" not in process.stdout + process.stderr


# --- property tests ----------------------------------------------------------------------------

TOKENS = [
    "(", ")", "[", "]", ",", "@", "**", ".T", "^T", "-1", "dim ", "input ", "output ", "param ",
    "assert ", "constraint ", ":", "=", "==", "<=", "!=", ";", "\n", "\r\n", "#", '"', " ", "\t",
    "softmax(", "axis=row", "axis=col", "axis=-1", "keepdims=true", "eps=1e-5", "bool", "inf",
    "-inf", "true", "False", "N", "d", "H", "D_model", "E", "I", "S", "pi", "K.T", "Q @ K.T",
    "-", "+", "*", "/", "//", "0", "1", "2", "0.5", "1e-6", "99999999999999999999999999",
    'einsum("ij,jk->ik", ', '"...ij"', "reshape(", "split_heads(", "merge_heads(", "concat([",
    "where(", "causal_mask(", "ones([", "zeros([", "sum(", "mean(", "max(", "layernorm(",
    "rmsnorm(", "repeat(", "transpose(", "dropout(", "exp(", "sqrt(", "[]", "\\", "'", "!",
    "$", "é", "→", "\x00", "\x0c", "\r",
    "&", "|", "~", "<", ">", ">=", "...", "None", "[:", ":h]", "::2", "::-1", "[..., :d]", "[0]",
    "·", "×", "dim=-1", "keepdim=true", "(Q, K)", "(Q,)", "arange(", "stack([", "tril(", "triu(",
    "cos(", "elu(", "rsqrt(", "causal_mask(N, ", "window=", "k=-1",
]


@st.composite
def mutated_examples(draw: st.DrawFn) -> str:
    """An example spec with a few random deletions, insertions and replacements."""
    text = draw(st.sampled_from(EXAMPLE_TEXTS))
    for _ in range(draw(st.integers(1, 8))):
        position = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["delete", "insert", "replace", "char"]))
        length = draw(st.integers(1, 20))
        if action == "delete":
            text = text[:position] + text[position + length:]
        elif action == "insert":
            text = text[:position] + draw(st.sampled_from(TOKENS)) + text[position:]
        elif action == "replace":
            text = text[:position] + draw(st.sampled_from(TOKENS)) + text[position + length:]
        else:
            text = text[:position] + draw(st.characters()) + text[position:]
    return text


DIMS = ["N", "d", "H", "E", "pi", "1", "2"]


def _dim_expressions() -> st.SearchStrategy[str]:
    return st.recursive(
        st.sampled_from(DIMS),
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from([" + ", " - ", " * ", " / ", " // "]), inner)
            .map(lambda t: f"({t[0]}{t[1]}{t[2]})"),
            st.tuples(inner, st.sampled_from(["0", "1", "2", "-1", "d", "0.5"]))
            .map(lambda t: f"{t[0]} ** {t[1]}"),
        ),
        max_leaves=4,
    )


# Built once: building a strategy inside each draw makes generation ten times slower.
DIM_EXPRESSIONS = _dim_expressions()
SHAPES = st.tuples(st.sampled_from(["", "", "bool"]), st.lists(DIM_EXPRESSIONS, max_size=4)).map(
    lambda t: f"{t[0]}[{', '.join(t[1])}]")


CALLS = [
    "softmax({x}, axis={axis})", "transpose({x})", "transpose({x}, [1, 0])", "reshape({x}, {shape})",
    "split_heads({x}, {dim})", "merge_heads({x})", "repeat({x}, {dim}, axis={axis})",
    "concat([{x}, {y}], axis={axis})", "sum({x}, axis={axis}, keepdims=true)", "mean({x})",
    "max({x}, axis={axis})", "layernorm({x}, eps=1e-5)", "rmsnorm({x})", "where({x}, {y}, -inf)",
    "causal_mask({dim})", "ones({shape})", "zeros({shape})", 'einsum("ij,jk->ik", {x}, {y})',
    'einsum("...ij", {x})', "dropout({x}, 0.1)", "exp({x})", "sqrt({dim})", "{x}.T", "-{x}",
    "({x} @ {y})", "({x} + {y})", "({x} * {y})", "({x} / sqrt(d))", "({x} ** 2)",
    "{x}[..., :{dim}]", "{x}[{dim}]", "{x}[:, None]", "{x}[::2]", "{x}[{dim}:, ..., -1]",
    "{x}[{dim}::-1]", "(({x} > 0) & ({y} < 1))", "~({x} == {y})", "({x} | {y})",
    "stack([{x}, {y}], axis={axis})", "tril({x}, k={dim})", "triu({x})", "arange({dim})",
    "causal_mask({dim}, {dim}, window={dim})", "cos({x})", "elu({x}, alpha=0.5)",
    "softmax({x}, dim={axis})", "concat(({x}, {y}), dim={axis})", "({x} · {y})",
]


@st.composite
def generated_specs(draw: st.DrawFn) -> str:
    """Specs built from the language's parts: mostly valid, often wrong in shape."""
    lines = ["dim N, d, H, E, pi"]
    if draw(st.booleans()):
        lines.append("constraint E == H * d")
    names = []
    for index in range(draw(st.integers(1, 3))):
        lines.append(f"input X{index}: {draw(SHAPES)}")
        names.append(f"X{index}")
    for index in range(draw(st.integers(1, 6))):
        template = draw(st.sampled_from(CALLS))
        value = template.format(
            x=draw(st.sampled_from(names)), y=draw(st.sampled_from(names)),
            axis=draw(st.sampled_from(["row", "col", "0", "1", "-1", "2"])),
            shape=draw(SHAPES).replace("bool", ""), dim=draw(DIM_EXPRESSIONS))
        annotation = f": {draw(SHAPES)}" if draw(st.integers(0, 4)) == 0 else ""
        keyword = draw(st.sampled_from(["", "", "output "]))
        lines.append(f"{keyword}Y{index}{annotation} = {value}")
        names.append(f"Y{index}")
    if draw(st.booleans()):
        lines.append(f"assert {draw(st.sampled_from(names))}: {draw(SHAPES)}")
    separator = draw(st.sampled_from(["\n", "\n", "; ", "\r\n"]))
    return separator.join(lines) + "\n"


def check_property(text: str) -> None:
    program = check_text(text)
    assert_well_formed(program, text)
    assert_renders(program)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_examples())
def test_mutated_examples_never_crash(text: str) -> None:
    check_property(text)


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generated_specs())
def test_generated_specs_never_crash(text: str) -> None:
    check_property(text)


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=60).map("".join))
def test_token_soup_never_crashes(text: str) -> None:
    check_property(text)


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_crash(data: bytes) -> None:
    program = check_bytes(data)
    assert_well_formed(program, program.source)
    assert_renders(program)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        assert [d.code for d in program.diagnostics] == ["SC002"]


def test_the_bad_byte_column_counts_characters_not_bytes() -> None:
    """Columns are characters everywhere, so the code frame underlines the right place."""
    program = check_bytes("dim é\n# café ".encode() + b"\xff\n")
    (diagnostic,) = program.diagnostics
    assert (diagnostic.span.line, diagnostic.span.column) == (2, 8)
    assert program.source.split("\n")[1][diagnostic.span.column - 1] == "\ufffd"


def test_the_bad_byte_after_a_byte_order_mark_is_located() -> None:
    program = check_bytes(b"\xef\xbb\xbfdim N\n# \xfe\n")
    (diagnostic,) = program.diagnostics
    assert "byte 0xfe at offset 11" in diagnostic.message
    assert (diagnostic.span.line, diagnostic.span.column) == (2, 3)
