"""The language server on Python files: a target traced in a worker on save (docs/editors.md).

A ``.py`` file that holds a configured target (``[tool.shapecheck] modules``) or one the
client names (``initializationOptions.targets``) is traced when it is opened and each time it
is saved — never on a keystroke: a trace runs the module and ``torch.export``, and the file on
disk is what it imports. The trace is :func:`shapecheck.pytorch.front.sourcemap.traced`, the
one ``verify model.py:make`` runs, so the editor and the command line say the same thing at
the same lines.

It runs in a worker process, never in the server: ``.attn`` documents are checked while a
trace runs, as fast as without one. Workers fork from one server process that imported torch
once (multiprocessing's *forkserver*, preloaded with a warm-up trace:
``pytorch/front/warm.py``), so a trace starts in milliseconds with a fresh import of the
user's module and costs one export, and a newer save cancels the trace in flight by
ending its process. Where there is no fork (Windows), each worker is spawned and imports
torch itself.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ..messages import codes
from ..messages.diagnostics import Diagnostic, Edit, Fix, Span

# What the worker server imports once, before any trace: a trace of a small module, so that
# torch and everything a trace loads on first use are in each worker it forks.
PRELOAD = ["shapecheck.pytorch.front.warm"]


@dataclass(frozen=True)
class Request:
    """One file's targets to trace, with the bindings (``verify``'s for a Python target: none)
    and the codes its configuration turns off."""

    path: str  # absolute
    targets: tuple[tuple[str, tuple[str, ...]], ...]  # (TARGET, its --init items)
    bindings: Mapping[str, int] = field(default_factory=dict)
    ignore: frozenset[str] = frozenset()


@dataclass
class Outcome:
    """What a trace found: the diagnostics of each Python file, the text they point into,
    and the traced shapes of each line."""

    path: str
    diagnostics: dict[str, list[Diagnostic]] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    shapes: dict[tuple[str, int], list[tuple[str, str]]] = field(default_factory=dict)

    def at(self, path: str, line: int) -> tuple[list[tuple[str, str]], list[Diagnostic]]:
        """The traced shapes and the diagnostics of one line of ``path``."""
        return (self.shapes.get((path, line), []),
                [d for d in self.diagnostics.get(path, []) if d.span.line <= line <= d.span.end_line])


# --- in the worker --------------------------------------------------------------------------


def trace(request: Request) -> Outcome:
    """Trace each target of the file (in this process: the worker calls it); the quick fixes
    come after, verified (:func:`verified`)."""
    from ..pytorch.front.sourcemap import traced

    outcome = Outcome(request.path, {request.path: []})
    for target, init in request.targets:
        try:
            found = traced(target, init, request.bindings, request.ignore)
        except Exception as error:  # a bug in shapecheck: this target's diagnostic
            described = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            outcome.diagnostics[request.path].append(codes.INTERNAL.diag(
                Span(1, 1, 1, 1), path=request.path, error=described))
            continue
        for result in found.results:
            path = str(Path(result.path).resolve())  # shown relative to the worker's folder
            if result.source is None and path != request.path:
                continue  # a file the editor cannot open (an installed library's)
            outcome.diagnostics.setdefault(path, []).extend(result.diagnostics)
            if result.source is not None:
                outcome.texts[path] = result.source
        outcome.shapes.update(found.shapes)
    return outcome


def verified(request: Request, outcome: Outcome) -> Outcome | None:
    """The outcome with the quick fixes that are right: each candidate edit is applied to a
    copy of the file, the copy traced again, and the fix kept only if the diagnostic is gone
    and no error came (as ``passes/fixcheck.py`` does for specs). None: no candidate."""
    text = outcome.texts.get(request.path)
    if text is None:
        return None
    candidates = [(index, fix) for index, d in enumerate(outcome.diagnostics[request.path])
                  if (fix := candidate(d, text)) is not None]
    if not candidates:
        return None
    fixed = list(outcome.diagnostics[request.path])
    for index, fix in candidates:
        if _fixes(request, text, fix, fixed[index]):
            diagnostic = fixed[index]
            helps = diagnostic.help if fix.help in diagnostic.help else (*diagnostic.help, fix.help)
            fixed[index] = replace(diagnostic, help=helps, fixes=(fix,))
    return replace(outcome, diagnostics={**outcome.diagnostics, request.path: fixed})


def _fixes(request: Request, text: str, fix: Fix, diagnostic: Diagnostic) -> bool:
    import tempfile

    from ..messages.fixes import apply_edits

    original = Path(request.path)
    sys.path.insert(0, str(original.parent))  # the copy imports its neighbours as the file does
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / original.name
        copy.write_text(apply_edits(text, fix.edits), encoding="utf-8")
        retraced = trace(Request(str(copy.resolve()), tuple(
            (f"{copy.resolve()}:{target.rpartition(':')[2]}", init)
            for target, init in request.targets), request.bindings, request.ignore))
    found = retraced.diagnostics.get(str(copy.resolve()), [])
    return not any(d.is_error or (d.code == diagnostic.code and d.span.line == diagnostic.span.line)
                   for d in found)


def _work(request: Request, writer: Connection) -> None:
    """A worker's life: the trace, its outcome sent back at once; then the quick fixes
    verified, and the outcome with them; then exit."""
    # The server speaks LSP on standard output: whatever the module or torch prints must not
    # land in that stream.
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    outcome = trace(request)
    writer.send(outcome)
    with_fixes = verified(request, outcome)
    if with_fixes is not None:
        writer.send(with_fixes)
    writer.close()


# --- the source edits a quick fix offers -------------------------------------------------------


def candidate(diagnostic: Diagnostic, source: str) -> Fix | None:
    """The source edit a Python diagnostic's help names, where it is plainly that line's (to
    be verified): a softmax over the queries (SC402) -> `dim=-1`; weights transposed before
    they read the values (SC402) -> the `.transpose(-2, -1)` removed; a product of two
    operands of one layout that torch cannot trace (SC601, `q @ k`) -> `q @ k.transpose(-2,
    -1)`."""
    lines = source.splitlines()
    line = diagnostic.span.line
    if not 0 < line <= len(lines):
        return None
    text = lines[line - 1].split("#")[0]
    if diagnostic.code == "SC402" and diagnostic.help:
        edit = _only(_SOFTMAX_DIM, text, line, "-1", lambda m: m.group(1) != "-1") \
            or _only(_TRANSPOSED_WEIGHTS, text, line, "", lambda m: True)
        return None if edit is None else Fix(diagnostic.help[0], (edit,), safe=False)
    if diagnostic.code == "SC601":
        found = list(_PRODUCT.finditer(text))
        if len(found) != 1:
            return None
        match = found[0]
        product = f"{match.group(1)} @ {match.group(2)}.transpose(-2, -1)"
        at = match.end(2) + 1
        return Fix(codes.TORCH_HELPS["transposed_product"].format(product=product),
                   (Edit(Span(line, at, line, at), ".transpose(-2, -1)"),), safe=False)
    return None


def _only(pattern: re.Pattern[str], text: str, line: int, replacement: str,
          wanted: Callable[[re.Match[str]], bool]) -> Edit | None:
    """The edit of group 1 of the one match of ``pattern`` on the line (None: not one)."""
    found = list(pattern.finditer(text))
    if len(found) != 1 or not wanted(found[0]):
        return None
    start, end = found[0].span(1)
    return Edit(Span(line, start + 1, line, end + 1), replacement)


# `softmax(dim=-2)`, `F.softmax(scores, dim=1)`, `torch.softmax(x, dim = 0)`: the int.
_SOFTMAX_DIM = re.compile(r"softmax\([^()]*?\bdim\s*=\s*(-?\d+)")
# `weights.transpose(-2, -1) @ v`: the transpose.
_TRANSPOSED_WEIGHTS = re.compile(r"\w(\.transpose\(\s*-(?:2\s*,\s*-1|1\s*,\s*-2)\s*\))\s*@")
# `q @ k` with both operands plain names (`k` not already transposed or called).
_PRODUCT = re.compile(r"\b([A-Za-z_]\w*)\s*@\s*([A-Za-z_]\w*)\b(?!\s*[.(\[])")


# --- in the server ------------------------------------------------------------------------------


def _start(process: Any, writer: Connection) -> None:
    process.start()
    writer.close()  # the worker holds its end; the server's copy would keep the pipe open


def _context() -> Any:
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        return context
    return multiprocessing.get_context("spawn")


class Tracer:
    """The traces in flight, one per file: a newer request for a file cancels its trace."""

    def __init__(self, publish: Callable[[Outcome], None]) -> None:
        self.publish = publish
        self.context = _context()
        self.running: dict[str, tuple[Any, Connection]] = {}
        self.latest: dict[str, Outcome] = {}
        self.fresh: dict[str, bool] = {}  # whose next outcome is a new trace's (published)

    def request(self, request: Request, loop: Any) -> None:
        """Trace in a worker; a trace of the same file in flight is cancelled."""
        self.cancel(request.path, loop)
        reader, writer = self.context.Pipe(duplex=False)
        process = self.context.Process(target=_work, args=(request, writer), daemon=True)
        self.running[request.path] = (process, reader)
        self.fresh[request.path] = True
        # Starting waits for the worker server, which may still be importing torch: off the
        # server's loop, which goes on answering.
        started = loop.run_in_executor(None, _start, process, writer)
        started.add_done_callback(
            lambda future: self._started(request.path, process, reader, loop, future))

    def _started(self, path: str, process: Any, reader: Connection, loop: Any,
                 future: Any) -> None:
        if future.exception() is not None or self.running.get(path, (None,))[0] is not process:
            if process.pid is not None:  # cancelled while it started
                process.terminate()
            reader.close()
            if self.running.get(path, (None,))[0] is process:
                del self.running[path]
            return
        loop.add_reader(reader.fileno(), self._readable, path, process, reader, loop)

    def cancel(self, path: str, loop: Any) -> None:
        running = self.running.pop(path, None)
        if running is None:
            return
        process, reader = running
        if process.pid is None:
            return  # still starting: _started ends it
        loop.remove_reader(reader.fileno())
        reader.close()
        process.terminate()

    def _readable(self, path: str, process: Any, reader: Connection, loop: Any) -> None:
        """A message from a worker: its outcome (published), the outcome with verified
        fixes (kept for code actions), or its end."""
        try:
            outcome = reader.recv()
        except Exception:  # it ended (done, cancelled, or a crash in torch)
            outcome = None
        current = self.running.get(path, (None,))[0] is process
        if outcome is None or not current:
            loop.remove_reader(reader.fileno())
            reader.close()
            multiprocessing.active_children()  # reaps the finished workers
            if current:
                del self.running[path]
            return
        first = self.fresh.pop(path, False)  # the trace's; the next one adds the fixes
        self.latest[path] = outcome
        if first:
            self.publish(outcome)


def targets_of(path: Path, configured: Sequence[tuple[str, tuple[str, ...]]],
               named: Sequence[str], root: Path | None) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The targets in ``path``: the configuration's, then those the client names (``FILE:NAME``,
    FILE relative to the workspace root)."""
    found = list(configured)
    wanted = path.resolve()
    for target in named:
        file, _, name = target.rpartition(":")
        if not file.endswith(".py") or not name:
            continue
        resolved = (root / file).resolve() if root is not None else Path(file).resolve()
        if resolved == wanted and (f"{wanted}:{name}", ()) not in found:
            found.append((f"{wanted}:{name}", ()))
    return tuple(found)
