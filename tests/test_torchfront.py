"""The PyTorch front end (issue 23): real modules traced with torch.export, written as
specs that verify and conform, and shipped bugs reported at their Python lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from shapecheck.api import check_text  # noqa: E402
from shapecheck.cli import main  # noqa: E402
from shapecheck.pytorch.conform import conform  # noqa: E402
from shapecheck.pytorch.front import extract  # noqa: E402
from shapecheck.pytorch.front.sourcemap import check  # noqa: E402

DATA = Path(__file__).parent / "data" / "torch"


def target(name: str) -> str:
    return f"{DATA / name.split(':')[0]}:{name.split(':')[1]}"


CORRECT = ["nanogpt.py:CausalSelfAttention", "nanogpt.py:flash", "hf.py:gpt2", "hf.py:bert",
           "hf.py:gpt2_small_powers", "hf.py:llama_small_powers", "hf.py:bert_sdpa",
           "hf.py:llama"]


@pytest.mark.slow
@pytest.mark.parametrize("name", CORRECT)
def test_correct_modules_extract_verify_clean_and_conform(name: str) -> None:
    if name.startswith("hf.py"):
        pytest.importorskip("transformers")
    extraction = extract(target(name))
    program = check_text(extraction.text)
    assert [d.code for d in program.diagnostics] == [], extraction.text
    # Llama's eager attention takes its softmax in float32 (`dtype=torch.float32`) whatever
    # it is given: it is judged at float32's tolerance.
    tolerance = {"rtol": 1e-4, "atol": 1e-5} if "llama" in name else {}
    result = conform(extraction.text, extraction.function(), dims=extraction.bindings,
                     framework="torch", cases=3, **tolerance)
    assert result.ok, result.report()


def test_the_spec_reads_like_the_module() -> None:
    text = extract(target("nanogpt.py:CausalSelfAttention")).text
    assert "dim n_embd = n_head * head_dim" in text
    assert "/ sqrt(head_dim)" in text                  # 0.377... recovered as a dim
    assert "softmax(att_1, axis=-1)  # " in text
    assert "nanogpt.py:34" in text                     # the softmax's own line
    assert "causal_mask(block_size)" in text


BUGS = [  # (target, code, Python line), as their authors wrote them
    ("karpathy_scale.py:Head", "SC404", 22),
    ("labml_softmax.py:AttentionBlock", "SC402", 24),  # at `attn.softmax(dim=1)`
    ("vit_merge.py:Attention", "SC411", 27),
    ("fastnlp_mask.py:make", "SC406", 27),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, code, line", BUGS)
def test_shipped_bugs_are_flagged_at_their_line(name: str, code: str, line: int) -> None:
    results = check(target(name))
    found = [(d.code, d.span.line) for r in results for d in r.diagnostics]
    assert found == [(code, line)]
    assert results[0].path.endswith(name.split(":")[0])
    assert results[0].diagnostics[0].help and "in the traced spec" not in \
        results[0].diagnostics[0].help[0]


@pytest.mark.slow
def test_verify_reports_at_the_python_line_in_every_format(capsys: pytest.CaptureFixture[str]) -> None:
    name = target("karpathy_scale.py:Head")
    with pytest.raises(SystemExit) as done:
        main(["verify", name, "--format", "json"])
    assert done.value.code == 1  # SC404, a warning about the code, fails the run (issue 34)
    document = json.loads(capsys.readouterr().out)
    [diagnostic] = document["files"][0]["diagnostics"]
    assert (diagnostic["code"], diagnostic["line"]) == ("SC404", 22)
    for fmt in ("text", "sarif", "github"):
        with pytest.raises(SystemExit):
            main(["verify", name, "--format", fmt, "--color", "never"])
        out = capsys.readouterr().out
        assert "22" in out and "SC404" in out
        if fmt == "text":
            assert "C**-0.5" in out  # the frame shows the Python line


def test_untraceable_code_is_one_diagnostic_at_its_line() -> None:
    [result] = check(target("odd.py:Branchy"))
    [diagnostic] = result.diagnostics
    assert diagnostic.code == "SC601" and diagnostic.span.line == 15


def test_an_untraceable_module_prints_nothing_of_torchs_own(capfd: pytest.CaptureFixture[str]
                                                             ) -> None:
    """A failed export prints its partial graph to stderr (torch/export/_trace.py) and logs
    through torch's own loggers: the user gets SC601, not pages of torch's graph."""
    with pytest.raises(SystemExit) as done:
        main(["verify", target("odd.py:Branchy")])
    assert done.value.code == 1
    out, err = capfd.readouterr()
    assert "error[SC601]" in out and err == ""


def test_an_unknown_operator_is_named_and_the_rest_is_checked() -> None:
    results = check(target("odd.py:Unlowered"))
    codes = [(d.code, d.span.line) for r in results for d in r.diagnostics]
    assert codes == [("SC602", 28)]  # the weights it reads are not "unused"
    extraction = extract(target("odd.py:Unlowered"))
    assert "softmax(" in extraction.text


def test_an_unknown_operator_never_fails_verify(capsys: pytest.CaptureFixture[str]) -> None:
    """SC602 is about shapecheck's limits, not the module (`about_tool`): reported, exit 0."""
    with pytest.raises(SystemExit) as done:
        main(["verify", target("odd.py:Unlowered")])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "warning[SC602]" in out and out.rstrip().endswith("1 file verified, with 1 warning.")


