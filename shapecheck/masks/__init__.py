"""The mask model: functions of positions, their claims and conventions, proved.

One entry point, :func:`analyse` (program -> :class:`MaskModel`): it reads the functions a
checked program defines (`def`, kept by :mod:`shapecheck.syntax.functions`), the claims
about them (`assert f: causal`), the conventions its declarations state (`keep`/`drop`,
`window inclusive`/`exclusive`) and the `flex_attention` calls that apply them, and asks
:mod:`shapecheck.symbolic.positions` for each proof. docs/language.md §10.
"""

from .model import Finding, MaskFunction, MaskModel, analyse

__all__ = ["Finding", "MaskFunction", "MaskModel", "analyse"]
