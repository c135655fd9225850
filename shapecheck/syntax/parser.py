"""Text -> syntax tree (:mod:`shapecheck.nodes`), with recovery.

The whole file is parsed in one LALR pass with an inline transformer, so no
parse tree is built. Only when that fails is the file split into statements
and each one parsed on its own, so that every broken statement yields exactly
one syntax error and the valid ones are still checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, cast

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from ..messages import codes
from ..records import Record
from . import grammar_cache, nodes
from ..messages.diagnostics import MAX_DIAGNOSTICS, Diagnostic, Span

from ..depth import MAX_NESTING  # brackets and expression depth, as CPython's parser
MAX_INT_DIGITS = 40

_SEPARATOR_TYPES = frozenset({"_SEP"})
_OPEN = frozenset({"LPAR", "LSQB"})
_CLOSE = frozenset({"RPAR", "RSQB"})


class LimitExceeded(Exception):
    """Raised inside the parser when the input passes a safety limit."""

    code = codes.LIMIT

    def __init__(self, message: str, span: Span) -> None:
        super().__init__(message)
        self.message = message
        self.span = span


class GrammarMisuse(LimitExceeded):
    """A mistake the grammar lets through but Python refuses (`f(axis=row, x)`)."""

    code = codes.SYNTAX


def token_span(token: Token) -> Span:
    return Span(token.line or 1, token.column or 1, token.end_line or 1, token.end_column or 1)


# --- grammar -------------------------------------------------------------------


def grammar_text() -> str:
    """The grammar: packaged copy in a wheel, top-level ``grammar/`` in a checkout."""
    # A plain path, not importlib.resources: that costs more start-up time
    # than reading the file, and the package is never imported from a zip.
    packaged = Path(__file__).with_name("attn.lark")
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    source_tree = Path(__file__).resolve().parents[2] / "grammar" / "attn.lark"
    return source_tree.read_text(encoding="utf-8")


class BracketNewlines:
    """Post-lexer: a newline inside ( ) or [ ] does not end a statement.

    It also enforces the nesting limit, and can shift token positions so that a
    statement parsed on its own reports positions in the whole file.
    """

    always_accept = ("_SEP",)

    def __init__(self) -> None:
        self.line_offset = 0
        self.column_offset = 0
        # The last two tokens handed to the parser: on a parse error, the one
        # before the offending token is what the message says "after".
        self.previous: Token | None = None
        self.last: Token | None = None

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        depth = 0
        self.previous = self.last = None
        for token in stream:
            if self.line_offset or self.column_offset:
                self._shift(token)
            kind = token.type
            if kind in _OPEN:
                depth += 1
                if depth > MAX_NESTING:
                    raise LimitExceeded(
                        codes.syntax_text("nesting", limit=MAX_NESTING), token_span(token)
                    )
            elif kind in _CLOSE:
                depth = max(0, depth - 1)
            elif kind == "_SEP" and depth and ";" not in token.value:
                continue
            self.previous, self.last = self.last, token
            yield token

    def _shift(self, token: Token) -> None:
        if token.line == 1:
            token.column = (token.column or 1) + self.column_offset
        if token.end_line == 1:
            token.end_column = (token.end_column or 1) + self.column_offset
        token.line = (token.line or 1) + self.line_offset
        token.end_line = (token.end_line or 1) + self.line_offset


def _depth(*children: Any) -> int:
    return 1 + max((getattr(c, "depth", 0) for c in children), default=0)


def _checked_depth(depth: int, span: Span) -> int:
    if depth > MAX_NESTING:
        raise LimitExceeded(codes.syntax_text("nesting", limit=MAX_NESTING), span)
    return depth


class ToNodes(Transformer):  # type: ignore[type-arg]
    """One method per grammar rule; runs inline while parsing (LALR)."""

    # statements

    def file(self, children: list[Any]) -> list[nodes.Stmt]:
        return [c for c in children if c is not None]

    def dim_free(self, c: list[Any]) -> nodes.DimFree:
        names = tuple(nodes.Ident(str(t), token_span(t)) for t in c[1:])
        return nodes.DimFree(names, token_span(c[0]).to(names[-1].span))

    def dim_convention(self, c: list[Any]) -> nodes.DimFree:
        keyword, name, *words = c
        if str(words[0]) not in DIM_CONVENTIONS:  # `dim A B`: a comma forgotten
            raise GrammarMisuse(codes.syntax_text(
                "expected_after", expected=codes.one_of([_WORDS["COMMA"], _WORDS["EQUAL"]]),
                previous=f"`{name}`",
                found=f"`{words[0]}`"), token_span(words[0]))
        conventions = _conventions(words, DIM_CONVENTIONS)
        return nodes.DimFree((_ident(name),), token_span(keyword).to(conventions[-1].span),
                             conventions)

    def function_def(self, c: list[Any]) -> nodes.FunctionDef:
        keyword, name, _open, *params, _close, body = c
        idents = tuple(_ident(p) for p in params if p is not None)
        return nodes.FunctionDef(_ident(name), idents, body, token_span(keyword).to(body.span))

    def claim(self, c: list[Any]) -> nodes.Claim:
        keyword, name, *rest = c
        items = tuple(x for x in rest if isinstance(x, nodes.ClaimItem))
        lengths = tuple(x for x in rest if x is not None and not isinstance(x, (Token, nodes.ClaimItem)))
        return nodes.Claim(_ident(name), items, token_span(keyword).to(items[-1].span), lengths)

    def claim_item(self, c: list[Any]) -> nodes.ClaimItem:
        word, *rest = c
        args = tuple(x for x in rest if x is not None and not isinstance(x, Token))
        end = token_span(rest[-1]) if rest and isinstance(rest[-1], Token) else token_span(word)
        return nodes.ClaimItem(_ident(word), args, token_span(word).to(end))

    def dim_def(self, c: list[Any]) -> nodes.DimDef:
        keyword, name, value = c
        return nodes.DimDef(_ident(name), value, token_span(keyword).to(value.span))

    def constraint(self, c: list[Any]) -> nodes.Constraint:
        keyword, left, op, right = c
        return nodes.Constraint(left, str(op), right, token_span(keyword).to(right.span))

    def tensor_decl(self, c: list[Any]) -> nodes.TensorDecl:
        kind, name, shape, *words = c
        conventions = _conventions(words, TENSOR_CONVENTIONS)
        end = conventions[-1].span if conventions else shape.span
        return nodes.TensorDecl(str(kind), _ident(name), shape, token_span(kind).to(end),
                                conventions)

    def define(self, c: list[Any]) -> nodes.Define:
        name, annotation, *words, value = c
        conventions = _conventions([w for w in words if w is not None], DEFINE_CONVENTIONS)
        return nodes.Define(_ident(name), annotation, value, token_span(name).to(value.span),
                            conventions)

    def unpack(self, c: list[Any]) -> nodes.Unpack:
        idents = tuple(_ident(t) for t in c if isinstance(t, Token))
        values = [v for v in c if not isinstance(v, Token)]
        value = values[0] if len(values) == 1 else nodes.ListExpr(
            tuple(values), values[0].span.to(values[-1].span), _depth(*values))
        return nodes.Unpack(idents, value, idents[0].span.to(value.span))

    def update(self, c: list[Any]) -> nodes.Write:
        name, open_, *indices, close, value = c
        items = tuple(_new_axis(i) for i in indices)
        bracket = token_span(open_).to(token_span(close))
        return nodes.Write(_ident(name), items, value, token_span(name).to(value.span), bracket)

    def assert_stmt(self, c: list[Any]) -> nodes.Assert:
        keyword, name, shape = c
        return nodes.Assert(_ident(name), shape, token_span(keyword).to(shape.span))

    def output_stmt(self, c: list[Any]) -> nodes.Output:
        keyword, name, annotation, value = c
        end = value.span if value is not None else (annotation.span if annotation else token_span(name))
        return nodes.Output(_ident(name), annotation, value, token_span(keyword).to(end))

    def shape(self, c: list[Any]) -> nodes.Shape:
        typed = isinstance(c[0], Token) and c[0].type in _ELEMENT_TYPES
        is_bool = typed and c[0].type == "BOOL"
        start = c[0] if typed or c[0] is not None else c[1]
        items = tuple(x for x in c if x is not None and not isinstance(x, Token))
        element = _ELEMENT_TYPES[c[0].type] if typed else ""
        return nodes.Shape(items, is_bool, token_span(start).to(token_span(c[-1])), element)

    # expressions

    def binop(self, c: list[Any]) -> nodes.BinOp:
        left, op, right = c
        span = left.span.to(right.span)
        depth = _checked_depth(_depth(left, right), span)
        # `·` and `×` (the study note's signs) are `*`.
        text = "*" if op.type == "STAR" else str(op)
        return nodes.BinOp(text, left, right, span, token_span(op), depth)

    def compare(self, c: list[Any]) -> nodes.BinOp:
        left = c[0]
        if isinstance(left, nodes.BinOp) and left.op in nodes.COMPARISONS:
            # Python would chain `a < b < c` into `a < b and b < c`, which NumPy
            # arrays refuse; the usual cause is `&` binding tighter than `<`.
            raise GrammarMisuse(codes.syntax_text("chained_comparison"), token_span(c[1]))
        return self.binop(c)

    def unary(self, c: list[Any]) -> nodes.Unary:
        op, operand = c
        span = token_span(op).to(operand.span)
        return nodes.Unary(str(op), operand, span, _checked_depth(_depth(operand), span))

    def subscript(self, c: list[Any]) -> nodes.Subscript:
        operand, open_, *indices, close = c
        items = tuple(_new_axis(i) for i in indices)
        bracket = token_span(open_).to(token_span(close))
        span = operand.span.to(bracket)
        depth = _checked_depth(_depth(operand, *items), span)
        return nodes.Subscript(operand, items, span, bracket, depth)

    def slice(self, c: list[Any]) -> nodes.Slice:
        start, colon, stop, second_colon, step = c
        first = start.span if start is not None else token_span(colon)
        last = next((part for part in (step, second_colon, stop) if part is not None), colon)
        end = last.span if not isinstance(last, Token) else token_span(last)
        parts = [p for p in (start, stop, step) if p is not None]
        span = first.to(end)
        return nodes.Slice(start, stop, step, span, _checked_depth(_depth(*parts), span))

    def ellipsis(self, c: list[Any]) -> nodes.EllipsisIndex:
        return nodes.EllipsisIndex(token_span(c[0]))

    def transpose(self, c: list[Any]) -> nodes.Transpose:
        operand, tok = c
        span = operand.span.to(token_span(tok))
        return nodes.Transpose(operand, span, _checked_depth(_depth(operand), span))

    def name(self, c: list[Any]) -> nodes.Name:
        return nodes.Name(str(c[0]), token_span(c[0]))

    def integer(self, c: list[Any]) -> nodes.Integer:
        text = str(c[0])
        if len(text) > MAX_INT_DIGITS:
            raise LimitExceeded(
                codes.syntax_text("literal_too_long", limit=MAX_INT_DIGITS), token_span(c[0])
            )
        return nodes.Integer(int(text), text, token_span(c[0]))

    def decimal(self, c: list[Any]) -> nodes.Decimal:
        return nodes.Decimal(float(c[0]), str(c[0]), token_span(c[0]))

    def inf(self, c: list[Any]) -> nodes.Inf:
        return nodes.Inf(token_span(c[0]))

    def boolean(self, c: list[Any]) -> nodes.Boolean:
        return nodes.Boolean(str(c[0]).lower() == "true", token_span(c[0]))

    def string(self, c: list[Any]) -> nodes.String:
        return nodes.String(str(c[0])[1:-1], token_span(c[0]))

    def axis_name(self, c: list[Any]) -> nodes.AxisName:
        return nodes.AxisName(str(c[0]), token_span(c[0]))

    def paren(self, c: list[Any]) -> nodes.Paren:
        open_, inner, close = c
        span = token_span(open_).to(token_span(close))
        return nodes.Paren(inner, span, _checked_depth(_depth(inner), span))

    def list_expr(self, c: list[Any]) -> nodes.ListExpr:
        items = tuple(x for x in c[1:-1] if x is not None)
        span = token_span(c[0]).to(token_span(c[-1]))
        return nodes.ListExpr(items, span, _checked_depth(_depth(*items), span))

    def keyword(self, c: list[Any]) -> nodes.Keyword:
        name, value = c
        ident = _ident(name)
        return nodes.Keyword(ident, value, ident.span.to(value.span), value.depth)

    def method(self, c: list[Any]) -> nodes.Method:
        receiver, _dot, name, _open, *rest = c
        close = rest[-1]
        inner = [x for x in rest[:-1] if x is not None]
        _positional_after_keyword(inner)
        args = tuple(x for x in inner if not isinstance(x, nodes.Keyword))
        keywords = tuple(x for x in inner if isinstance(x, nodes.Keyword))
        span = receiver.span.to(token_span(close))
        depth = _checked_depth(_depth(receiver, *inner), span)
        return nodes.Method(receiver, _ident(name), args, keywords, span, depth)

    def attribute(self, c: list[Any]) -> nodes.Attribute:
        receiver, _dot, name = c
        span = receiver.span.to(token_span(name))
        return nodes.Attribute(receiver, _ident(name), span, _checked_depth(_depth(receiver), span))

    def call(self, c: list[Any]) -> nodes.Call:
        func, *rest = c
        close = rest[-1]
        inner = [x for x in rest[1:-1] if x is not None]
        _positional_after_keyword(inner)
        args = tuple(x for x in inner if not isinstance(x, nodes.Keyword))
        keywords = tuple(x for x in inner if isinstance(x, nodes.Keyword))
        span = token_span(func).to(token_span(close))
        return nodes.Call(_ident(func), args, keywords, span, _checked_depth(_depth(*inner), span))


# The convention words a declaration may end with (docs/language.md §10.3), each a plain
# name so that none is reserved. A tensor: which value of a mask keeps a key, where a
# cache goes among the keys. A dim: a
# window's width, and whether it counts the key at distance W (`inclusive`) or not.
TENSOR_CONVENTIONS = frozenset({"keep", "drop", "cache_first", "cache_last"})
DIM_CONVENTIONS = frozenset({"window", "inclusive", "exclusive"})
# A definition of relative positions: which way they point.
DEFINE_CONVENTIONS = frozenset({"key_minus_query", "query_minus_key"})


def _conventions(words: list[Token], allowed: frozenset[str]) -> tuple[nodes.Ident, ...]:
    idents = tuple(_ident(word) for word in words)
    for ident in idents:
        if ident.name not in allowed:
            raise GrammarMisuse(codes.syntax_text(
                "convention_word", word=ident.name,
                allowed=", ".join(f"`{word}`" for word in sorted(allowed))), ident.span)
    return idents


def _new_axis(index: Any) -> Any:
    """`None` inside `x[...]` is a new axis, as in NumPy."""
    if isinstance(index, nodes.Name) and index.name == "None":
        return nodes.NewAxis(index.span)
    return index


def _positional_after_keyword(arguments: list[Any]) -> None:
    """As in Python, every positional argument comes before the keywords."""
    seen_keyword = False
    for argument in arguments:
        if isinstance(argument, nodes.Keyword):
            seen_keyword = True
        elif seen_keyword:
            raise GrammarMisuse(codes.syntax_text("positional_after_keyword"), argument.span)


def _ident(token: Token) -> nodes.Ident:
    return nodes.Ident(str(token), token_span(token))


class _Parsers(Record):
    lark: Lark
    postlex: BracketNewlines


def _lark(postlex: BracketNewlines, **options: Any) -> Lark:
    # The analysed grammar is cached on disk per user, as JSON, never as a pickle
    # (grammar_cache: Lark's own cache=True unpickles a file in the shared temp folder).
    return grammar_cache.build(grammar_text(), parser="lalr", lexer="basic", postlex=postlex,
                               **options)


def parser_options(postlex: BracketNewlines) -> dict[str, Any]:
    """The options of the parser every command uses (and its shipped tables were made with)."""
    return dict(parser="lalr", lexer="basic", postlex=postlex, start=["file", "stmt"],
                transformer=ToNodes())


@lru_cache(maxsize=1)
def _parsers() -> _Parsers:
    postlex = BracketNewlines()
    options = parser_options(postlex)
    grammar = grammar_text()
    # The tables shipped with the package (Python literals, no decode), while they are
    # this grammar's; else the per-user cache (grammar_cache says why both are safe).
    from . import grammar_tables

    parser = grammar_cache.from_tables(grammar_tables.KEY, grammar_tables.DATA,
                                       grammar_tables.memo, grammar, grammar_tables.states,
                                       grammar_tables.UNLESS, grammar_tables.PATTERNS,
                                       **options)
    return _Parsers(parser or grammar_cache.build(grammar, **options), postlex)


def release() -> None:
    """Let the parser go (the next ``parse`` builds it again): a process about to exit frees
    its ~1,700 objects (Lark's rules, states and lexer) by their reference counts instead of
    having the exit's collections walk them (issue 36 item 1: ~1.7M instructions of a cold
    `verify`; called by ``cli.collector.before_exit`` in a process the command owns)."""
    _parsers.cache_clear()


def bare_parser() -> Lark:
    """The same grammar without the transformer: the benchmark's baseline."""
    return _lark(BracketNewlines(), start="file")


