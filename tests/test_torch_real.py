"""Real modules as their models call them (issue 29): arguments through **kwargs, tuples, a
cache object the module writes into, SDPA with grouped-query heads, slice writes; each
verifies clean and the spec `extract` writes conforms to it with no flag. The transformers
zoo (tools/zoo.py) is the measure: a fixed subset here, the rest marked slow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from shapecheck.pytorch.front import extract, traced_target  # noqa: E402
from shapecheck.pytorch.front.sourcemap import check  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "data" / "torch" / "real.py"
ZOO = ROOT / "tools" / "zoo.py"


def _conforms(target: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`extract` then `conform` with no flag, as a user runs them."""
    spec = tmp_path / "spec.attn"
    run = [sys.executable, "-m", "shapecheck"]
    written = subprocess.run([*run, "extract", target, "-o", str(spec)], capture_output=True,
                             text=True, cwd=ROOT)
    assert written.returncode == 0, written.stderr
    return subprocess.run([*run, "conform", str(spec), target], capture_output=True, text=True,
                          cwd=ROOT)


@pytest.mark.parametrize("name", ["prefill", pytest.param("decode", marks=pytest.mark.slow),
                                  pytest.param("writes", marks=pytest.mark.slow)])
def test_modules_called_as_models_call_them_verify_clean(name: str) -> None:
    results = check(f"{REAL}:{name}")
    assert [d.code for r in results for d in r.diagnostics] == []


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
@pytest.mark.parametrize("name", ["decode", "writes"])
def test_extract_then_conform_needs_no_flag(name: str, tmp_path: Path) -> None:
    done = _conforms(f"{REAL}:{name}", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "conforms" in done.stdout


def test_a_cache_object_is_a_traced_input_and_keeps_the_callers_lengths() -> None:
    text = extract(f"{REAL}:decode").text
    # the cached keys and values share one length (the caller keeps them equal)
    assert "input cache_0: [B, kv_heads, S, head_dim]" in text
    assert "input cache_1: [B, kv_heads, S, head_dim]" in text
    assert "input attention_mask: [B, 1, T, T + S]" in text
    assert "repeat(" in text  # enable_gqa: each kv head serves its group of query heads


def test_slice_writes_and_the_min_dtype_floor_are_lowered() -> None:
    text = extract(f"{REAL}:writes").text
    assert "concat([x, out[:, T:]], axis=1)" in text
    assert "maximum(scores, -3.4028234663852886e+38)" in text


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_a_constructor_taking_a_config_object_is_built_from_its_config_class(
        tmp_path: Path) -> None:
    target = f"{ROOT / 'tests' / 'data' / 'real_modules' / 'nanogpt.py'}:CausalSelfAttention"
    text = extract(target).text
    assert "dim n_embd = n_head * head_dim" in text  # the config's fields are the dims
    assert [d.code for r in check(target) for d in r.diagnostics] == []
    done = _conforms(target, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_traced_target_is_read_back_from_the_header() -> None:
    text = extract(f"{REAL}:writes").text
    assert traced_target(text) == f"{REAL}:writes"
    assert traced_target("# a spec written by hand\n") is None


pytest.importorskip("transformers")
sys.path.insert(0, str(ZOO.parent))
import zoo  # noqa: E402

# The CI subset (the full suite runs it all); the fast tier keeps the quickest.
FAST = ("gpt2__eager",)
CI = [zoo.Case(*name.split("__")) if name in FAST else
      pytest.param(zoo.Case(*name.split("__")), marks=pytest.mark.slow) for name in zoo.CI_CASES]
REST = [case for case in zoo.cases() if case.name not in zoo.CI_CASES]


def _clean_and_conforms(case: zoo.Case) -> None:
    outcome = zoo.check(case, str(ZOO))
    assert outcome.clean, outcome.detail  # clean, or the true finding zoo.EXPECTED names
    assert outcome.conform == "conforms", outcome.conform


@pytest.mark.parametrize("case", CI, ids=lambda c: c.name)
def test_zoo_subset(case: zoo.Case) -> None:
    _clean_and_conforms(case)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["gpt2", "t5", "siglip_vision"])
def test_zoo_whole_models_are_clean(family: str) -> None:
    """`--forms whole`: a decoder, an encoder-decoder (three groups of layers) and a vision
    encoder with an attention-pooling head (nn.MultiheadAttention), every layer checked."""
    outcome = zoo.check(zoo.Case(family, "whole"), str(ZOO))
    assert outcome.verify == "clean", outcome.detail


#: Families beyond the list whose false findings, SC602s or failed conformance were fixed
#: (docs/torch.md, "Issue 29's remaining families"): XLNet's relative shift and its memory,
#: SEW-D's relative span, YOSO's `acos`, MRA's `squeeze()`; and those the harness builds
#: since (X-MOD, MobileBERT, BROS, Donut-Swin, SigLIP 2's and X-CLIP's text towers, CLAP's
#: audio tower).
BEYOND = ("xlnet", "sew-d", "yoso", "mra", "xmod", "mobilebert", "bros", "donut-swin",
          "siglip2", "xclip", "clap")


@pytest.mark.slow
@pytest.mark.parametrize("case", zoo.cases(list(BEYOND)), ids=lambda c: c.name)
def test_zoo_families_beyond_the_list(case: zoo.Case) -> None:
    _clean_and_conforms(case)


# What the zoo does not pass yet, by family, with the cause (docs/torch.md, "The
# transformers zoo"): a strict xfail, so that a fix shows as a pass to move out of here.
KNOWN = {
    "longformer": "torch.export cannot trace its sliding-window chunking (SC601)",
}
KNOWN_CASES: set[str] = set()  # forms of a known family that pass


def _expected(case: zoo.Case) -> object:
    family = case.name.split("__")[0]
    if family in KNOWN and case.name not in KNOWN_CASES:
        return pytest.param(case, marks=pytest.mark.xfail(reason=KNOWN[family], strict=True))
    return case


@pytest.mark.slow
@pytest.mark.parametrize("case", [_expected(case) for case in REST], ids=lambda c: c.name)
def test_zoo_rest(case: zoo.Case) -> None:
    _clean_and_conforms(case)
