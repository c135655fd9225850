"""The analysed grammar, cached on disk per user, never as a pickle.

Analysing the grammar (Lark's LALR tables) costs ~30 ms of every start, too much for
a linter; so the tables are kept on disk. Lark's own ``cache=True`` unpickles a file
with a predictable name in the shared temporary folder, which runs the code of
whoever planted it there. Here instead:

- the tables are written as **JSON** (tagged, so that tuples and integer keys come
  back as they were), read with ``json.loads`` and handed to Lark's deserialiser:
  no pickle, so a file's content can at worst give a parser that fails, and then
  the grammar is analysed afresh;
- the file lives in a **per-user private folder**, ``$XDG_CACHE_HOME/shapecheck``
  (``~/.cache/shapecheck``), created with mode 0700. It is read only when the
  folder and every folder above it (symlinks resolved) belong to this user or to
  root and cannot be written by others (a sticky folder such as /tmp excepted), the
  folder itself is not a symlink, and the file — opened with ``O_NOFOLLOW`` and
  checked with ``fstat`` on the open descriptor — is a regular file of this user
  that no one else can write. Anything else: no cache (the grammar is analysed,
  ~30 ms), never an error;
- the file's name and content carry a key (the grammar's text, the options, Lark's
  and Python's versions), so a changed grammar never reads stale tables.

``SHAPECHECK_NO_CACHE=1`` turns the cache off.

Before any of that, the parser reads the tables **shipped with the package**
(``syntax/grammar_tables.py``, written by ``python tools/grammar_tables.py``): the same
data as Python literals (the parse table's states as the code that builds them), which
Python itself compiles to bytecode on install and loads with the module (no decode; about
10 ms less on every start than the JSON file). They carry the same key (without Python's
version: the data does not depend on it), so a grammar edited since they were written, or
another Lark, falls back to the cache. With them ship the lexer's keyword table and its two
regular expressions compiled; those are read only by the regular-expression engine that
compiled them (``sre_engine``): another Python compiles them as Lark does.
"""

from __future__ import annotations

import _sre
import hashlib
import os
import re
import stat
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import lark
from lark import Lark
from lark.parse_tree_builder import ParseTreeBuilder
from lark.parser_frontends import _get_lexer_callbacks
from lark.parsers import lalr_analysis, lalr_parser

FORMAT = 2
MAX_BYTES = 16 << 20
_FALLBACK_LOAD_OPTIONS = frozenset({
    "postlex", "transformer", "lexer_callbacks", "use_bytes", "debug", "g_regex_flags", "regex",
    "propagate_positions", "tree_class", "_plugins",
})
# Options given when loading (objects, not data): never written to the file.
_LOAD_OPTIONS = frozenset(getattr(lark.lark, "_LOAD_ALLOWED_OPTIONS", _FALLBACK_LOAD_OPTIONS))
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def build(grammar: str, **options: Any) -> Lark:
    """``Lark(grammar, **options)``, from the private cache when it is safe to read."""
    data_options = {k: v for k, v in options.items() if k not in _LOAD_OPTIONS}
    load_options = {k: v for k, v in options.items() if k in _LOAD_OPTIONS}
    key = cache_key(grammar, data_options)
    folder = cache_folder()
    if folder is not None:
        cached = read(folder / f"parser-{key[:32]}.json", key)
        if cached is not None:
            try:
                return Lark._load_from_dict(cached["data"], cached["memo"], **load_options)
            except Exception:  # a damaged or foreign file: analyse the grammar afresh
                pass
    parser = Lark(grammar, **options)
    if folder is not None:
        write(folder / f"parser-{key[:32]}.json", key, parser)
    return parser


def cache_key(grammar: str, options: dict[str, Any], python: bool = True) -> str:
    """The key of the tables: ``python=False`` for the shipped ones (any Python reads them)."""
    parts = [str(FORMAT), grammar, repr(sorted(options.items())), lark.__version__]
    text = "\0".join(parts + [sys.version.split()[0]] if python else parts)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- the tables shipped with the package -----------------------------------------------------


