"""Writes shapecheck/syntax/pytorch_names.py: the names PyTorch and NumPy give a meaning of
their own (issue 34). A did-you-mean proposes a spelling only for a misspelling -- a name
these libraries do not have; a real name the spelling table lacks (`x.flatten`, once) means
something else than its look-alike (`x.float`), so it gets no proposal.

Run with the pinned torch installed: ``python tools/pytorch_names.py``;
tests/test_pytorch_spellings.py checks the file matches the installed libraries.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

TARGET = Path(__file__).resolve().parent.parent / "shapecheck" / "syntax" / "pytorch_names.py"


def tables() -> dict[str, list[str]]:
    import numpy as np
    import torch
    import torch.nn.functional as F

    def public(space: object, *, lower: bool = True) -> list[str]:
        return sorted(n for n in dir(space) if not n.startswith("_")
                      and (not lower or n[0].islower()) and callable(getattr(space, n, None)))

    return {"TENSOR_METHODS": sorted(n for n in dir(torch.Tensor) if not n.startswith("_")),
            "TORCH_FUNCTIONS": public(torch), "F_FUNCTIONS": public(F),
            "NUMPY_FUNCTIONS": public(np)}


def render() -> str:
    import numpy as np
    import torch

    out = ['"""The names PyTorch and NumPy give a meaning of their own: a look-alike of one of them',
           "is never proposed as a did-you-mean (spellings.py). Written by tools/pytorch_names.py",
           f'from torch {torch.__version__.split("+")[0]} and NumPy {np.__version__}; do not edit."""',
           "", "from __future__ import annotations", ""]
    for name, names in tables().items():
        body = textwrap.fill(", ".join(f'"{n}"' for n in names), 92, initial_indent="    ",
                             subsequent_indent="    ", break_on_hyphens=False)
        out += [f"{name} = frozenset({{", body, "})", ""]
    return "\n".join(out)


if __name__ == "__main__":
    TARGET.write_text(render(), encoding="utf-8")
    print(f"wrote {TARGET}")