# --- parsing with recovery -------------------------------------------------------


class ParseResult(Record):
    statements: list[nodes.Stmt]
    diagnostics: list[Diagnostic]


def parse(text: str) -> ParseResult:
    parsers = _parsers()
    parsers.postlex.line_offset = parsers.postlex.column_offset = 0
    try:
        # The inline transformer makes Lark return our nodes, not a Tree.
        statements = cast(list[nodes.Stmt], parsers.lark.parse(text, start="file"))
        return ParseResult(statements, [])
    except (UnexpectedInput, LimitExceeded, RecursionError):
        return _parse_statements(text, parsers)


def _parse_statements(text: str, parsers: _Parsers) -> ParseResult:
    statements: list[nodes.Stmt] = []
    diagnostics: list[Diagnostic] = []
    for chunk in split_statements(text):
        statement, problem = parse_chunk(chunk)
        statements.append(statement)
        if problem is not None:
            diagnostics.append(problem)
            if len(diagnostics) >= MAX_DIAGNOSTICS:  # the checker stops there too
                break
    return ParseResult(statements, diagnostics)


def parse_chunk(chunk: Chunk) -> tuple[nodes.Stmt, Diagnostic | None]:
    """One statement on its own, with whole-file positions: the statement, or a
    ``Broken`` node and its syntax error. (Recovery parses this way; so does the
    language server, which reuses the statements that did not change.)"""
    parsers = _parsers()
    parsers.postlex.line_offset = chunk.line - 1
    parsers.postlex.column_offset = chunk.column - 1
    problem: Diagnostic
    try:
        return cast(nodes.Stmt, parsers.lark.parse(chunk.text, start="stmt")), None
    except LimitExceeded as exc:
        problem = exc.code.diag(exc.span, detail=exc.message)
    except (UnexpectedInput, RecursionError) as exc:
        problem = _syntax_diagnostic(exc, chunk, parsers.postlex)
    finally:
        parsers.postlex.line_offset = parsers.postlex.column_offset = 0
    return nodes.Broken(chunk.defines, chunk.is_dim, chunk.span, _mentions(chunk.text)), problem