def from_tables(key: str, data: dict[str, Any], memo: Callable[[], dict[int, Any]],
                grammar: str, states: Callable[[dict[int, Any]], dict[int, Any]] | None = None,
                unless: Unless | None = None, patterns: Patterns | None = None,
                **options: Any) -> Lark | None:
    """The parser from shipped tables written under ``key``; None when they are not this
    grammar's, with these options and this Lark (the caller then uses ``build``).

    ``states``: the parse table's states as Lark's deserialiser makes them (tokens by name,
    each action with its rule), built by the shipped code from the memo; the data then holds
    the rest of the table, without its states. ``unless``: the lexer's keyword table as
    ``unless_table`` found it (its scanner is then built without searching for it);
    ``patterns``: its regular expressions as ``compiled_patterns`` compiled them (used only
    by the regular-expression engine they were compiled for)."""
    data_options = {k: v for k, v in options.items() if k not in _LOAD_OPTIONS}
    if key != cache_key(grammar, data_options, python=False):
        return None
    load_options = {k: v for k, v in options.items() if k in _LOAD_OPTIONS}
    # The memo's rules and terminals come built (Lark's deserialiser passes objects through):
    # a fresh set on each call, as a load from data gives.
    records = memo()
    if states is not None:
        frontend = data["parser"]
        table = {**frontend["parser"], "states": states(records)}
        data = {**data, "parser": {**frontend, "parser": table}}
        load_options["_plugins"] = {**load_options.get("_plugins", {}), "LALR_Parser": _BuiltTable}
    parser = _ShippedLark._load_from_dict(data, records, **load_options)
    lexer = getattr(parser.parser.lexer, "lexer", parser.parser.lexer)  # under a postlexer
    if unless is not None and isinstance(lexer, lark.lexer.BasicLexer):
        lexer._build_scanner = partial(  # type: ignore[method-assign]
            _shipped_scanner, lexer, unless, patterns)
    return parser


class _ShippedLark(Lark):
    """Lark, whose LALR parser's callbacks (one a rule, ~200) are each made by Lark's own
    ``ParseTreeBuilder`` when the parser first reduces by its rule, not all of them when the
    parser is built: a short spec reduces by a third of them (issue 36, ~4M instructions of
    every cold start). The callbacks are the ones ``create_callback`` makes, rule by rule."""

    def _prepare_callbacks(self) -> None:
        options = self.options
        if options.parser != "lalr" or options.ambiguity == "forest":
            super()._prepare_callbacks()
            return
        self._parse_tree_builder = ParseTreeBuilder(
            [], options.tree_class or lark.Tree, options.propagate_positions, False,
            options.maybe_placeholders)
        self._callbacks = _Callbacks(self._parse_tree_builder, options.transformer)
        self._callbacks.update(_get_lexer_callbacks(options.transformer, self.terminals))


class _Callbacks(dict):  # type: ignore[type-arg]
    """A rule's callback, made on the first look-up (the LALR parser reads ``callbacks[rule]``
    and tests ``if callbacks``; the lexer's callbacks, by terminal name, are added at once)."""

    def __init__(self, builder: ParseTreeBuilder, transformer: Any) -> None:
        super().__init__()
        self._builder, self._transformer = builder, transformer

    def __missing__(self, rule: lark.grammar.Rule) -> Callable[..., Any]:
        self._builder.rule_builders = list(self._builder._init_builders([rule]))
        made = self[rule] = self._builder.create_callback(self._transformer)[rule]
        return made

    def __bool__(self) -> bool:
        return True


# --- the lexer's keyword table ---------------------------------------------------------------

#: Which keywords each regular-expression terminal also matches (``NAME``: ``dim``, ``def``,
#: ...), in the lexer's order, and the keywords it swallows (no pattern of their own in the
#: scanner): what ``lark.lexer._create_unless`` finds by matching every keyword against every
#: expression (~380 ``re.match`` calls and a compile per expression on every start).
Unless = tuple[dict[str, tuple[str, ...]], frozenset[str]]


def unless_table(parser: Lark) -> Unless:
    """The keyword table of ``parser``'s lexer, as Lark's ``BasicLexer`` computes it."""
    lexer = getattr(parser.parser.lexer, "lexer", parser.parser.lexer)
    terminals, callbacks = lark.lexer._create_unless(lexer.terminals, lexer.g_regex_flags,
                                                     lexer.re, lexer.use_bytes)
    kept = {terminal.name for terminal in terminals}
    keywords = {name: tuple(t.name for t in callback.scanner.terminals)
                for name, callback in callbacks.items()}
    return keywords, frozenset(t.name for t in lexer.terminals if t.name not in kept)


