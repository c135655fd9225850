"""What a module's own helpers document, checked by running them (docs/torch.md,
"Documented helpers"): a `repeat_kv` whose docstring says it is `torch.repeat_interleave`
but that tiles the key/value heads is SC414 at its line, where the meaning pass is silent
(K and V tiled alike is a relabelling of the query heads, docs/language.md)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from shapecheck.pytorch.front import documented  # noqa: E402
from shapecheck.pytorch.front.sourcemap import check  # noqa: E402

DATA = Path(__file__).parent / "data" / "torch" / "documented"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"documented_{name}", DATA / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_helper_is_run_against_the_call_its_docstring_names() -> None:
    assert documented._run(_load("gqa").repeat_kv, 1) is None
    assert documented._run(_load("gqa_tiled").repeat_kv, 1) == (
        [0, 1, 2, 0, 1, 2], [0, 0, 1, 1, 2, 2])
    assert documented._run(_load("gqa").repeat_kv, 7) is None  # an axis it does not have


@pytest.mark.slow
def test_a_repeat_kv_that_tiles_against_its_docstring_is_flagged_at_its_line() -> None:
    assert [d for r in check(f"{DATA / 'gqa.py'}:make") for d in r.diagnostics] == []
    found = [(Path(r.path).name, d.span.line, d.code)
             for r in check(f"{DATA / 'gqa_tiled.py'}:make") for d in r.diagnostics]
    line = next(i for i, text in enumerate((DATA / "gqa_tiled.py").read_text().splitlines(), 1)
                if "hidden_states[:, None, :, :, :]" in text)
    assert found == [("gqa_tiled.py", line, "SC414")]
    (diagnostic,) = [d for r in check(f"{DATA / 'gqa_tiled.py'}:make") for d in r.diagnostics]
    assert diagnostic.help == ("repeat each key/value head in place, as the docstring says: "
                               "`torch.repeat_interleave(x, n_rep, dim=1)`",)
