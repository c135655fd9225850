"""Issue 29, the sixth public corpus (tests/data/torch/public6/: gpt-fast, llama2.c,
vit-pytorch's CaiT and MaxViT, PVT v2; each file names its repository, commit, path
and license), called as their models call them: each verifies clean, the spec `extract`
writes conforms to it with no flag (one target per project here, to keep CI short), a
one-edit bug planted in some of them is flagged with its code at its line, and the forms
they taught the front end (forms.py) stay lowered, clean and conforming."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("einops")

from shapecheck.pytorch.front.sourcemap import check  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "torch" / "public6"

CLEAN = [
    "gpt_fast_attention.py:make",        # KVCache `k_out[:, :, input_pos] = k_val` (was SC602)
    "gpt_fast_attention.py:make_gqa",    # repeat_interleave of the cache, SDPA mask slice
    "gpt_fast_attention.py:make_block",
    "llama2c_attention.py:make",         # rotary by unbind/stack, SDPA is_causal
    "llama2c_attention.py:make_manual",  # the -inf triu buffer cut [:, :, :T, :T]
    "llama2c_attention.py:make_gqa",     # repeat_kv by expand/reshape
    "llama2c_attention.py:make_block",
    "cait_attention.py:make",            # talking heads (was SC001 'T *  * 2', false SC402)
    "cait_attention.py:make_class_attention",  # the class token over [cls, patches]
    "cait_attention.py:make_layer_scale",
    "max_vit_attention.py:make",         # [b, x, y, w1, w2, d] windows, embedding bias
    "pvt_v2_attention.py:make_last",     # sr_ratio 1: keys of the map itself
    "pvt_v2_attention.py:make_sr2",      # keys of the map reduced by a strided conv (was SC602)
    "pvt_v2_attention.py:make_linear",   # AdaptiveAvgPool2d(7), a 1x1 conv, GELU (was SC602)
    "pvt_v2_attention.py:make_mlp",      # DWConv: depthwise 3x3 padded conv (was SC602)
]

#: extract and conform, one target per project (each costs seconds of torch work)
CONFORM = [
    "gpt_fast_attention.py:make_gqa",
    "llama2c_attention.py:make_manual",
    "cait_attention.py:make",
    "max_vit_attention.py:make",
    "pvt_v2_attention.py:make_sr2",
    "pvt_v2_attention.py:make_linear",   # the pooling's bins and the DWConv's taps exact
    "pvt_v2_attention.py:make_mlp",
]

BUGS = [
    ("bugs/llama2c_softmax_axis.py:make_manual", "SC402", 162),  # softmax(dim=-2)
    ("bugs/cait_softmax_axis.py:make", "SC402", 102),  # nn.Softmax(dim = -2), read through
    # the talking heads' mix after it (was silent: the mixed maps were no weights)
    ("bugs/cait_scale_width.py:make", "SC404", 98),  # inner_dim ** -0.5, through the mix
    # before the softmax (the scores mixed over the heads are still Q @ K.T)
    ("bugs/pvt_v2_softmax_axis.py:make_sr2", "SC402", 140),  # softmax(dim=-2), over keys
    # the strided conv reduced
    ("bugs/pvt_v2_softmax_axis.py:make_linear", "SC402", 140),  # over keys AdaptiveAvgPool2d
    # pooled to 7 x 7 (was hidden behind the pooling's SC602)
]

FORMS = [
    "forms.py:positions_cache",  # index_put at a vector of positions: index_copy
    "forms.py:hstack_mask",      # torch.hstack: a concat along axis 1
    "forms.py:talking_heads",    # T ** 2 // T written as a power (was SC001); the maps'
    # learned mix is not their sum with the values (was a false SC402)
]


def _found(target: str) -> list[tuple[str, int]]:
    return [(d.code, d.span.line) for r in check(str(DATA / target)) for d in r.diagnostics]


def _command(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    from shapecheck.cli import main

    try:
        main(list(args))
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else 0 if exit.code is None else 1
    else:
        code = 0
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _conforms(target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.attn"
    path = str(DATA / target)
    code, out = _command(capsys, "extract", path, "-o", str(spec))
    assert code == 0, out
    code, out = _command(capsys, "conform", str(spec), path)
    assert code == 0, out
    assert "conforms" in out


@pytest.mark.slow  # a few seconds each: torch.export, a retrace at sizes apart
@pytest.mark.parametrize("target", CLEAN)
def test_public6_module_verifies_clean(target: str) -> None:
    assert _found(target) == []


@pytest.mark.slow
@pytest.mark.parametrize("target", CONFORM)
def test_public6_module_conforms_with_no_flag(target: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    _conforms(target, tmp_path, capsys)


@pytest.mark.slow
@pytest.mark.parametrize(("target", "code", "line"), BUGS)
def test_public6_planted_bug_is_flagged_at_its_line(target: str, code: str, line: int) -> None:
    assert _found(target) == [(code, line)]


@pytest.mark.slow
@pytest.mark.parametrize("target", FORMS)
def test_public6_form_is_lowered_clean_and_conforms(target: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # each was an SC602 (index_put, hstack) or an unparseable spec (SC001) before
    assert _found(target) == []
    _conforms(target, tmp_path, capsys)


@pytest.mark.slow  # extract, verify the spec, conform: ~40 s each
@pytest.mark.parametrize("target", ["max_vit_attention.py:make_block", "max_vit_attention.py:make_grid"])
def test_maxvit_windows_cut_by_einops_are_written_as_multiples_of_the_window(
        target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `(x w1)` with w1=7: einops refuses any other size, and torch's guards together admit
    # only multiples of 7 (none alone does: `T // (T // 7) == 7` holds at 15): the map is
    # `7 * T`, so the spec extract writes verifies (it was SC201 on every `T//7`) and conforms
    spec = tmp_path / "spec.attn"
    path = str(DATA / target)
    code, out = _command(capsys, "extract", path, "-o", str(spec))
    assert code == 0, out
    # the channels are the width its parts' constructors name (`dim=64`; was `4 * heads ** 4`)
    assert "input input_: [B, dim_, 7 * T, 7 * S]" in spec.read_text()
    code, out = _command(capsys, "verify", str(spec))
    assert code == 0 and "error" not in out and "warning" not in out, out
    code, out = _command(capsys, "conform", str(spec), path)
    assert code == 0 and "conforms" in out, out
