"""The cyclic collector in a process that runs one command and ends (issue 36 item 4).

`import torch` leaves ~2,400 modules' objects alive for the rest of the process; every full
collection the export triggers walks all of them again, and so does the collection at the
interpreter's exit. None of them is garbage: :func:`gc.freeze` moves them out of the
collector's sight (the collector still runs, on what is made after). Measured on nanoGPT's
attention (docs/design.md, "**2026-12-07, the collector**"): frozen after `import torch` and
before the exit, a `verify` spends ~25% less CPU (as would any script that froze them: the
benchmark's `--frozen` floors do, and say what is shapecheck's own work).

Only a process the command owns, and that traces a Python target, is frozen: the console
script and ``python -m shapecheck`` (``main()`` reading ``sys.argv``). A spec's `verify` is
not (issue 36 item 1 compares it with a floor that does not freeze). A program or a test
calling ``main(argv)`` keeps its collector as it was: a frozen object is never collected,
which a long-lived caller must decide for itself (the language server does: lsp/server.py).

The first import of shapecheck's pipeline in an owned process runs with the collector paused
(:func:`own_imports`; SymPy, Lark and the symbolic package are imported before, with it
running).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager

_owned = False
_torch_frozen = False


def own_process() -> None:
    """This process runs one command and ends: the command may freeze what it keeps."""
    global _owned
    _owned = True


def owned() -> bool:
    return _owned


def torch_frozen() -> None:
    """``import torch``, then freeze what exists (torch's modules, shapecheck's): in an owned
    process only, only where torch is installed (else the front end says so), and once: a
    folder's second target would otherwise freeze what the first one left, garbage or not."""
    global _torch_frozen
    if not _owned or _torch_frozen:
        return
    from ..pytorch.front import torch_imported

    if not torch_imported():
        return
    gc.freeze()
    _torch_frozen = True


@contextmanager
def own_imports() -> Iterator[None]:
    """The first import of shapecheck's pipeline (the loader: the checker, the meaning pass,
    the parser), in an owned process, with the collector paused: it makes modules, classes and
    records that live to the exit and no garbage, so each young collection it would trigger
    walks only what it has just made (issue 36; docs/design.md). SymPy and Lark are imported
    first with the collector running, as the floor (`import sympy, lark, click`) imports
    them, and so is the symbolic package, SymPy's door: only the rest of shapecheck's own
    imports are spared. The collector is enabled again before the check, with all they made
    counted toward its next collection. A caller of ``main(argv)`` keeps its collector as
    it is."""
    if not _owned or not gc.isenabled() or "shapecheck.loader" in sys.modules:
        yield
        return
    import lark  # noqa: F401  # as the floor imports it: with the collector running

    from .. import symbolic  # noqa: F401  # SymPy's door: SymPy, as the floor imports it

    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def before_exit() -> None:
    """What the command leaves is freed by reference counts at the exit, not walked again by
    the exit's collection: in an owned process that imported torch for a Python target only
    (a spec's `verify` is not frozen: issue 36 item 1 compares it with a floor that does
    not freeze, docs/design.md). In any owned process, the parser the command built is let
    go first (:func:`syntax.parser.release`)."""
    if _owned and _torch_frozen:
        gc.freeze()
    if _owned:
        parser = sys.modules.get("shapecheck.syntax.parser")  # not imported: nothing built
        if parser is not None:
            parser.release()
