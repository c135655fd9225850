"""Axis meaning: which axis is which, followed through the whole formula.

The shape checker sees sizes; this pass sees *axes*. Every axis of every value is an
:class:`Axis` object, and identity is the object: two axes of size ``N`` are two axes.
An axis keeps its identity through `.T`, `transpose`, elementwise operations,
broadcasting, `where`, `dropout`, `repeat`, reductions (the axes that remain),
`split_heads` / `merge_heads` (the token axis), a `reshape` whose axes can be matched
(C order: equal sizes from either end), and `einsum` batch letters. A contraction (`@`,
`einsum`) creates the axes of its result, each remembering the operand axes it comes
from. Where an identity is lost (an opaque reshape) the axis is new and the checks
that would need it stay silent. How each builtin maps axes is the ``axes`` field of
its row in :data:`builtins.BUILTINS`.

The package, by job: :mod:`.follow` follows axis identities through the builtin rows
(one class, ``Follow``); the checks are a module per family -- :mod:`.patterns` (the
attention and its roles; SC402, SC406), :mod:`.masks` (SC407, SC408, SC410, SC412,
SC416), :mod:`.scale` (SC404, SC405), :mod:`.positions` (SC413, SC418), :mod:`.heads` (SC414,
SC415, SC419), :mod:`.views` (SC411); :mod:`.facts` holds what travels with a value and
:mod:`.results` what the pass returns. Why SC407 fired is in :mod:`.masks`.

One entry point, :func:`analyse`, reads the checked :class:`~program.Program` (its
statements, the type of every node, the resolved builtin calls) and returns a
:class:`Meaning`: the attention patterns it found and the diagnostics of the meaning
checks (SC402, SC404-SC419). ``api.check_text`` runs it on every check, so every
format, the report and `run` get its diagnostics; ``Program.meaning`` keeps the result.

**An attention** (:class:`Attention`) is a contraction (`@` or a two-operand `einsum`)
of which one operand, the *weights*, is a softmax (or a softmax written out as
``E / sum(E, axis=a, keepdims=true)``) after any transposes, permutations, reshapes
that keep the axis, `repeat`, `dropout` -- or masks and other changes, which are
reported. By definition the **query axis** is the weights' axis that the contraction
keeps and the **key axis** the one it sums over; the softmax should normalise over
the key axis. The other operand is V. When the query and key axes both come from one
contraction (``S = Q @ K.T`` in any layout or letters), that contraction is the
*scores*, and its operands Q and K. Between the scores and the softmax the pass
collects the scale (scalar factors, also those applied to Q or K before the product),
the biases (tensors added) and the masks (`where` with a bool condition, or an added
``where(mask, 0, -inf)``). See :class:`Attention` for the fields and docs/language.md
("Axis meaning") for what is checked and what stays silent.
"""

from __future__ import annotations

from ..check.program import Program
from .facts import Axis
from .follow import Follow
from .heads import HeadChecks
from .masks import MaskChecks
from .patterns import Patterns
from .positions import PositionChecks
from .results import Attention, Bias, Mask, Meaning, Role, Scale, ScaleFactor, SoftCap
from .scale import ScaleChecks
from .views import ViewChecks

# Shared by the package's modules (the facts that travel with a value, and the checks'
# common helpers): public inside the package, not part of its API. A name with a
# leading `_` is used by its own module only.
from .facts import (
    add_power, Applied, base_of, BiasTerm, BLOCKS, Causal, children, CONSTANTS, Contraction,
    einsum_keys, einsum_size, Factor, FLIPPED, index_of, Info, LEAKS, MAX_SCALAR_DEPTH,
    MAX_VIEW_AXES, MIRRORED, monomial_text, Norm, number_text, OPAQUE, POWERS, Product,
    Reduced, SCALAR, Scalar, scalar_power, scalar_sum, SQUASHING, TABLE_NAME, TRUTH, UNKNOWN,
)
from .masks import reordered


class _Analysis(Follow, Patterns, MaskChecks, ScaleChecks, PositionChecks, HeadChecks,
                ViewChecks):
    """The pass: following the axes (``Follow``) with every family of checks."""


def analyse(program: Program) -> Meaning:
    """Follow every axis through ``program``; find the attention patterns; check them."""
    return _Analysis(program).run()


#: Stepping through a program (:mod:`shapecheck.incremental`); :func:`analyse` runs it whole.
Pass = _Analysis


__all__ = [
    "Attention", "Axis", "Bias", "Mask", "Meaning", "Pass", "Role", "Scale", "ScaleFactor",
    "SoftCap",
    "analyse",
    # shared by the package's modules (the import block above)
    "add_power", "Applied", "base_of", "BiasTerm", "BLOCKS", "Causal", "children", "CONSTANTS",
    "Contraction", "einsum_keys", "einsum_size", "Factor", "FLIPPED", "index_of", "Info",
    "LEAKS", "MAX_SCALAR_DEPTH", "MAX_VIEW_AXES", "MIRRORED", "monomial_text", "Norm",
    "number_text", "OPAQUE", "POWERS", "Product", "Reduced", "reordered", "SCALAR", "Scalar",
    "scalar_power", "scalar_sum", "SQUASHING", "TABLE_NAME", "TRUTH", "UNKNOWN",
]
