"""Load and check specs: the first stage of every path that reads one.

load (parse, check, infer, meaning, suppressions) -> bind -> plan -> execute -> report.
The run path (``backend/``), conformance and the language server start here and
only go down from it; :mod:`shapecheck.api` is the face that re-exports these entry
points for users and the CLI. Checking a loaded program again at other bindings is
the checked program's own entry point, :meth:`Program.at <shapecheck.program.Program.at>`
(the same parse, inference and suppressions).
"""

from __future__ import annotations

import codecs
import gc
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .messages import codes, suppress
from . import depth, fileio
from .syntax import nodes, notspec
from .check.checker import Checker
from .config import default_bindings
from .messages.diagnostics import (
    MAX_DIAGNOSTICS, FileResult, InferredNames, Span, line_starts, span_text,
)
from .meaning import analyse
from .options import check_bindings
from .syntax.parser import ParseResult, parse
from .check.program import Inferred, Program
from .symbolic import DimSystem
from .syntax.versions import lower

if TYPE_CHECKING:  # the language server's memo: `verify` never imports it
    from .passes.incremental import Memo


def check_text(text: str, bindings: dict[str, int] | None = None, *,
               warn_unknown_bindings: bool = True, ignore: Collection[str] = (),
               defaults: Mapping[str, int] | None = None, infer: bool | None = None) -> Program:
    """Parse and check a spec given as text.

    ``bindings`` maps dim names to positive integers (as ``--dim``); anything else
    raises :class:`shapecheck.OptionError` (a ``ValueError``) saying which and why.
    ``warn_unknown_bindings=False`` leaves out SC207 (a binding that names no dim
    of this spec), for callers that check several files with one set of bindings.

    ``# noqa`` comments in the text are honoured (:mod:`shapecheck.suppress`);
    ``ignore`` lists further codes not to report (a configuration's selection,
    ``Settings.disabled(path)``). Errors are never suppressed.

    ``defaults`` are default bindings (a configuration's ``[dims]``): each applies
    when the spec declares that dim and ``bindings`` does not bind it (or, in a
    sketch, when inference names it).

    ``infer``: the shapes of undeclared names are inferred in a spec that declares
    nothing (None, the default), in any spec (True), or never (False: each is SC101).
    A spec that declares something keeps its SC101 errors, with the inferred
    declaration in their help. See :mod:`shapecheck.infer`.
    """
    return check_parsed(text, None, bindings, warn_unknown_bindings=warn_unknown_bindings,
                        ignore=ignore, defaults=defaults, infer=infer)


def check_parsed(text: str, parsed: ParseResult | None, bindings: dict[str, int] | None = None,
                 *, warn_unknown_bindings: bool = True, ignore: Collection[str] = (),
                 defaults: Mapping[str, int] | None = None,
                 infer: bool | None = None, memo: Memo | None = None) -> Program:
    """:func:`check_text` on a parse the caller already has (``None``: parse ``text``).

    The language server passes a parse that reuses the statements which did not change,
    and the document's :class:`~shapecheck.incremental.Memo`, which re-checks only the
    statements an edit can change (the result is the same as without it).
    """
    return _check(text, parsed, check_bindings(bindings), warn_unknown_bindings, ignore,
                  defaults, infer, memo=memo, verify_fixes=True)


def _check(text: str, parsed: ParseResult | None, bindings: dict[str, int] | None,
           warn_unknown_bindings: bool, ignore: Collection[str],
           defaults: Mapping[str, int] | None, infer: bool | None, *,
           memo: Memo | None = None, verify_fixes: bool) -> Program:
    """:func:`_check_deep` with room for the passes to recurse as deep as a spec may nest."""
    with depth.room():
        return _check_deep(text, parsed, bindings, warn_unknown_bindings, ignore, defaults,
                           infer, memo=memo, verify_fixes=verify_fixes)


