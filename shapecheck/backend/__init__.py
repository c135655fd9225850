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
# Shared by the package's modules: one plan, lowered by each framework's table.
from .plan import Framework, Plan, build, definitions_of, evaluate_shape

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
