"""Nothing traced twice when once will do (issue 36 item 4).

`extract` exports a module once; the graph torch.export records is lowered as it is where
it can be, and the functional form (`run_decompositions`, a second pass over the graph)
is asked for only where the graph writes into a tensor, holds an operator without a row,
or slices from the end. Both forms write the same spec (but for unnamed temporaries'
names). A folder of targets is checked in one process: torch imported once, each target
exported once. `second_trace_needed` says where a confirming trace at other sizes is
worth its cost: only where the first trace could not name a dim.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from shapecheck.pytorch import front  # noqa: E402
from shapecheck.pytorch.front.lower import lowers_as_traced  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "torch"


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many exports and second passes `extract` asks torch for."""
    calls = {"export": 0, "run_decompositions": 0}
    export, decompose = torch.export.export, torch.export.ExportedProgram.run_decompositions

    def counted_export(*args, **kwargs):
        calls["export"] += 1
        return export(*args, **kwargs)

    def counted_decompose(self, *args, **kwargs):
        calls["run_decompositions"] += 1
        return decompose(self, *args, **kwargs)

    monkeypatch.setattr(torch.export, "export", counted_export)
    monkeypatch.setattr(torch.export.ExportedProgram, "run_decompositions", counted_decompose)
    return calls


@pytest.mark.slow
def test_nanogpt_is_traced_once_and_lowered_as_recorded(counted):
    extraction = front.extract(f"{DATA / 'nanogpt.py'}:CausalSelfAttention")
    assert counted == {"export": 1, "run_decompositions": 0}
    assert "softmax(" in extraction.text and "causal_mask(T)" in extraction.text
    # Every size of it is a named dim: a diagnostic holds at every size, no second trace.
    assert not front.second_trace_needed(extraction)


@pytest.mark.slow
def test_a_module_that_writes_into_a_tensor_gets_the_functional_form(counted):
    extraction = front.extract(f"{DATA / 'real.py'}:writes")
    assert counted == {"export": 1, "run_decompositions": 1}
    assert extraction.text


def _exported(module, *inputs):
    batch = torch.export.Dim.AUTO
    return torch.export.export(module.eval(), inputs,
                               dynamic_shapes=[{0: batch, 1: batch} for _ in inputs])


class _Sliced(torch.nn.Module):
    def __init__(self, start: int) -> None:
        super().__init__()
        self.start = start

    def forward(self, x):
        return torch.softmax(x[:, self.start:], dim=-1)


def test_a_slice_from_the_end_is_lowered_from_the_functional_form():
    assert lowers_as_traced(_exported(_Sliced(1), torch.randn(3, 9)))
    assert not lowers_as_traced(_exported(_Sliced(-4), torch.randn(3, 9)))


class _Unlowered(torch.nn.Module):
    def forward(self, x):
        return torch.special.erfcx(x) + 1  # an operator without a row


def test_an_operator_without_a_row_gets_the_functional_form():
    assert not lowers_as_traced(_exported(_Unlowered(), torch.randn(3, 5)))


@pytest.mark.slow
def test_both_forms_write_the_same_spec():
    """The two forms of the same trace lowered side by side, on modules of several shapes."""
    from shapecheck.pytorch.front import _dynamic_shapes, _named_forward, _write
    from shapecheck.pytorch.front.target import build

    for target in ("nanogpt.py:CausalSelfAttention", "vit_merge.py:Attention",
                   "karpathy_scale.py:Head", "nanogpt.py:flash"):
        built = build(f"{DATA / target}")
        module = built.module.eval()
        with _named_forward(module, list(built.inputs)):
            recorded = torch.export.export(module, (), dict(built.inputs),
                                           dynamic_shapes=_dynamic_shapes(built), strict=False)
        assert lowers_as_traced(recorded), target
        functional = recorded.run_decompositions({})
        as_recorded = _write(build(f"{DATA / target}"), recorded).text
        assert as_recorded == _write(build(f"{DATA / target}"), functional).text, target


@pytest.mark.slow
def test_a_folder_of_targets_exports_each_once_in_one_process(tmp_path, counted, monkeypatch):
    from shapecheck.cli import main

    for index in range(2):
        (tmp_path / f"model_{index}.py").write_text((DATA / "nanogpt.py").read_text())
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.shapecheck]
        modules = ["model_0.py:CausalSelfAttention", "model_1.py:CausalSelfAttention"]
        """))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as done:
        main(["verify", str(tmp_path)])
    assert done.value.code == 0
    assert counted == {"export": 2, "run_decompositions": 0}


def test_the_language_servers_warm_up_exports_its_module_once(counted, monkeypatch):
    """`front/warm.py`, which the language server's fork server imports (lsp/python.py), traces
    and checks its small attention module with one export and no real run (a run would start
    torch's thread pool in the fork server, and its forked workers would deadlock)."""
    import importlib
    import sys

    ran = []
    monkeypatch.setattr(torch.nn.Module, "__call__",
                        lambda self, *a, **k: ran.append(type(self).__name__))
    monkeypatch.delitem(sys.modules, "shapecheck.pytorch.front.warm", raising=False)
    warm = importlib.import_module("shapecheck.pytorch.front.warm")
    assert counted == {"export": 1, "run_decompositions": 0}
    assert ran == []
    assert issubclass(warm.Attention, torch.nn.Module)