# --- splitting into statements ---------------------------------------------------------

_STRING = r'"[^"\n]*"?|\'[^\'\n]*\'?'


@cache  # compiled on first use: most runs never need it (issue 36)
def _scan() -> re.Pattern[str]:
    return re.compile(r'#[^\n]*|' + _STRING + r'|[()\[\];\n]')


_NAME_PATTERN = r"[^\W\d]\w*"  # as the grammar's NAME: a letter or `_`, then letters, digits, `_`


# `NAME:` starts a statement only before a shape (`S: [N, N] = ...`): a line of a
# subscript split over lines may start with `h:]`.
@cache  # compiled on first use: most runs never need it (issue 36)
def _statement_start() -> re.Pattern[str]:
    return re.compile(
        r"(dim|constraint|input|param|output|assert)\b|"
        + _NAME_PATTERN + r"\s*(:\s*(\[|bool\b)|=(?!=))"
    )


@cache  # compiled on first use: most runs never need it (issue 36)
def _defines() -> re.Pattern[str]:
    return re.compile(
        r"(?:output|input|param|assert)?\s*(" + _NAME_PATTERN + r")\s*(?::|=(?!=))")


@cache  # compiled on first use: most runs never need it (issue 36)
def _name() -> re.Pattern[str]:
    return re.compile(_NAME_PATTERN)