def _shipped_scanner(lexer: lark.lexer.BasicLexer, unless: Unless,
                     patterns: Patterns | None = None) -> lark.lexer.Scanner:
    """``BasicLexer._build_scanner`` (Lark 1.3, which the tables' key names) with the keyword
    table given instead of searched for, and the patterns compiled ahead where this Python's
    engine is theirs: the same callbacks and the same scanner."""
    keywords, swallowed = unless
    by_name = {terminal.name: terminal for terminal in lexer.terminals}
    flags, re_module, use_bytes = lexer.g_regex_flags, lexer.re, lexer.use_bytes
    if patterns is not None and patterns[0] == sre_engine() and re_module is re:
        re_module = _Compiled(patterns[1])
    lexer.callback = {name: lark.lexer.UnlessCallback(lark.lexer.Scanner(
        [by_name[keyword] for keyword in names], flags, re_module, use_bytes=use_bytes))
        for name, names in keywords.items()}
    for type_, function in lexer.user_callbacks.items():
        if type_ in lexer.callback:
            lexer.callback[type_] = lark.lexer.CallChain(
                lexer.callback[type_], function, lambda t, type_=type_: t.type == type_)
        else:
            lexer.callback[type_] = function
    terminals = [terminal for terminal in lexer.terminals if terminal.name not in swallowed]
    return lark.lexer.Scanner(terminals, flags, re_module, use_bytes)


class _BuiltTable(lalr_parser.LALR_Parser):
    """Lark's LALR parser read from a table whose states come built (``from_tables``): what
    ``LALR_Parser.deserialize`` makes, without decoding each of the ~5,000 actions."""

    @classmethod
    def deserialize(cls, data: dict[str, Any], memo: Any, callbacks: Any,
                    debug: bool = False) -> lalr_parser.LALR_Parser:
        parser = lalr_parser.LALR_Parser.__new__(lalr_parser.LALR_Parser)  # Lark's own class
        parser._parse_table = lalr_analysis.IntParseTable(
            data["states"], data["start_states"], data["end_states"])
        parser.parser = lalr_parser._Parser(parser._parse_table, callbacks, debug)
        return parser


def _states_source(table: dict[str, Any]) -> str:
    """The source of ``states(m)``: the parse table's states as ``IntParseTable`` holds them
    (``(Shift, state)`` or ``(Reduce, rule)`` by token name). Each action is made once, as a
    local (``s171``: shift to state 171, ``r229``: reduce by the memo's rule 229), shared by
    every state that takes it (~530 tuples instead of ~4,900; nothing changes them), and each
    state is a dictionary display (its keys one constant, its values those locals)."""
    tokens = table["tokens"]
    names: dict[tuple[int, Any], str] = {}
    rows = []
    for state, actions in table["states"].items():
        cells = []
        for token, (action, argument) in actions.items():
            if action == 1:  # Lark's tag for a reduction, whose argument is the rule's memo entry
                rule = argument["@"]
                key, name, made = (1, rule), f"r{rule}", f"(r, m[{rule!r}])"
            else:
                key, name, made = (0, argument), f"s{argument}", f"(s, {argument!r})"
            names.setdefault(key, f"    {name} = {made}\n")
            cells.append(f"{tokens[token]!r}: {name}")
        rows.append(f"        {state!r}: {{{', '.join(cells)}}},\n")
    return ("def states(m: dict) -> dict:\n"
            "    s, r = Shift, Reduce\n"
            + "".join(names[key] for key in sorted(names))
            + f"    return {{\n{''.join(rows)}    }}\n")


def _rules_source(memo: dict[Any, Any]) -> str:
    """``SYMBOLS``, ``OPTIONS`` and ``RULES``: the memo's rules as rows of constants
    (``rules_from_rows`` builds them)."""
    symbols: dict[tuple[str, bool, bool], int] = {}
    options: dict[tuple[Any, ...], int] = {}

    def symbol(value: dict[str, Any]) -> int:
        key = (value["name"], value["__type__"] == "Terminal", value.get("filter_out", False))
        return symbols.setdefault(key, len(symbols))

    rows = []
    for index, value in memo.items():
        if value.get("__type__") != "Rule":
            continue
        given = value["options"]
        fields = lark.grammar.RuleOptions.__serialize_fields__
        option = tuple(_tuple(given[name]) for name in fields)
        rows.append((index, symbol(value["origin"]), tuple(symbol(s) for s in value["expansion"]),
                     value["order"], value["alias"], options.setdefault(option, len(options))))
    from pprint import pformat  # only when the tables are written

    body = "".join(f"    {row!r},\n" for row in rows)
    return (f"SYMBOLS = {pformat(tuple(symbols), width=100, compact=True)}\n"
            f"OPTIONS = {pformat(tuple(options), width=100, compact=True)}\n"
            f"RULES = (\n{body})\n")


