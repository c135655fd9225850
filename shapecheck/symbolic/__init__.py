"""Symbolic dims: the only package that imports SymPy.

Dims are SymPy symbols built from the parse tree (positive integers), never from
text. The package is split by job; every name is re-exported here, so
``from shapecheck.symbolic import DimSystem`` is the way in:

- :mod:`.dims`: the ``Dim`` type, construction (``symbol``, ``product``), printing
  in the spec's notation (``to_text``, ``pretty``);
- :mod:`.budget`: the deterministic work budget (``MAX_*``, ``TooComplex``) and SymPy's
  ``expand``, ``cancel``, ``numer_denom`` within it;
- :mod:`.proofs`: :class:`DimSystem`, what the spec declares and the questions the
  checker asks of it (equal, positive, divides), and the report's retraced proofs;
- :mod:`.groebner`: the Gröbner reduction behind proofs over nonlinear constraints;
- :mod:`.counterexamples`: claims, the three-way verdict, the counterexample search,
  the weakest constraint, and candidate bindings (``draw_bindings``);
- :mod:`.builder`: dim expressions from the syntax tree (:class:`DimBuilder`);
- :mod:`.unify`: the :class:`Unifier` of inference;
- :mod:`.guards`: torch's guards read as facts about sizes (the PyTorch front end).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .budget import (
    MAX_BASIS, MAX_BITS, MAX_DEGREE, MAX_EXPONENT, MAX_STEPS, MAX_TERMS, MAX_WORK, Size,
    TooComplex, actual_bits, affordable, bits_of, cancel, estimate, expand, has_denominator,
    numer_denom, too_complex,
)
from .builder import DimBuilder, Resolve
from .counterexamples import (
    DISTINCT_SIZES, REFUTATION_POINTS, SQUARE_SIZE, Claim, Counterexample, Decision, Env, Needed,
    Refutation, draw_bindings,
)
from .dims import (
    ONE, Dim, Verdict, as_int, built_of_positives, exact_quotient, floor_quotient, free_names,
    integer, is_literal_one, is_name, monomial_quotient, pretty, product, radicand, shape_text,
    spaced, symbol, to_text, total,
)
from .proofs import (
    ConstraintOutcome, ConstraintUse, DimChanges, DimInfo, DimSystem, Proof, explain_divides,
    explain_equal, growth, solve_for,
)

if TYPE_CHECKING:
    from .groebner import Basis, Steps, checked_poly, groebner_basis
    from .guards import counted_multiples, literal_multiples, multiples, pins_sizes
    from .positions import SEARCH_SIZE, Outcome, Question, Unsupported
    from .unify import Unifier

# Imported on first use: the modules a plain `verify` never reaches (the PyTorch front end's
# guards, the position questions of the masks pass, inference's unifier, the Gröbner basis of
# constraints that a proof has not needed), each ~0.3-2.3M instructions of every cold start
# (issue 36; docs/design.md, "Performance").
_LAZY = {"pins_sizes": ".guards", "multiples": ".guards", "literal_multiples": ".guards",
         "counted_multiples": ".guards",
         "SEARCH_SIZE": ".positions",
         "Outcome": ".positions", "Question": ".positions", "Unsupported": ".positions",
         "Unifier": ".unify", "Basis": ".groebner", "Steps": ".groebner",
         "checked_poly": ".groebner", "groebner_basis": ".groebner"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(name, name=name)  # (the protocol of getattr and hasattr)
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "DISTINCT_SIZES", "MAX_BASIS", "MAX_BITS", "MAX_DEGREE", "MAX_EXPONENT", "MAX_STEPS",
    "MAX_TERMS", "MAX_WORK", "SEARCH_SIZE", "ONE", "REFUTATION_POINTS", "SQUARE_SIZE", "Basis", "Claim",
    "ConstraintOutcome", "ConstraintUse", "Counterexample", "Decision", "Dim", "DimBuilder",
    "DimChanges", "DimInfo", "DimSystem", "Env", "Needed", "Proof", "Refutation", "Resolve",
    "Outcome", "Question", "Size", "Steps", "Unsupported", "TooComplex", "Unifier", "Verdict", "actual_bits", "affordable", "as_int",
    "bits_of", "built_of_positives", "cancel", "checked_poly", "draw_bindings", "estimate",
    "exact_quotient", "expand", "explain_divides", "explain_equal", "floor_quotient",
    "free_names", "groebner_basis", "pins_sizes", "multiples", "literal_multiples", "counted_multiples", "growth", "has_denominator", "integer", "is_literal_one",
    "is_name", "monomial_quotient", "numer_denom", "pretty", "product", "radicand",
    "shape_text", "solve_for", "spaced", "symbol", "to_text", "too_complex", "total",
]