class Chunk(Record, frozen=True):
    text: str
    line: int
    column: int
    span: Span
    defines: tuple[str, ...]
    is_dim: bool


def split_statements(text: str) -> Iterator[Chunk]:
    """Statement boundaries the way the grammar sees them, without parsing.

    A newline inside brackets continues the statement, unless the next line
    starts at column 1 with something that looks like a new statement: then
    the bracket was most likely never closed.
    """
    start = 0
    depth = 0
    lines = _LineCounter(text)
    for match in _scan().finditer(text):
        token = match.group()
        if token in "([":
            depth += 1
        elif token in ")]":
            depth = max(0, depth - 1)
        elif token == ";" or token == "\n":
            if depth and token == "\n" and not _statement_start().match(text, match.end()):
                continue
            depth = 0
            yield from _chunk(text, start, match.start(), lines)
            start = match.end()
    yield from _chunk(text, start, len(text), lines)


class _LineCounter:
    """The line of an offset, counted on from the last one asked (offsets only grow),
    so that splitting a file is linear in its size."""

    def __init__(self, text: str) -> None:
        self.text, self.offset, self.line = text, 0, 1

    def at(self, offset: int) -> int:
        self.line += self.text.count("\n", self.offset, offset)
        self.offset = offset
        return self.line


def _chunk(text: str, start: int, end: int, lines: _LineCounter) -> Iterator[Chunk]:
    body = text[start:end]
    stripped = _strip_comment_lines(body)
    if not stripped.strip():
        return
    lead = len(body) - len(body.lstrip())
    start += lead
    body = body[lead:].rstrip()
    line = lines.at(start)
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    last_line = line + body.count("\n")
    last_nl = body.rfind("\n")
    end_column = (len(body) - last_nl) if last_nl >= 0 else column + len(body)
    yield Chunk(body, line, column, Span(line, column, last_line, end_column),
                *_guess_defined_names(body))