def test_extract_command_writes_a_spec_that_verifies(tmp_path: Path) -> None:
    out = tmp_path / "attention.attn"
    with pytest.raises(SystemExit) as done:
        main(["extract", target("nanogpt.py:CausalSelfAttention"), "-o", str(out),
              "--init", "n_head=H"])
    assert done.value.code == 0
    text = out.read_text()
    assert "dim n_embd = H * head_dim" in text
    assert check_text(text).ok


def test_a_bad_target_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["extract", target("nanogpt.py:Missing")])
    assert done.value.code == 2
    with pytest.raises(SystemExit) as done:
        main(["verify", target("nanogpt.py:Missing")])
    assert done.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_configured_modules_are_checked_with_the_folder(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "model.py").write_text((DATA / "karpathy_scale.py").read_text())
    (tmp_path / "pyproject.toml").write_text(
        '[tool.shapecheck]\nmodules = [{ target = "model.py:Head", init = { n_embd = 35 } }]\n')
    with pytest.raises(SystemExit):
        main(["verify", str(tmp_path / "model.py"), "--format", "json"])
    document = json.loads(capsys.readouterr().out)
    assert [d["code"] for f in document["files"] for d in f["diagnostics"]] == ["SC404"]


def test_verify_of_attn_files_never_imports_torch(tmp_path: Path) -> None:
    spec = tmp_path / "a.attn"
    spec.write_text("dim N, d\ninput Q: [N, d]\noutput S = Q @ Q.T\n")
    code = ("import sys\nfrom shapecheck.cli import main\nfor path in (%r, %r):\n    try:\n"
            "        main(['verify', path])\n    except SystemExit:\n        pass\n"
            "assert 'torch' not in sys.modules\n"
            "assert 'shapecheck.pytorch.front' not in sys.modules\n" % (str(spec), str(tmp_path)))
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ})


CORPUS_CORRECT = ["Plain", "Einsum", "CausalTril", "Sdpa", "key_padding", "GroupedQuery",
                  "Norms", "Annotated", "SplitRegrouped", "rotary_both", "cached_values"]
CORPUS_BUGS = {  # the line marked `# BUG` in corpus.py, and the code that flags it
    "SoftmaxOverQueries": "SC402", "ScaleByModelWidth": "SC404", "SplitScale": "SC404",
    "MaskTransposed": "SC407", "MaskInverted": "SC408", "MaskAfterSoftmax": "SC406",
    "WeightsTransposed": "SC402", "MergeWithoutTranspose": "SC411",
    "SplitWithoutTranspose": "SC411",  # merged [T, H], split as [H, T]
    "ForgottenRepeatKv": "SC601",  # torch itself cannot broadcast 5 heads against 1
}


@pytest.mark.slow
@pytest.mark.parametrize("name", CORPUS_CORRECT)
def test_corpus_correct_modules_are_clean_and_conform(name: str) -> None:
    extraction = extract(target(f"corpus.py:{name}"))
    assert check_text(extraction.text).diagnostics == [], extraction.text
    result = conform(extraction.text, extraction.function(), dims=extraction.bindings,
                     framework="torch", cases=2)
    assert result.ok, result.report()


