"""Conformance in a test suite: assert that an implementation computes what a spec says.

::

    from shapecheck.testing import assert_conforms

    def test_attention_matches_the_spec():
        assert_conforms("specs/multi_head.attn", attention)             # NumPy or PyTorch
        assert_conforms("specs/multi_head.attn", attention_torch,
                        names={"H": "num_heads"}, layouts={"W_Q": "transpose"})

    def test_bert_matches_the_spec():                   # a real module: its factory, one call
        def bert(D, H):
            return BertSelfAttention(BertConfig(hidden_size=D, num_attention_heads=H))
        assert_conforms("specs/bert.attn", bert, names={"X": "hidden_states",
                        "keep": "attention_mask"}, masks={"keep": "additive-min"},
                        outputs={"O": 0, "P": 1})

The function is called at several admissible bindings of the spec's free dims, with
inputs and params generated from the seed and passed by name; every output is compared
with the spec's own execution (:func:`shapecheck.conform.conform` says how, and what the
options mean). A mismatch fails the test with the output, the smallest failing binding,
the largest absolute and relative errors and the worst index; an exception raised by the
function propagates as itself (with a note naming the binding), so its traceback points
into the function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .conform import (
    DEFAULT_CASES, Conformance, FunctionFailed, Layout, SpecSource, conform, spec_label,
)


def assert_conforms(spec: SpecSource, function: Callable[..., Any], *,
                    dims: Mapping[str, int] | None = None,
                    names: Mapping[str, str] | None = None,
                    layouts: Mapping[str, Layout] | None = None, dtype: str = "float64",
                    cases: int = DEFAULT_CASES, seed: int = 0, rtol: float | None = None,
                    atol: float | None = None, framework: str = "auto", device: str = "cpu",
                    shrink: bool = True, init: Mapping[str, Any] | None = None,
                    args: Mapping[str, Any] | None = None, masks: Mapping[str, str] | None = None,
                    params: Mapping[str, str] | None = None,
                    outputs: Mapping[str, int | str] | None = None,
                    fused: str = "auto") -> Conformance:
    """Fail (``AssertionError``) unless ``function`` computes what ``spec`` says.

    ``spec``: a path, source text or a checked program; a spec that does not verify
    fails too, with its diagnostics. ``function`` may be an ``nn.Module`` class, a factory
    or an instance; ``init``, ``args``, ``masks``, ``params`` and ``outputs`` are the command
    line's ``--init``, ``--arg``, ``--mask``, ``--param`` and ``--output`` (a string value of
    ``init``/``args`` is parsed as there; another value is passed as it is). Returns the :class:`~shapecheck.conform.Conformance`
    (the bindings tried) when it conforms.
    """
    from ..backend import SpecError

    __tracebackhide__ = True  # pytest: show the caller's line, not this one
    try:
        result = conform(spec, function, dims=dims, names=names, layouts=layouts, dtype=dtype,
                         cases=cases, seed=seed, rtol=rtol, atol=atol, framework=framework,
                         device=device, shrink=shrink, init=init, args=args, masks=masks,
                         params=params, outputs=outputs, fused=fused)
    except SpecError as error:
        raise AssertionError(_diagnostics(error, spec_label(spec))) from None
    except FunctionFailed as failed:
        note = getattr(failed.error, "add_note", None)
        if note is not None:
            note(str(failed))
        raise failed.error from None
    if not result.ok:
        raise AssertionError(result.report())
    return result


def _diagnostics(error: Any, path: str) -> str:
    from ..loader import file_result
    from ..formats import render

    text = render([file_result(error.program, path)], "text", color=False, fail_on="error")
    return f"{error}\n{text}"


__all__ = ["assert_conforms"]
