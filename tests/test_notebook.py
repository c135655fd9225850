"""The notebook face (docs/notebooks.md): docs/notebook.ipynb executed headless in a real
kernel (nbclient, ipykernel), its outputs read back cell by cell."""

from __future__ import annotations

import os
import subprocess
import sys
from html import unescape
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "docs" / "notebook.ipynb"


def _execute(notebook: Any, folder: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    # The kernel is a child process: it imports this checkout's shapecheck, not an installed one.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    client = nbclient.NotebookClient(notebook, kernel_name="python3", timeout=300,
                                     resources={"metadata": {"path": str(folder)}})
    client.execute()
    return notebook


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The docs notebook, executed once (a strict cell that raises is tagged
    `raises-exception`, so the run goes on): its code cells by tag."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        notebook = _execute(nbformat.read(NOTEBOOK, as_version=4),
                            tmp_path_factory.mktemp("notebook"), monkeypatch)
    return {tag: cell for cell in notebook.cells if cell.cell_type == "code"
            for tag in cell.metadata.get("tags", [])}


def _stdout(cell: Any) -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream"
                   and o.name == "stdout")


def _data(cell: Any, mime: str) -> list[str]:
    return [o.data[mime] for o in cell.outputs
            if o.output_type in ("display_data", "execute_result") and mime in o.data]


def _errors(cell: Any) -> list[Any]:
    return [o for o in cell.outputs if o.output_type == "error"]


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_a_broken_spec_shows_its_diagnostics_as_the_terminal_does_and_succeeds(
        executed: dict[str, Any]) -> None:
    cell = executed["broken"]
    out = _stdout(cell)
    number = cell.execution_count
    # verify's text format, the cell named as IPython names it, lines counted from the spec's
    # first line (the line after %%attn).
    assert f"In[{number}]:6:5: error[SC301]: inner dimensions of `@` differ" in out
    assert "6 | S = Q @ K / sqrt(d)\n  |     ^^^^^" in out
    assert "help: did you mean `Q @ K.T`?" in out
    assert out.rstrip().endswith("Found 1 error and 0 warnings in 1 file.")
    assert not _errors(cell)


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_the_shapes_table_is_html_with_a_text_twin(executed: dict[str, Any]) -> None:
    (table,) = _data(executed["fixed"], "text/html")[:1]
    assert table.startswith('<table class="shapecheck-shapes">')
    assert "<td><code>S</code></td><td><code>[N, N]</code></td>" in table
    (plain,) = _data(executed["fixed"], "text/plain")
    assert plain.splitlines()[0].split() == ["tensor", "shape"]
    assert "S       [N, N]" in plain.splitlines()


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_the_report_is_inline_in_a_sandboxed_frame(executed: dict[str, Any]) -> None:
    broken, fixed = (_data(executed[tag], "text/html")[-1] for tag in ("broken", "fixed"))
    for frame in (broken, fixed):
        assert frame.startswith('<iframe class="shapecheck-report" sandbox srcdoc="')
        assert "<" not in frame[len('<iframe class="shapecheck-report" sandbox srcdoc="'):
                                frame.index('" style=')]  # the page is escaped whole
    assert 'data-verified="false"' in unescape(broken)
    page = unescape(fixed)
    assert 'data-verified="true"' in page and "N=128, d=64" in page
    (markdown,) = _data(executed["fixed"], "text/markdown")
    assert "**✓ verifies**" in markdown


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_a_checked_program_shows_its_card(executed: dict[str, Any]) -> None:
    (card,) = _data(executed["card"], "text/html")
    assert card.startswith('<div class="shapecheck-cards" lang="en">')
    assert '<p class="verdict ok">✓ verifies</p>' in card
    assert '<article class="card" id="card-1"' in card
    assert "<code>P @ V</code>" in card


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_lang_words_the_cell_in_chinese(executed: dict[str, Any]) -> None:
    cell = executed["zh"]
    out = _stdout(cell)
    assert "error[SC301]: `@` 的内维不一致" in out
    assert "help: 你是不是想写 `Q @ K.T`?" in out
    assert _data(cell, "text/plain")[0].split()[:2] == ["张量", "形状"]
    assert not _data(cell, "text/markdown")  # --no-report


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_a_module_defined_in_the_notebook_is_traced_and_reported_at_its_line(
        executed: dict[str, Any]) -> None:
    out = _stdout(executed["module-broken"])
    # The class was defined two cells up; the softmax is line 18 of that cell.
    defined = executed["module-broken"].execution_count - 1
    assert f"In[{defined}]:18:26: warning[SC402]:" in out
    assert "18 |         weights = scores.softmax(dim=-2)" in out
    assert "help: normalise over the keys: `softmax(scores, dim=-1)`" in out
    assert "scores      [B, n_heads, T, T]" in _data(executed["module-broken"], "text/plain")[0]
    fixed = _stdout(executed["module-fixed"])
    assert fixed.strip() == "1 file verified."


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_strict_raises_for_a_notebook_run_as_a_test(executed: dict[str, Any]) -> None:
    (error,) = _errors(executed["strict"])
    assert error.ename == "SpecFailed"
    assert error.evalue == "Found 1 error and 0 warnings in 1 file."
    assert error.traceback == ["SpecFailed: Found 1 error and 0 warnings in 1 file."]


