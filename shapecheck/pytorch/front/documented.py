"""What a module's own helpers document, checked by running them (docs/torch.md,
"Documented helpers"). One entry point, :func:`findings` (a traced module -> diagnostics at
its Python lines).

Grouped-query attention pairs query heads with key/value heads by a convention the code
alone does not state: K and V tiled alike is the contiguous grouping relabelled, so the
meaning pass is silent on it (docs/language.md, SC414). A helper that *documents* the
convention states it: Hugging Face's and Meta's `repeat_kv` say they are
`torch.repeat_interleave(x, dim=..., repeats=n_rep)` (the checkpoints' grouping). Such a
helper, called by the traced module, is run on a few heads and compared with the call its
docstring names; one that tiles is SC414 at its lines — true of the code, confirmed by
running it.
"""

from __future__ import annotations

import inspect
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...messages import codes
from ...messages.diagnostics import Diagnostic, Note, Span
from .errors import MESSAGES, Location

#: helpers whose docstring states the grouping they make
HELPERS = ("repeat_kv",)
_DOCUMENTED = re.compile(r"torch\.repeat_interleave\(\s*\w+\s*,\s*dim\s*=\s*(\d+)\s*,"
                         r"\s*repeats\s*=\s*\w+\s*\)")
_HEADS = 3


def findings(extraction: Any) -> list[tuple[Location, Diagnostic]]:
    """SC414 for each documented helper of the traced module's own Python module that the
    trace went through and that does not do what its docstring says."""
    python = sys.modules.get(type(extraction.module).__module__)
    found = []
    for name in HELPERS:
        helper = getattr(python, name, None)
        if not inspect.isfunction(helper):
            continue
        documented = _DOCUMENTED.search(inspect.getdoc(helper) or "")
        path, lines = _traced_lines(extraction, helper)
        if documented is None or not lines:
            continue
        outcome = _run(helper, int(documented.group(1)))
        if outcome is None:
            continue
        got, want = outcome
        note = Note(MESSAGES["documented_tiled"].format(
            documented=documented.group(0), heads=list(range(_HEADS)), got=got, want=want))
        diagnostic = codes.TILED_HEADS.diag(Span(1, 1, 1, 1), tiled=f"{name}(x, n_rep)",
                                            kv="num_key_value_heads")
        found.append((Location(path, lines[0]), replace(
            diagnostic, notes=(note,), help=(codes.TORCH_HELPS["SC414 documented"].format(
                axis=documented.group(1)),))))
    return found


def _traced_lines(extraction: Any, helper: Any) -> tuple[str, list[int]]:
    """The helper's file and its lines the trace has statements at (none: this module does
    not call it)."""
    try:
        source, first = inspect.getsourcelines(helper)
        path = str(Path(inspect.getsourcefile(helper) or "").resolve())
    except (OSError, TypeError):
        return "", []
    return path, sorted({location.line for location in extraction.lines.values()
                         if location is not None and location.path == path
                         and first < location.line < first + len(source)})


def _run(helper: Any, axis: int) -> tuple[list[int], list[int]] | None:
    """(what the helper gives, what its documented call gives) for key/value heads 0..2
    along ``axis`` repeated twice, where they differ; None where they agree or it fails."""
    import torch

    shape = [1, 1, 1, 1]
    if not 0 <= axis < len(shape):
        return None
    shape[axis] = _HEADS
    heads = torch.arange(float(_HEADS)).reshape(shape)
    try:
        with torch.no_grad():
            got = helper(heads, 2)
    except Exception:  # the helper's own failure: not this check's to report
        return None
    want = torch.repeat_interleave(heads, repeats=2, dim=axis)
    if not isinstance(got, torch.Tensor) or got.shape == want.shape and torch.equal(got, want):
        return None
    return [int(v) for v in got.flatten().tolist()], [int(v) for v in want.flatten().tolist()]
