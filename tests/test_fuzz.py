"""The fuzzer in CI: a fixed set of seeds through every generator and every oracle
(internal errors, hangs, runs of verified specs on every variant, fixes re-checked), and
a resumed run continuing where it stopped. The long runs are ``tools/fuzz.py`` itself."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import fuzz  # noqa: E402

pytestmark = pytest.mark.slow  # the fuzzer: every generator and oracle, a run resumed

INPUTS = 240  # 30 per generator: about 20 s of one core


def test_a_fixed_set_of_seeds_finds_nothing(tmp_path, capsys):
    failures = tmp_path / "failures"
    status = fuzz.main(["--seed", "11", "--count", str(INPUTS), "--cli-every", "0",
                        "--progress", "0", "--failures", str(failures)])
    printed = capsys.readouterr().out
    found = sorted(p.name for p in failures.glob("*.txt")) if failures.exists() else []
    assert status == 0 and not found, printed + "\n".join(
        (failures / name).read_text(encoding="utf-8")[:2000] for name in found[:3])
    for generator in fuzz.GENERATORS:
        assert f"'{generator}': {INPUTS // len(fuzz.GENERATORS)}" in printed, generator


def test_a_run_resumes_where_it_stopped(tmp_path, capsys):
    state = tmp_path / "state.json"
    common = ["--seed", "3", "--cli-every", "0", "--progress", "0", "--state", str(state),
              "--resume", "--failures", str(tmp_path / "failures")]
    assert fuzz.main([*common, "--count", "8"]) == 0
    first = json.loads(state.read_text(encoding="utf-8"))
    assert first["next_index"] == 8 and first["inputs"] == 8
    assert fuzz.main([*common, "--count", "8"]) == 0
    second = json.loads(state.read_text(encoding="utf-8"))
    assert second["next_index"] == 16 and second["inputs"] == 16
    assert sum(second["by_generator"].values()) == 16
    assert "resuming at input 8" in capsys.readouterr().out
