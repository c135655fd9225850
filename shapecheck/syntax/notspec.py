"""A file that is plainly not a spec (issue 18): one diagnostic, not one per line.

``shapecheck verify README.md`` would otherwise report a syntax error for almost every
line (200 SC001s, then SC004) and errors for the few lines that happen to parse. When
at least :data:`MIN_BROKEN` statements fail to parse and they are at least
:data:`SHARE_BROKEN` of the file's statements, the parse is replaced by one SC008 at
the first broken statement, naming how many failed and the first syntax error; the
file then has no statements, so nothing else is reported about it. A spec with a few
broken statements, even most of a short one, keeps its precise SC001s.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import codes
from . import nodes
from ..messages.diagnostics import MAX_DIAGNOSTICS, Diagnostic
from .parser import ParseResult

MIN_BROKEN = 10
SHARE_BROKEN = 0.8


def judge(parsed: ParseResult) -> ParseResult:
    """``parsed``, or one SC008 in its place when the file is plainly not a spec."""
    total = len(parsed.statements)
    broken = [s for s in parsed.statements if isinstance(s, nodes.Broken)]
    if len(broken) < MIN_BROKEN or len(broken) < SHARE_BROKEN * total:
        return parsed
    first = min((d for d in parsed.diagnostics if d.code == codes.SYNTAX.id),
                key=lambda d: (d.span.line, d.span.column), default=None)
    span = first.span if first is not None else broken[0].span
    detail = first.message if first is not None else ""
    stopped = len(parsed.diagnostics) >= MAX_DIAGNOSTICS  # the parser read no further
    counted = codes.detail("not_a_spec_stopped" if stopped else "not_a_spec_count",
                           broken=len(broken), total=total)
    diagnostic = codes.NOT_A_SPEC.diag(span, counted=counted, line=span.line, first=detail,
                                       help=[codes.help_text("not_a_spec")])
    return ParseResult([], [diagnostic])


def alone(diagnostics: Sequence[Diagnostic]) -> list[Diagnostic]:
    """A file that is not a spec has SC008 and nothing else (not the `# noqa` or invisible
    character warnings its text would get from the passes that read every line)."""
    found = [d for d in diagnostics if d.code == codes.NOT_A_SPEC.id]
    return found or list(diagnostics)