def test_a_strict_notebook_fails_its_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the `raises-exception` tag, the strict cell stops the notebook: a test fails."""
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%load_ext shapecheck"),
        nbformat.v4.new_code_cell("%%attn --strict\ndim N\ninput X: [N, N]\noutput Y = X @ X\n"),
        nbformat.v4.new_code_cell("%%attn --strict\ndim N, d\ninput X: [N, d]\noutput Y = X @ X\n"),
        nbformat.v4.new_code_cell("print('not reached')"),
    ])
    with pytest.raises(nbclient.exceptions.CellExecutionError) as raised:
        _execute(notebook, tmp_path, monkeypatch)
    assert "SpecFailed" in str(raised.value)
    assert _stdout(notebook.cells[1]).strip() == "1 file verified."
    assert not notebook.cells[3].outputs


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_an_importable_target_a_missing_one_and_a_bad_option(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module beside the notebook is traced and framed at its file; one that cannot load is
    a diagnostic (the cell succeeds); a bad option is a usage error (the cell fails)."""
    from test_lsp_python import MODULE, SOFTMAX_LINE

    (tmp_path / "model.py").write_text(MODULE, encoding="utf-8")
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%load_ext shapecheck"),
        nbformat.v4.new_code_cell("%shapecheck no_such_module:make"),
        nbformat.v4.new_code_cell("%%attn -d N=zero\ndim N\n"),
        nbformat.v4.new_code_cell("%shapecheck model.py:Attention"),
    ])
    with pytest.raises(nbclient.exceptions.CellExecutionError):
        _execute(notebook, tmp_path, monkeypatch)
    assert "error[SC603]: cannot check `no_such_module:make`: cannot load" in \
        _stdout(notebook.cells[1])
    assert not _errors(notebook.cells[1])
    # IPython prints a usage error as one line, never a traceback, and the cell fails.
    (shown,) = [o.text for o in notebook.cells[2].outputs if o.output_type == "stream"]
    assert shown == "UsageError: --dim: `N`: the value must be a positive integer, got `zero`\n"
    # The notebook stopped at the bad option; the module beside it, run on its own:
    notebook.cells = [notebook.cells[0], notebook.cells[3]]
    _execute(notebook, tmp_path, monkeypatch)
    assert f"model.py:{SOFTMAX_LINE + 1}:26: warning[SC402]" in _stdout(notebook.cells[1])


def test_nothing_imports_ipython_outside_a_notebook() -> None:
    code = ("import sys, shapecheck\nprogram = shapecheck.check_text('dim N\\ninput X: [N, N]\\n"
            "P = softmax(X, axis=-1)\\noutput O = P @ X\\n')\n"
            "assert 'shapecheck-cards' in program._repr_html_()\n"
            "print(sorted(m for m in ('IPython', 'shapecheck.notebook') if m in sys.modules))")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    assert shown.strip() == "[]"