def _patterns_source(patterns: dict[tuple[str, int], Compiled]) -> str:
    from pprint import pformat  # only when the tables are written

    return "".join(f"    {key!r}:\n        {pformat(value, width=92, compact=True)},\n"
                   for key, value in patterns.items())


def _tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def rules_from_rows(rows: tuple[tuple[Any, ...], ...], symbols: tuple[tuple[str, bool, bool], ...],
                    options: tuple[tuple[Any, ...], ...]) -> dict[int, lark.grammar.Rule]:
    """The memo's rules from ``_rules_source``'s rows, as Lark's deserialiser makes them, except
    that equal symbols and equal options are one object each (as Lark's own grammar loader
    shares a rule's options between its expansions; nothing changes them)."""
    made = [terminal(name, filter_out) if is_terminal else nonterminal(name)
            for name, is_terminal, filter_out in symbols]
    fields = lark.grammar.RuleOptions.__serialize_fields__
    shared = [built(lark.grammar.RuleOptions, dict(zip(fields, values))) for values in options]
    symbol = made.__getitem__
    rules: dict[int, lark.grammar.Rule] = {}
    for index, origin, expansion, order, alias, option in rows:
        rule = _NEW(lark.grammar.Rule)
        rule.origin, rule.expansion = made[origin], list(map(symbol, expansion))
        rule.order, rule.alias, rule.options = order, alias, shared[option]
        rule._deserialize()  # its hash, as Lark's deserialiser computes it
        rules[index] = rule
    return rules


# --- the scanner's regular expressions, compiled ahead ------------------------------------------

#: A pattern as ``re._compiler.compile`` hands it to the engine: its text, flags, the engine's
#: code, the number of groups, and the groups by name and by number.
Compiled = tuple[str, int, tuple[int, ...], int, dict[str, int], tuple["str | None", ...]]
#: The engine they were compiled for (``sre_engine``), and each by its text and given flags.
Patterns = tuple[tuple[int, ...], dict[tuple[str, int], Compiled]]


def sre_engine() -> tuple[int, ...]:
    """This Python's regular-expression engine: its code is only read by the same one."""
    return (*sys.version_info[:2], _sre.MAGIC, _sre.CODESIZE)


def compiled_patterns(parser: Lark) -> Patterns:
    """The regular expressions of ``parser``'s scanners (the keyword scanners' and the main
    one), as ``re._compiler.compile`` compiles them: ~40 alternatives parsed and translated by
    Python code on every start (~8M instructions), now read with the tables."""
    lexer = getattr(parser.parser.lexer, "lexer", parser.parser.lexer)
    scanners = [lexer.scanner, *(callback.scanner for callback in lexer.callback.values()
                                 if isinstance(callback, lark.lexer.UnlessCallback))]
    flags = lexer.g_regex_flags
    found: dict[tuple[str, int], Compiled] = {}
    for scanner in scanners:
        for compiled in scanner._mres:
            parsed = re._parser.parse(compiled.pattern, flags)  # type: ignore[attr-defined]
            code = re._compiler._code(parsed, flags)  # type: ignore[attr-defined]
            groups = parsed.state.groupdict
            by_number: list[str | None] = [None] * parsed.state.groups
            for name, number in groups.items():
                by_number[number] = name
            found[(compiled.pattern, flags)] = (
                compiled.pattern, flags | parsed.state.flags, tuple(map(int, code)),
                parsed.state.groups - 1, dict(groups), tuple(by_number))
    return sre_engine(), found


class _Compiled:
    """``re`` for Lark's ``Scanner`` (which only calls ``compile``), reading the patterns
    compiled ahead (the engine checks their code as it takes it); any other is compiled."""

    def __init__(self, patterns: dict[tuple[str, int], Compiled]) -> None:
        self.patterns = patterns

    def compile(self, pattern: str, flags: int = 0) -> re.Pattern[str]:
        found = self.patterns.get((pattern, flags))
        if found is None:
            return re.compile(pattern, flags)
        text, all_flags, code, groups, by_name, by_number = found
        return _sre.compile(text, all_flags, list(code), groups, by_name, by_number)