def _mentions(body: str) -> tuple[str, ...]:
    """The names a broken statement mentions (outside comments and strings)."""
    code = re.sub(r"#[^\n]*|" + _STRING, " ", body)
    return tuple(dict.fromkeys(_name().findall(code)))


def _guess_defined_names(body: str) -> tuple[tuple[str, ...], bool]:
    """What a broken statement was probably defining, to avoid follow-on errors."""
    if re.match(r"dim\b", body):
        # Every name: `dim N = 128, d = 64` meant to declare both.
        return tuple(_name().findall(body[3:])), True
    match = _defines().match(body)
    return ((match.group(1),) if match else ()), False


def _strip_comment_lines(body: str) -> str:
    return re.sub(r"#[^\n]*", "", body)


# --- syntax errors in words ------------------------------------------------------------

_WORDS = codes.TOKEN_WORDS
# The element types a shape may start with, and the word each gives Value.element.
_ELEMENT_TYPES = {"BOOL": "", "INT_TYPE": "int", "COMPLEX_TYPE": "complex"}
_KEYWORDS = frozenset({
    "DIM", "CONSTRAINT", "INPUT", "PARAM", "ASSERT", "OUTPUT", "BOOL", "INF", "TRUE", "TRUE_CAP",
    "FALSE", "FALSE_CAP", "ROW", "COL", "DEF",
})
_COMPARISONS = frozenset({"EQ", "NE", "LE", "GE", "LT", "GT"})
_STATEMENT_KEYWORDS = frozenset({"DIM", "CONSTRAINT", "INPUT", "PARAM", "ASSERT", "OUTPUT",
                                 "DEF"})
