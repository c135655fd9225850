"""Room for the passes to recurse as deep as the parser lets a spec nest.

The parser refuses an expression nested deeper than ``parser.MAX_NESTING`` (SC003), as
CPython's does. Below that, every pass walks the tree recursively, and each spends
several Python frames per level of nesting: the checker five per call
(``value`` → ``_value`` → ``_call`` → ``_resolve_argument`` → ``_arg_tensor``), the NumPy
lowering six, its closures two more when the plan runs, the meaning pass, the report and
the formats theirs. Python's default limit (1000 frames) is spent before 200 levels.

What recurses is counted here, once: :data:`FRAMES_PER_LEVEL` is the most frames any
pass or backend spends on one level (``tests/test_run_verified_specs.py`` runs every command
on specs nested to the limit with every kind of node, so a pass that spends more fails
there, not in a user's hands), and :func:`room` raises the interpreter's limit, for the
duration of a command or an API call, to what the limit needs. It never lowers it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

MAX_NESTING = 200  # brackets and expression depth, as CPython's parser (SC003 above it)
FRAMES_PER_LEVEL = 16
CALLER_FRAMES = 1000  # what the caller had: Python's default limit


def needed(levels: int = MAX_NESTING) -> int:
    """The recursion limit that lets every pass walk ``levels`` levels of nesting."""
    return CALLER_FRAMES + levels * FRAMES_PER_LEVEL


@contextmanager
def room(levels: int = MAX_NESTING) -> Iterator[None]:
    """Run the block with a recursion limit of at least :func:`needed` (restored after)."""
    before = sys.getrecursionlimit()
    if before >= needed(levels):
        yield
        return
    sys.setrecursionlimit(needed(levels))
    try:
        yield
    finally:
        sys.setrecursionlimit(before)