# The classes the memo's records are made of (Lark's own deserialiser allows the same ones).
_MEMO_CLASSES = {cls.__name__: cls for cls in (
    lark.grammar.Rule, lark.grammar.RuleOptions, lark.grammar.Terminal, lark.grammar.NonTerminal,
    lark.lexer.TerminalDef, lark.lexer.PatternStr, lark.lexer.PatternRE)}


def tables_source(grammar: str, **options: Any) -> str:
    """The Python module holding the analysed grammar (``from_tables`` reads it): the data as
    literals, the memo's terminals as the calls that build them, its rules and the parse
    table's states as rows of constants (one constant each in the bytecode, built by the
    loops above)."""
    from pprint import pformat  # only when the tables are written

    data_options = {k: v for k, v in options.items() if k not in _LOAD_OPTIONS}
    analysed = Lark(grammar, **options)
    data, memo = _serialise(analysed)
    keywords, swallowed = unless_table(analysed)
    engine, patterns = compiled_patterns(analysed)
    table = data["parser"]["parser"]
    states = _states_source(table)
    data["parser"]["parser"] = {k: v for k, v in table.items() if k not in ("states", "tokens")}
    entries = "".join(f"        {index!r}: {_built(value)},\n" for index, value in memo.items()
                      if value.get("__type__") != "Rule")
    return (f'"""The analysed grammar (LALR tables) for Lark {lark.__version__}: GENERATED by\n'
            '`python tools/grammar_tables.py` from grammar/attn.lark; do not edit.\n'
            'syntax/grammar_cache.py says why and when it is read."""\n\n'
            "# fmt: off\n"
            "from lark.lexer import PatternRE, PatternStr, TerminalDef\n"
            "from lark.parsers.lalr_analysis import Reduce, Shift\n\n"
            "from .grammar_cache import built as _o, rules_from_rows\n\n"
            f"KEY = {cache_key(grammar, data_options, python=False)!r}\n"
            f"DATA = {pformat(data, width=100, compact=True)}\n\n"
            f"KEYWORDS = {pformat(keywords, width=100, compact=True)}\n"
            f"SWALLOWED = frozenset({pformat(tuple(sorted(swallowed)), width=80, compact=True)})\n"
            "UNLESS = KEYWORDS, SWALLOWED\n"
            f"PATTERNS = {engine!r}, {{\n{_patterns_source(patterns)}}}\n"
            + _rules_source(memo) + "\n\n"
            "def memo() -> dict:\n"
            f"    terminals = {{\n{entries}    }}\n"
            "    return {**terminals, **rules_from_rows(RULES, SYMBOLS, OPTIONS)}\n\n\n"
            + states)


def built(cls: type, fields: dict[str, Any]) -> Any:
    """One record of Lark's memo, as its ``Serialize.deserialize`` makes it from data."""
    made = cls.__new__(cls)
    for name, value in fields.items():
        setattr(made, name, value)
    if hasattr(made, "_deserialize"):
        made._deserialize()
    return made


def nonterminal(name: str) -> lark.grammar.NonTerminal:
    """``built(NonTerminal, {"name": name})``, the memo's most common record, in one call."""
    made = _NEW(lark.grammar.NonTerminal)
    made.name = name
    return made


def terminal(name: str, filter_out: bool) -> lark.grammar.Terminal:
    """``built(Terminal, {"name": name, "filter_out": filter_out})`` in one call."""
    made = _NEW(lark.grammar.Terminal)
    made.name = name
    made.filter_out = filter_out
    return made


_NEW = object.__new__  # what `cls.__new__(cls)` is for Lark's symbols (no __new__ of their own)


def _built(value: Any) -> str:
    """The source of an expression giving ``value`` with its tagged records built."""
    if isinstance(value, dict):
        if value.get("__type__") == "NonTerminal" and set(value) == {"__type__", "name"}:
            return f"_n({value['name']!r})"
        if value.get("__type__") == "Terminal" and set(value) == {"__type__", "name",
                                                                  "filter_out"}:
            return f"_t({value['name']!r}, {value['filter_out']!r})"
        if "__type__" in value:
            cls = _MEMO_CLASSES[value["__type__"]]  # a KeyError: a class never seen in a memo
            fields = ", ".join(f"{name!r}: {_built(value[name])}"
                               for name in cls.__serialize_fields__)  # type: ignore[attr-defined]
            return f"_o({cls.__name__}, {{{fields}}})"
        if "@" in value:
            raise TypeError("a memo reference inside the memo")
        return "{" + ", ".join(f"{k!r}: {_built(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_built(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + "".join(f"{_built(v)}, " for v in value) + ")"
    return repr(value)