_OPERAND_END = frozenset(
    {"NAME", "INT", "DECIMAL", "STRING", "INF", "RPAR", "RSQB", "TRANSPOSE", "ROW", "COL",
     "ELLIPSIS", "TRUE", "TRUE_CAP", "FALSE", "FALSE_CAP"}
)


def _describe_expected(
    expected: set[str], in_constraint: bool, open_bracket: str | None, after_operand: bool,
    in_dim: bool = False, after_head: bool = False,
) -> str:
    """The few things most worth saying, in words, not terminal names.

    LALR merges states, so ``expected`` can list closers of brackets that are
    not open here; only the innermost open bracket's closer is worth saying.
    """
    parts: list[str] = []
    wanted = {None: (), "(": ("COMMA", "RPAR"), "[": ("COMMA", "RSQB")}[open_bracket]
    closing = [n for n in wanted if n in expected]
    if expected & {"INT", "DECIMAL", "LPAR"} and not after_operand:
        parts.append(_WORDS["expression"])  # after `(`, `[` or `,` also the closer
    elif "NAME" in expected and not after_operand:
        parts.append(_WORDS["NAME"])
    if in_constraint and expected & _COMPARISONS:
        parts.append("`==`")
    if in_dim and "COMMA" in expected and not closing:
        parts.append("`,`")  # `dim A B`: the names are separated by commas
    # `:` only after the name a statement declares (`input Z: ...`): LALR merges
    # states, so the `:` of a slice shows up as expected after any operand.
    if "COLON" in expected and after_head:
        parts.append(_WORDS["COLON"])
    if "EQUAL" in expected:
        parts.append(_WORDS["EQUAL"])
    parts += [_WORDS[n] for n in closing]
    if not parts and after_operand:
        parts.append(_WORDS["operator"])
    if not parts and "LSQB" in expected and expected & {"INT_TYPE", "COMPLEX_TYPE"}:
        parts = [_WORDS["LSQB"], _WORDS["element_type"]]  # a shape: `[N]` or `int[N]`
    if not parts:
        parts = sorted({_WORDS.get(e, f"`{e.lower()}`") for e in expected})
    return codes.one_of(parts[:3])