def _bug_lines() -> dict[str, int]:
    """Each buggy class's `# BUG` line."""
    lines = (DATA / "corpus.py").read_text().splitlines()
    found: dict[str, int] = {}
    current = ""
    for number, line in enumerate(lines, 1):
        if line.startswith("class "):
            current = line.split()[1].split("(")[0]
        if "# BUG" in line and current not in found:
            found[current] = number
    return found


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CORPUS_BUGS))
def test_corpus_bugs_are_flagged_at_their_line(name: str) -> None:
    results = check(target(f"corpus.py:{name}"))
    found = [(d.code, d.span.line) for r in results for d in r.diagnostics]
    assert found == [(CORPUS_BUGS[name], _bug_lines()[name])]


def test_jaxtyping_annotations_name_the_dims() -> None:
    extraction = extract(target("corpus.py:Annotated"))
    assert "input x: [batch, seq, d_model]" in extraction.text
    assert check_text(extraction.text).ok


def test_report_of_a_python_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.md"
    with pytest.raises(SystemExit) as done:
        main(["report", target("karpathy_scale.py:Head"), "-o", str(out)])
    assert done.value.code == 0
    text = out.read_text()
    assert "karpathy_scale.py:22" in text and "SC404" in text


def test_a_python_file_alone_says_how_to_name_a_module(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["verify", str(DATA / "nanogpt.py")])
    assert done.value.code == 2
    assert "nanogpt.py:ClassName" in capsys.readouterr().out


def test_a_folder_checks_its_configured_modules(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "model.py").write_text((DATA / "vit_merge.py").read_text())
    (tmp_path / "spec.attn").write_text("dim N\ninput X: [N]\noutput Y = X * 2\n")
    (tmp_path / "pyproject.toml").write_text('[tool.shapecheck]\nmodules = ["model.py:Attention"]\n')
    with pytest.raises(SystemExit):
        main(["verify", str(tmp_path), "--format", "json"])
    document = json.loads(capsys.readouterr().out)
    assert document["summary"]["files"] == 2
    assert [d["code"] for f in document["files"] for d in f["diagnostics"]] == ["SC411"]


MEANING_BUGS = {"padding_on_queries": "PaddingOnQueries", "rotary_on_v": "RotaryOnV",
                "cached_values_reversed": "CachedValuesReversed"}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MEANING_BUGS))
def test_bugs_the_meaning_pass_flags_at_their_line(name: str) -> None:
    results = check(target(f"corpus.py:{name}"))
    found = [d.span.line for r in results for d in r.diagnostics]
    assert found == [_bug_lines()[MEANING_BUGS[name]]]


@pytest.mark.slow
def test_a_rotary_helper_that_drops_the_rotated_key_is_flagged_at_its_call() -> None:
    # SC418 is at the helper's line that rotates Q; a note points at the call that drops K
    results = check(target("corpus.py:rotary_query_only"))
    found = [(d.code, [n.span.line for n in d.notes if n.span is not None])
             for r in results for d in r.diagnostics]
    assert len(found) == 1 and found[0][0] == "SC418"
    assert _bug_lines()["RotaryQueryOnly"] in found[0][1]


@pytest.mark.slow
def test_a_softmax_helper_given_the_wrong_axis_is_flagged_at_its_call() -> None:
    # SC402 is at `weights @ v`, its softmax note inside the helper; a note points at the
    # call that passes the axis (ESM's `utils_softmax(attn_weights, dim=-1)`, issue 31)
    results = check(target("corpus.py:softmax_helper_over_queries"))
    found = [(d.code, [n.span.line for n in d.notes if n.span is not None])
             for r in results for d in r.diagnostics]
    assert len(found) == 1 and found[0][0] == "SC402"
    assert _bug_lines()["SoftmaxHelperOverQueries"] in found[0][1]