def _serialise(parser: Lark) -> tuple[dict[str, Any], dict[Any, Any]]:
    data, memo = parser.memo_serialize([lark.lexer.TerminalDef, lark.grammar.Rule])
    data["options"] = {k: v for k, v in data["options"].items() if k not in _LOAD_OPTIONS}
    return data, memo


# --- the folder ------------------------------------------------------------------------------


def cache_folder() -> Path | None:
    """The private cache folder, created if needed; None when it cannot be made safe."""
    if os.environ.get("SHAPECHECK_NO_CACHE") or not hasattr(os, "geteuid"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(base):  # the XDG rule: a relative value is ignored
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    folder = Path(base) / "shapecheck"
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError:
        return None
    return folder if trusted_folder(folder) else None


def trusted_folder(folder: Path) -> bool:
    """Ours, not a symlink, writable by nobody else; and so is every folder above it."""
    uid = os.geteuid()
    try:
        info = os.lstat(folder)
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            return False
        if info.st_uid != uid or info.st_mode & 0o022:
            return False
        real = Path(os.path.realpath(folder))
        for above in real.parents:
            info = os.stat(above)
            if info.st_uid not in (0, uid):
                return False
            if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
                return False
    except OSError:
        return False
    return True


# --- reading and writing ---------------------------------------------------------------------


def read(path: Path, key: str) -> dict[str, Any] | None:
    """The cached tables, if the file is safe to trust and holds this key; else None."""
    try:
        descriptor = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC)
    except OSError:  # missing, or a symlink (O_NOFOLLOW: ELOOP)
        return None
    try:
        info = os.fstat(descriptor)
        if (not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid()
                or info.st_mode & 0o022 or info.st_nlink != 1 or info.st_size > MAX_BYTES):
            return None
        with os.fdopen(descriptor, "rb") as handle:
            descriptor = -1
            text = handle.read(MAX_BYTES + 1)
        content = _json().loads(text, object_hook=_decode)
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return None
    finally:
        if descriptor >= 0:
            os.close(descriptor)
    if not isinstance(content, dict) or content.get("key") != key:
        return None
    return content


def write(path: Path, key: str, parser: Lark) -> None:
    """Save the tables (a private temporary, renamed); any failure leaves no cache."""
    from ..fileio import write_atomic

    try:
        data, memo = _serialise(parser)
        text = _json().dumps(_encode({"key": key, "data": data, "memo": memo}),
                          separators=(",", ":"))
        write_atomic(path, text, mode=0o600)
    except (OSError, TypeError, ValueError, AttributeError):
        pass


def _json() -> Any:
    import json  # only the cache reads it: the shipped tables need no decoder (~2 ms)

    return json


_INT_KEYS, _TUPLE = "\x00i", "\x00t"  # tags no key of Lark's data starts with


def _encode(value: Any) -> Any:
    """JSON keeps lists and string keys only: tag integer-keyed dicts and tuples (few),
    so that ``json.loads`` gives back exactly what Lark serialised."""
    if isinstance(value, dict):
        if all(type(k) is str and not k.startswith("\x00") for k in value):
            return {k: _encode(v) for k, v in value.items()}
        if all(type(k) is int for k in value):
            return {_INT_KEYS: [[k, _encode(v)] for k, v in value.items()]}
        raise TypeError("cannot cache a dict with mixed keys")
    if isinstance(value, tuple):
        return {_TUPLE: [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"cannot cache a {type(value).__name__}")


def _decode(tagged: dict[str, Any]) -> Any:
    if len(tagged) == 1:
        if _INT_KEYS in tagged:
            return {int(k): v for k, v in tagged[_INT_KEYS]}
        if _TUPLE in tagged:
            return tuple(tagged[_TUPLE])
    return tagged


__all__ = ["Compiled", "Patterns", "Unless", "build", "built", "cache_folder", "cache_key",
           "compiled_patterns", "from_tables", "nonterminal", "read", "rules_from_rows",
           "sre_engine", "tables_source", "terminal", "trusted_folder", "unless_table", "write"]
