"""The numeric backend: execute a verified spec with NumPy.

This package is the only place that imports NumPy; nothing imports it unless
a spec is run (``shapecheck verify`` stays light)::

    from shapecheck.backend import compile_spec
    attention = compile_spec(Path("examples/single_head.attn"))
    outputs = attention(Q=q, K=k, V=v)          # {"O": array}, dims read from the arrays
"""

from __future__ import annotations

from .compiled import CompiledSpec, RunResult, compile_spec, load
from .arrays import ArrayFile, open_npy, open_npz
from .errors import CheckerBug, InputError, MemoryLimitError, OptionError, RunError, SpecError
# Shared by the package's modules (public inside the package, not part of its API): one
# plan, lowered through each framework's tables.
from .plan import (
    Allocation, Closure, Frame, Framework, Lowered, Plan, PlanBuilder, Statement, Thunk, build,
    definitions_of, evaluate_shape,
)
from .lowering import (
    NODES, ROWS, Call, Implementation, Lowerer, NewArrays, bounded, check_sums, lower_call, made,
    slice_word,
)

__all__ = [
    "ArrayFile",
    "CheckerBug",
    "CompiledSpec",
    "InputError",
    "MemoryLimitError",
    "OptionError",
    "RunError",
    "RunResult",
    "SpecError",
    "compile_spec",
    "definitions_of",
    "load",
    "open_npy",
    "open_npz",
]