def _describe_token(token: Token | None) -> str:
    if token is None or token.type in ("$END", "_SEP") and not token.value.startswith(";"):
        return _WORDS["$END"]
    return f"`{token.value}`"


def _syntax_diagnostic(exc: Exception, chunk: Chunk, postlex: BracketNewlines) -> Diagnostic:
    if isinstance(exc, UnexpectedToken):
        # A token the parser rejected went through the post-lexer (and was
        # shifted there); one the lexer rejected for this state did not.
        passed_postlex = exc.token is postlex.last
        previous = postlex.previous if passed_postlex else postlex.last
        if not passed_postlex and exc.token.type != "$END":
            postlex._shift(exc.token)
        return _unexpected_token(exc, chunk, previous)
    if isinstance(exc, UnexpectedCharacters):
        line = (exc.line or 1) + chunk.line - 1
        column = (exc.column or 1) + (chunk.column - 1 if exc.line == 1 else 0)
        position = exc.pos_in_stream or 0
        char = chunk.text[position] if position < len(chunk.text) else ""
        key = "unterminated_string" if char in "\"'" else "unexpected_char"
        shown = repr(char) if not char.isprintable() or char.isspace() else f"`{char}`"
        return codes.SYNTAX.diag(Span(line, column, line, column + 1),
                                 detail=codes.syntax_text(key, char=shown))
    detail = codes.syntax_text("statement_start", found=_WORDS["$END"])
    return codes.SYNTAX.diag(chunk.span, detail=detail)