def _check_deep(text: str, parsed: ParseResult | None, bindings: dict[str, int] | None,
                warn_unknown_bindings: bool, ignore: Collection[str],
                defaults: Mapping[str, int] | None, infer: bool | None, *,
                memo: Memo | None = None, verify_fixes: bool) -> Program:
    """Check (bindings already validated); ``verify_fixes``: keep only the suggested
    fixes that re-check clean (:mod:`shapecheck.fixcheck`, which re-checks an edited
    spec through this same function, without verifying its fixes in turn, nor the memo
    of the document)."""
    # The syntax tree and shapes hold no reference cycles worth collecting
    # while we build them; pausing the cyclic GC keeps checking linear in the
    # size of the spec (a full collection walks every live object).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        if parsed is None:
            parsed = parse(text)
        parsed = notspec.judge(parsed)  # a README named by mistake: one SC008
        declared = nodes.declared_dims(parsed.statements)
        given = {**default_bindings(defaults, declared), **(bindings or {})} if defaults \
            else bindings
        if nodes.defines_functions(parsed.statements, text):
            from .syntax.functions import inline  # else never loaded (issue 36)

            inlined, functions, found = inline(parsed.statements, text)
        else:  # nothing to inline: the statements as they are
            inlined, functions, found = parsed.statements, nodes.Functions(), []
        statements, syntax = lower(inlined, parsed.diagnostics + found,
                                   memo.plain if memo is not None else None)

        def check_again(inferred: Inferred | None = None, dims: DimSystem | None = None, *,
                        complete: bool = False) -> Program:
            chosen = given
            if inferred is not None and defaults and dims is None:
                named = {name for name, _ in inferred.dims}
                chosen = {**default_bindings(defaults, declared | named), **(bindings or {})}
            checker = Checker(text, chosen, warn_unknown_bindings, dims=dims, inferred=inferred,
                              complete=complete)
            if memo is not None and inferred is None and dims is None and not complete:
                return memo.run(checker, statements, syntax)
            return checker.run(statements, syntax)

        program = check_again()
        if program.undeclared and infer is not False:
            # Only where something is undeclared: a declared spec never loads inference.
            from .passes.infer import infer as infer_undeclared

            program = infer_undeclared(program, check_again, infer)
        program.infer = infer
        program.functions = functions
        _add_meaning(program, memo)
        _add_masks(program)
        program.diagnostics = suppress.apply(
            program.diagnostics, text, (statement.span for statement in program.statements),
            frozenset(ignore))
        program.diagnostics = notspec.alone(program.diagnostics)
        # Program.at: the same parse, inference and suppressions at other bindings.
        program.recheck = lambda at: check_parsed(
            text, parsed, at, warn_unknown_bindings=warn_unknown_bindings, ignore=ignore,
            defaults=defaults, infer=infer)
        if verify_fixes and any(d.fixes for d in program.diagnostics):
            from .passes import fixcheck  # only a spec with a candidate fix: not at start-up

            program.diagnostics = fixcheck.verified(program, lambda edited: _check(
                edited, None, bindings, warn_unknown_bindings, ignore, defaults, infer,
                verify_fixes=False).diagnostics)
        return program
    finally:
        if was_enabled:
            gc.enable()


def _add_masks(program: Program) -> None:
    """The mask model runs where the spec defines functions of positions or states a
    convention (docs/language.md §10); its diagnostics join the others."""
    stated = any(getattr(s, "conventions", ()) for s in program.statements)
    if (program.functions is None or not program.functions.definitions) and not stated:
        if program.meaning is not None and program.meaning.patterns and any(
                isinstance(s, nodes.TensorDecl) and s.shape.is_bool for s in program.statements):
            from .masks.model import padding_diagnostics

            program.diagnostics = program.diagnostics + padding_diagnostics(program)
        return
    from .masks import analyse as analyse_masks

    program.masks = model = analyse_masks(program)
    # A dim or input read only by a function is used: the checker never saw the function.
    starts = line_starts(text := program.source)
    program.diagnostics = [
        d for d in program.diagnostics if not (
            d.code == codes.UNUSED.id
            and program.functions is not None
            and span_text(text, starts, d.span) in program.functions.mentions)
    ] + model.diagnostics