def test_extract_of_untraceable_code_and_bad_init(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["extract", target("odd.py:Branchy")])
    assert done.value.code == 1
    assert "odd.py:15: error[SC601]" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        main(["extract", target("nanogpt.py:CausalSelfAttention"), "--init", "n_head=-3"])
    assert done.value.code == 2
    with pytest.raises(SystemExit) as done:
        main(["extract", target("nanogpt.py:CausalSelfAttention"), "--init", "heads=4"])
    assert done.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_an_ambiguous_scale_prefers_the_contracted_width_and_says_so() -> None:
    # the factory's heads and head width coincide (8): traced again apart, nothing ambiguous
    apart = extract(target("corpus.py:square_heads")).text
    assert "traced again at sizes that do not" in apart and "/ sqrt(head_dim)" in apart
    assert "has that size too" not in apart
    # a copied module cannot be built apart: the contracted width wins, and the spec says so
    extraction = extract(target("corpus.py:square_heads_copied"))
    assert "merging sizes that are equal at the call can hide a bug" in extraction.text
    assert "/ sqrt(head_dim)" in extraction.text
    assert "# note: the scale 1/sqrt(8) is read as 1/sqrt(head_dim)" in extraction.text
    assert "n_heads has that size too" in extraction.text
    assert check_text(extraction.text).ok
    result = conform(extraction.text, extraction.function(), dims=extraction.bindings,
                     framework="torch", cases=2)
    assert result.ok, result.report()


@pytest.mark.slow
@pytest.mark.parametrize("name, code", [("MaskTransposed", "SC407"), ("MaskInverted", "SC408")])
def test_nanogpt_mask_bugs_on_its_buffer(name: str, code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(DATA))  # `from nanogpt import ...`
    lines = (DATA / "nanogpt_bugs.py").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"class {name}"))
    line = next(i for i in range(start, len(lines)) if "# BUG" in lines[i]) + 1
    results = check(target(f"nanogpt_bugs.py:{name}"))
    assert [(d.code, d.span.line) for r in results for d in r.diagnostics] == [(code, line)]


GATHERS = [  # (target, a lowered form the spec must hold)
    ("gathers.py:embed", "take(wte_weight, ids, axis=0)"),
    ("gathers.py:lookups", "index_select(x, 1, pick)"),
    ("gathers.py:running", "cumsum(y, axis=1)"),
    ("gathers.py:rotary", "view_as_complex("),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, form", GATHERS)
def test_gathers_running_sums_and_complex_numbers_extract_verify_and_conform(
        name: str, form: str) -> None:
    extraction = extract(target(name))
    assert extraction.unknown == []
    assert form in extraction.text, extraction.text
    program = check_text(extraction.text)
    assert [d.code for d in program.diagnostics] == [], extraction.text
    result = conform(extraction.text, extraction.function(), dims=extraction.bindings,
                     framework="torch", cases=3)
    assert result.ok, result.report()


@pytest.mark.slow
def test_each_new_operator_is_lowered() -> None:
    texts = {name: extract(target(name)).text for name, _ in GATHERS}
    lookups, running, rotary = texts["gathers.py:lookups"], texts["gathers.py:running"], \
        texts["gathers.py:rotary"]
    assert "input ids: int[T, S]" in texts["gathers.py:embed"]          # the traced dtype
    # the factory's sizes are its constructor's: Lookups(rows=13, dim=7)
    assert "input ids: int[S]" in lookups and "input x: [B, T, dim_]" in lookups
    assert "rows_: [S, dim_] = take(table, ids, axis=0)" in lookups   # E[ids]
    assert "take_along_axis(chosen, best_1, axis=2)" in lookups       # gather
    assert "minimum(total, y)" in running and "maximum(low, zeros(" in running
    assert "clamp(high, min=-1, max=2)" in running and "clamp(y, max=0.5)" in running
    assert "polar(ones([T, dim__half]), angles)" in rotary           # Rotary(dim=10)
    assert "view_as_real(z * freqs)" in rotary
    assert "z = view_as_complex(" in rotary                            # complex: no annotation


def test_an_init_naming_a_dim_as_itself_states_a_convention_and_renames_nothing() -> None:
    """`--init "setting=setting window inclusive"`: a convention for the argument under its
    own name; a rename would drop the factory's call, and with it the trace at sizes apart
    (docs/torch.md, "The six left"). `setting=W` still renames."""
    from shapecheck.pytorch.front.target import parse_init

    own = parse_init(["setting=setting window inclusive"])
    assert (own.rename, own.stated) == ({}, {"setting": "window inclusive"})
    renamed = parse_init(["setting=W window inclusive"])
    assert (renamed.rename, renamed.stated) == ({"setting": "W"}, {"W": "window inclusive"})