def _unexpected_token(exc: UnexpectedToken, chunk: Chunk, previous: Token | None) -> Diagnostic:
    token = exc.token
    expected = set(exc.expected)
    if token.type == "$END" and previous is not None:
        # Just after the last token, not after a trailing comment.
        span = Span(previous.end_line or 1, previous.end_column or 1,
                    previous.end_line or 1, (previous.end_column or 1) + 1)
    elif token.type == "$END":
        span = Span(chunk.span.end_line, chunk.span.end_column,
                    chunk.span.end_line, chunk.span.end_column + 1)
    else:
        span = token_span(token)
    error_offset = len(chunk.text) if token.type == "$END" else (token.start_pos or 0)
    if "NAME" in expected and _at_convention(chunk.text[:error_offset]):
        # A convention word may follow (`dim W window exclusive`, `input m: bool[N] keep`):
        # a name is not what is missing there.
        expected.discard("NAME")
    if token.type in _KEYWORDS and "NAME" in expected:
        # The lexer reads reserved words as keywords everywhere (one scanner, built
        # fast); where a name was expected, say that it is reserved.
        return codes.RESERVED.diag(span, name=token.value, what_kind=codes.detail("reserved_word"))
    if previous is not None and previous.type in _STATEMENT_KEYWORDS and "NAME" in expected \
            and (previous.start_pos or 0) == 0:
        # `dim`, `output` alone: the name they declare is what is missing (that the word
        # could also name a tensor, `output = ...`, is not worth saying here).
        expected = {"NAME"}
    found = _describe_token(token)
    in_constraint = chunk.text.startswith("constraint")
    in_dim = re.match(r"dim\b", chunk.text) is not None
    open_bracket = _unclosed_bracket(chunk.text[:error_offset])
    if previous is None:
        if "DIM" in expected or "CONSTRAINT" in expected:
            detail = codes.syntax_text("statement_start", found=found)
        else:
            detail = codes.syntax_text(
                "expected_at_start",
                expected=_describe_expected(expected, in_constraint, open_bracket, False, in_dim),
                found=found,
            )
    else:
        unclosed = _unclosed_offset(chunk.text)
        if token.type == "$END" and unclosed is not None:
            detail = codes.syntax_text("unclosed", bracket=chunk.text[unclosed])
            span = _offset_span(chunk, unclosed)  # point at the bracket itself
        elif token.type in _CLOSE and open_bracket is None:
            detail = codes.syntax_text("unmatched", bracket=token.value)
        elif (word := _python_logic(token, previous)) is not None:
            # `not M`, `a and b`: Python's words, which NumPy arrays refuse.
            detail = codes.syntax_text("python_logic", word=word.value,
                                       operator=_PYTHON_LOGIC[word.value])
            span = token_span(word)
        else:
            detail = codes.syntax_text(
                "expected_after", expected=_describe_expected(
                    expected, in_constraint, open_bracket,
                    after_operand=previous.type in _OPERAND_END, in_dim=in_dim,
                    after_head=_is_head_name(chunk.text, previous),
                ),
                previous=f"`{previous.value}`", found=found,
            )
    return codes.SYNTAX.diag(span, detail=detail)


_PYTHON_LOGIC = {"not": "~", "and": "&", "or": "|"}


# Where the grammar expects a name only as a convention word: after `dim W` and after the
# shape of an `input` or `param` declaration (and after convention words already there).
@cache  # compiled on first use: most runs never need it (issue 36)
def _convention_place() -> re.Pattern[str]:
    return re.compile(
        r"dim\s+\w+(\s+\w+)*|(input|param)\b[^=]*\](\s+\w+)*|\w+\s*:[^=]*\](\s+\w+)*", re.S)


def _at_convention(head: str) -> bool:
    return _convention_place().fullmatch(head.rstrip()) is not None


def _python_logic(token: Token, previous: Token) -> Token | None:
    """The `not` / `and` / `or` a syntax error comes from: the token itself (`a and b`
    fails at `and`) or the one before it (`not M` fails at `M`)."""
    for candidate in (token, previous):
        if candidate.type == "NAME" and candidate.value in _PYTHON_LOGIC:
            return candidate
    return None


@cache  # compiled on first use: most runs never need it (issue 36)
def _head() -> re.Pattern[str]:
    return re.compile(r"(?:(?:input|param|assert|output)\s+)?(" + _NAME_PATTERN + ")")


def _is_head_name(text: str, token: Token) -> bool:
    """Is ``token`` the name the statement declares or defines (`S` in `S: [N] = x`)?"""
    head = _head().match(text)
    return head is not None and token.type == "NAME" and token.start_pos == head.start(1)


def _unclosed_bracket(text: str) -> str | None:
    offset = _unclosed_offset(text)
    return text[offset] if offset is not None else None


def _unclosed_offset(text: str) -> int | None:
    """Where the innermost bracket that is still open at the end of ``text`` opens."""
    stack: list[int] = []
    for match in _scan().finditer(text):
        token = match.group()
        if token in "([":
            stack.append(match.start())
        elif token in ")]" and stack:
            stack.pop()
    return stack[-1] if stack else None


def _offset_span(chunk: Chunk, offset: int) -> Span:
    """The one-character span at ``offset`` in the chunk, in file coordinates."""
    line = chunk.line + chunk.text.count("\n", 0, offset)
    line_start = chunk.text.rfind("\n", 0, offset) + 1
    column = offset - line_start + 1 + (chunk.column - 1 if line == chunk.line else 0)
    return Span(line, column, line, column + 1)