def _add_meaning(program: Program, memo: Memo | None = None) -> None:
    """The axis-meaning pass runs on every check; its diagnostics join the checker's."""
    program.meaning = meaning = analyse(program) if memo is None else memo.meaning(program)
    room = MAX_DIAGNOSTICS - len(program.diagnostics)
    if meaning.diagnostics and room > 0:
        program.diagnostics = sorted(program.diagnostics + meaning.diagnostics[:room],
                                     key=lambda d: (d.span.line, d.span.column))


def check_bytes(data: bytes, bindings: dict[str, int] | None = None, *,
                warn_unknown_bindings: bool = True, ignore: Collection[str] = (),
                defaults: Mapping[str, int] | None = None, infer: bool | None = None) -> Program:
    """Decode (UTF-8, BOM allowed) and check; undecodable input is a diagnostic."""
    bindings = check_bindings(bindings)
    try:  # utf-8-sig's decoding, without importing its codec (issue 36, the cold start)
        text = (data[3:] if data.startswith(codecs.BOM_UTF8) else data).decode("utf-8")
    except UnicodeDecodeError as error:
        return _undecodable(data, error)
    return check_text(text, bindings, warn_unknown_bindings=warn_unknown_bindings,
                      ignore=ignore, defaults=defaults, infer=infer)


def check_path(path: str | Path, bindings: dict[str, int] | None = None, *,
               warn_unknown_bindings: bool = True, ignore: Collection[str] = (),
               defaults: Mapping[str, int] | None = None, infer: bool | None = None) -> Program:
    """Read and check a file. Raises OSError when the file cannot be read, or is not a
    regular file (a FIFO, a device, a folder: :func:`fileio.read_bytes`)."""
    return check_bytes(fileio.read_bytes(path), bindings,
                       warn_unknown_bindings=warn_unknown_bindings, ignore=ignore,
                       defaults=defaults, infer=infer)


def _undecodable(data: bytes, error: UnicodeDecodeError) -> Program:
    # The position is after the byte order mark removed, as utf-8-sig reports it.
    start = error.start + (len(data) - len(error.object))
    before = data[:start]
    line = before.count(b"\n") + 1
    # In characters, as every other column (`before` is valid UTF-8 up to the error).
    column = len(before[before.rfind(b"\n") + 1:].decode("utf-8", errors="replace")) + 1
    text = data.decode("utf-8", errors="replace")
    diagnostic = codes.ENCODING.diag(Span(line, column, line, column + 1),
                                     byte=data[start], offset=start)
    return Program(source=text, statements=[], dims=DimSystem(), diagnostics=[diagnostic])


def file_result(program: Program, path: str) -> FileResult:
    found = program.inferred
    inferred = InferredNames() if found is None else InferredNames(
        tuple(t.name for t in found.tensors), tuple(name for name, _ in found.dims),
        tuple(found.declarations()))
    return FileResult(path, program.source, list(program.diagnostics), program.shapes(), inferred)


def admissible_bindings(program: Program, count: int, *, seed: int = 0, high: int = 8,
                        attempts: int = 200) -> list[Program]:
    """The spec checked at up to ``count`` distinct admissible bindings of its free dims.

    ``program`` is a spec that verifies, possibly checked at some bindings already (those
    stay). Candidates come from :func:`symbolic.draw_bindings` (every dim a different odd
    size, then every dim the same size, then random sizes in ``1..high``); a candidate is
    admissible when the spec verifies at it with every dim determined, which the checker
    decides (``Program.at``: constraints, divisibility, inequalities). At most ``attempts`` candidates are
    tried, so a spec whose constraints few small sizes satisfy may give fewer than
    ``count``. Each result's ``dims.bindings`` is its binding.
    """
    from .symbolic import draw_bindings

    fixed = dict(program.dims.bindings)
    found: list[Program] = []
    seen: set[tuple[tuple[str, int], ...]] = set()
    for tried, candidate in enumerate(draw_bindings(program.dims, seed=seed, high=high)):
        if len(found) >= count or tried >= attempts:
            break
        bindings = {**fixed, **candidate}
        key = tuple(sorted(bindings.items()))
        if key in seen:
            continue
        seen.add(key)
        checked = program.at(bindings)
        if checked.ok and not checked.dims.unbound() and not checked.dims.determined():
            found.append(checked)
    return found
