"""Fused attention through the run path: which patterns fuse, what they skip, what the
report and the memory estimate say, and that the outputs equal the unfused run's."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from shapecheck.api import admissible_bindings, check_path, check_text
from shapecheck.backend import CheckerBug, compile_spec, fused, numpy_backend
from shapecheck.backend.progress import Progress
from shapecheck.backend.reference import reference
from shapecheck.cli import cli
from spec_files import verifying  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
MEMORY_CAP = 64 << 20
SPECS = list(verifying())


def _build(program, **options):
    return numpy_backend.build_plan(program, np.dtype("float64"), **options)


@pytest.mark.slow  # every spec at three bindings; the examples below stay fast
@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT))
                         if isinstance(p, Path) else None)
def test_fused_equals_unfused(path: Path) -> None:
    for checked in admissible_bindings(check_path(path), 3, seed=5):
        unfused = _build(checked, fuse=False)
        if unfused.peak_bytes > MEMORY_CAP:
            continue
        inputs = reference(checked, "float64", 6).inputs
        plain = unfused.execute(dict(inputs), check_invariants=True)
        fast = _build(checked).execute(dict(inputs), check_invariants=True)
        for name in checked.outputs:
            np.testing.assert_allclose(fast.values[name], plain.values[name], rtol=1e-11,
                                       atol=1e-12, equal_nan=True,
                                       err_msg=f"{path.name}: {name} at {checked.dims.bindings}")
        assert fast.warnings == plain.warnings


def test_every_example_attention_runs_fused_and_skips_its_tables():
    for example in sorted(EXAMPLES.glob("*.attn")):
        (checked,) = admissible_bindings(check_path(example), 1)
        plan = _build(checked)
        assert len(plan.notes) == 1 and ": fused, " in plan.notes[0], example
        steps = {step.name for step in plan.steps}
        assert "P" not in steps and "S" not in steps, example
    (causal,) = admissible_bindings(check_path(EXAMPLES / "causal.attn"), 1)
    assert "mask" not in {step.name for step in _build(causal).steps}  # generated per block


def test_asking_for_the_weights_turns_fusion_off_for_that_pattern():
    source = (EXAMPLES / "single_head.attn").read_text(encoding="utf-8") + "output P\n"
    plan = _build(check_text(source, {"N": 5, "d": 2}))
    assert plan.notes == ("softmax `P` (line 15): not fused: the scores or the weights are "
                          "needed elsewhere (an output, or read again)",)
    plan = _build(check_text(source.replace("output P\n", ""), {"N": 5, "d": 2}),
                  keep_all=True)
    assert plan.notes == ("softmax `P` (line 15): not fused: every intermediate is kept "
                          "(--save-all)",)


def test_the_report_says_what_ran_fused(tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["run", str(EXAMPLES / "causal.attn"), "--dim", "N=40",
                                 "--dim", "d=4", "--dim", "H=2"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert ("  softmax `P` (line 20): fused, 32 query rows at a time; the [2, 40, 40] table is "
            "never built") in result.stdout
    assert "softmax `P` (line 20), fused: every row sums to 1 along axis 2, checked block by " \
           "block" in result.stdout
    assert "5 statement shape(s) match" in result.stdout  # S, Sm, P and mask never computed
    archive = tmp_path / "all.npz"
    result = runner.invoke(cli, ["run", str(EXAMPLES / "causal.attn"), "--dim", "N=4",
                                 "--dim", "d=2", "--dim", "H=2", "--save", str(archive),
                                 "--save-all"], catch_exceptions=False)
    assert "not fused: every intermediate is kept (--save-all)" in result.stdout
    with np.load(archive) as saved:
        assert saved["P"].shape == (2, 4, 4)


def test_the_estimate_follows_the_fused_plan():
    program = check_path(EXAMPLES / "single_head.attn").at({"N": 32768, "d": 64})
    fused_plan = numpy_backend.build_plan(program, np.dtype("float32"))
    unfused_plan = numpy_backend.build_plan(program, np.dtype("float32"), fuse=False)
    assert unfused_plan.peak_bytes > 4 << 30  # the [N, N] table: 4 GiB
    assert fused_plan.peak_bytes < 80 << 20  # inputs, output, the scaled Q, K^T and V with ones
    with pytest.raises(Exception, match="more than --max-memory"):
        compile_spec(EXAMPLES / "single_head.attn", dtype="float32", fused="off",
                     max_memory="1GiB").run({"Q": np.zeros((32768, 64), np.float32),
                                             "K": np.zeros((32768, 64), np.float32),
                                             "V": np.zeros((32768, 64), np.float32)})


def test_a_long_sequence_runs_in_key_blocks_with_little_memory():
    import tracemalloc

    n, d = 4096, 8
    rng = np.random.default_rng(0)
    arrays = {name: rng.standard_normal((n, d)).astype(np.float32) for name in "QKV"}
    spec = compile_spec(EXAMPLES / "single_head.attn", dtype="float32")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = spec.run(arrays, check_invariants=True)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20  # the [N, N] table alone would be 64 MiB
    assert peak <= result.peak_estimate
    q, k, v = (arrays[name].astype(np.float64) for name in "QKV")
    s = q @ k.T / np.sqrt(d)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    expected = p / p.sum(axis=1, keepdims=True) @ v
    np.testing.assert_allclose(result.outputs["O"], expected, rtol=1e-4, atol=1e-5)


def test_a_fully_masked_row_warns_in_the_fused_run_too():
    source = ("dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n"
              "input keep: bool[N, N]\n"
              "output O = softmax(where(keep, Q @ K.T / sqrt(d), -inf)) @ V\n")
    plan = _build(check_text(source, {"N": 3, "d": 2}))
    assert ": fused, " in plan.notes[0]
    keep = np.ones((3, 3), dtype=bool)
    keep[1] = False
    ones = np.ones((3, 2))
    frame = plan.execute({"Q": ones, "K": ones, "V": ones, "keep": keep}, check_invariants=True)
    assert np.isnan(frame.values["O"][1]).all() and not np.isnan(frame.values["O"][0]).any()
    assert frame.warnings == ["`O` (line 6): 1 softmax row(s) are entirely -inf (fully masked) "
                              "and give NaN"]


def test_a_broken_normaliser_is_caught_inside_the_blocks(monkeypatch):
    program = check_path(EXAMPLES / "single_head.attn").at({"N": 6, "d": 2})
    plan = _build(program)
    original = fused._whole

    def halved(kernel, rows, keys, observed):
        observed.rows_checked += 1
        fused._observe(observed, np.full(len(rows), 0.5))
        return original(kernel, rows, keys, observed)

    monkeypatch.setattr(fused, "_whole", halved)
    with pytest.raises(CheckerBug, match=r"softmax `P` \(line 15\): a row sums to 0.5"):
        plan.execute(reference(program, "float64", 0).inputs, check_invariants=True)


def test_progress_reaches_the_end_through_the_blocks():
    program = check_path(EXAMPLES / "single_head.attn").at({"N": 300, "d": 4})
    seen: list[tuple[float, str]] = []
    _build(program).execute(reference(program, "float64", 0).inputs,
                            progress=lambda fraction, label: seen.append((fraction, label)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == pytest.approx(1.0)
    assert {label for _, label in seen} == {"O"}  # the fused pattern is one step


def test_the_progress_bar_waits_draws_and_erases():
    stream = io.StringIO()
    now = [0.0]
    bar = Progress(stream, enabled=True, clock=lambda: now[0])
    bar.update(0.5, "P")
    assert stream.getvalue() == ""  # too early
    now[0] = 3.0
    bar.update(0.5, "P")
    assert "[###############...............]  50% P" in stream.getvalue()
    bar.close()
    assert stream.getvalue().endswith("\r")
    quiet = io.StringIO()
    hidden = Progress(quiet)  # not a terminal
    now[0] = 10.0
    hidden.update(0.9, "P")
    hidden.close()
    assert quiet.getvalue() == ""



_HEAD = ("dim N, M, d\ninput Q: [N, d]\ninput K: [M, d]\ninput V: [M, d]\n"
         "input B: [N, M]\ninput keep: bool[N, M]\n")
VARIANTS = {  # the scores' operations in every order and sign the meaning pass reports
    "bias subtracted": "output O = softmax(Q @ K.T / sqrt(d) - B) @ V\n",
    "bias before the scale": "output O = softmax((Q @ K.T + B) * 0.5) @ V\n",
    "mask before the scale": "output O = softmax(where(keep, Q @ K.T, -inf) / sqrt(d)) @ V\n",
    "finite fill": "output O = softmax(where(keep, Q @ K.T, -1e9) / sqrt(d)) @ V\n",
    "inverted mask": "output O = softmax(where(keep, -inf, Q @ K.T / sqrt(d))) @ V\n",
    "additive mask": "A = where(keep, 0, -1e4)\noutput O = softmax(Q @ K.T / sqrt(d) + A) @ V\n",
    "scale on Q": "output O = softmax((Q / sqrt(d)) @ K.T + B) @ V\n",
    "constant shift": "output O = softmax(Q @ K.T / sqrt(d) - 3.0) @ V\n",
}
NOT_SDPA = {"finite fill"}  # a score replaced by a finite value: no SDPA form computes it


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("blocks", [None, fused.Blocks(32, 16, True)], ids=["rows", "online"])
def test_every_order_of_the_steps_fuses_to_the_same_numbers(name, blocks, monkeypatch) -> None:
    from shapecheck.backend import torch_backend

    program = check_text(_HEAD + VARIANTS[name], {"N": 70, "M": 45, "d": 3})
    inputs = reference(program, "float64", 3).inputs
    inputs["keep"][:, 0] = not name.startswith("inverted")  # no row entirely hidden
    expected = _build(program, fuse=False).execute(dict(inputs)).values["O"]
    if blocks is not None:
        monkeypatch.setattr(fused, "blocks_for", lambda *args, **kwargs: blocks)
    plan = _build(program)
    assert ": fused, " in plan.notes[0], plan.notes
    got = plan.execute(dict(inputs), check_invariants=True).values["O"]
    np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-12)
    sdpa = torch_backend.build_plan(program, "float64")
    assert ("fused into one scaled_dot_product_attention" in sdpa.notes[0]) != (name in NOT_SDPA)
    got = sdpa.execute(dict(inputs), check_invariants=True).values["O"]
    np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-12)
