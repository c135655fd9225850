"""The parser cache: JSON in a private per-user folder, read only when safe (issue 7).

A planted file, a symlink, a file or folder others can write: never loaded. Loaded or
not, the parser is the same.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import lark
import pytest

from shapecheck.syntax import grammar_cache, parser

ROOT = Path(__file__).resolve().parent.parent


def build_options() -> dict:
    return dict(parser="lalr", lexer="basic", postlex=parser.BracketNewlines(),
                start=["file", "stmt"], transformer=parser.ToNodes())


@pytest.fixture
def cache_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "cache-home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.delenv("SHAPECHECK_NO_CACHE", raising=False)
    return home


def cached_file(home: Path) -> Path:
    (found,) = (home / "shapecheck").glob("parser-*.json")
    return found


def loads(home: Path) -> bool:
    """Whether the cached file is read (its key checked and its content returned)."""
    path = cached_file(home)
    key = grammar_cache.cache_key(parser.grammar_text(), {
        k: v for k, v in build_options().items() if k not in grammar_cache._LOAD_OPTIONS})
    folder = grammar_cache.cache_folder()
    return folder is not None and grammar_cache.read(path, key) is not None


def test_the_cache_is_json_in_a_private_folder_and_gives_the_same_parser(cache_home):
    fresh = grammar_cache.build(parser.grammar_text(), **build_options())
    path = cached_file(cache_home)
    assert path.read_bytes().startswith(b"{") and b"pickle" not in path.read_bytes()[:100]
    assert (path.stat().st_mode & 0o777) == 0o600
    assert (path.parent.stat().st_mode & 0o777) == 0o700
    assert loads(cache_home)
    cached = grammar_cache.build(parser.grammar_text(), **build_options())
    text = (ROOT / "examples" / "multi_head.attn").read_text(encoding="utf-8")
    assert cached.parse(text, start="file") == fresh.parse(text, start="file")


def test_no_pickle_anywhere_on_the_way():
    source = (ROOT / "shapecheck" / "syntax" / "grammar_cache.py").read_text() + \
        (ROOT / "shapecheck" / "syntax" / "parser.py").read_text()
    assert "import pickle" not in source
    assert parser._parsers().lark.options.cache is False


def test_a_symlink_planted_at_the_file_is_never_followed(cache_home, tmp_path):
    grammar_cache.build(parser.grammar_text(), **build_options())
    path = cached_file(cache_home)
    real = tmp_path / "elsewhere.json"
    real.write_bytes(path.read_bytes())
    real.chmod(0o600)
    path.unlink()
    path.symlink_to(real)
    assert not loads(cache_home)


def test_a_file_others_can_write_is_not_loaded(cache_home):
    grammar_cache.build(parser.grammar_text(), **build_options())
    path = cached_file(cache_home)
    assert loads(cache_home)
    path.chmod(0o620)
    assert not loads(cache_home)
    path.chmod(0o602)
    assert not loads(cache_home)


def test_a_hard_link_is_not_loaded(cache_home, tmp_path):
    grammar_cache.build(parser.grammar_text(), **build_options())
    path = cached_file(cache_home)
    os.link(path, tmp_path / "second-name.json")
    assert not loads(cache_home)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_a_file_or_folder_of_another_user_is_not_loaded(cache_home):
    grammar_cache.build(parser.grammar_text(), **build_options())
    path = cached_file(cache_home)
    os.chown(path, 65534, 65534)
    assert not loads(cache_home)
    os.chown(path, 0, 0)
    assert loads(cache_home)
    os.chown(path.parent, 65534, 65534)
    assert grammar_cache.cache_folder() is None
    os.chown(path.parent, 0, 0)
    os.chown(cache_home, 65534, 65534)  # a folder above it, owned by someone else
    assert grammar_cache.cache_folder() is None


@pytest.mark.parametrize("mode", [0o770, 0o722, 0o777])
def test_a_folder_others_can_write_is_not_used(cache_home, mode):
    folder = cache_home / "shapecheck"
    folder.mkdir(mode=0o700)
    folder.chmod(mode)
    assert grammar_cache.cache_folder() is None
    grammar_cache.build(parser.grammar_text(), **build_options())
    assert list(folder.iterdir()) == []  # nothing written there either


def test_a_folder_above_that_others_can_write_is_not_used(cache_home):
    cache_home.chmod(0o777)  # not sticky: anyone could swap the folder below it
    assert grammar_cache.cache_folder() is None
    cache_home.chmod(0o1777)  # sticky, as /tmp: others cannot rename what is ours
    assert grammar_cache.cache_folder() is not None


def test_a_symlinked_cache_folder_is_not_used(cache_home, tmp_path):
    target = tmp_path / "planted"
    target.mkdir(mode=0o700)
    (cache_home / "shapecheck").symlink_to(target)
    assert grammar_cache.cache_folder() is None


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_a_damaged_or_foreign_file_falls_back_to_analysing_the_grammar(cache_home):
    grammar_cache.build(parser.grammar_text(), **build_options())
    path = cached_file(cache_home)
    for content in (b"not json", b'{"key": "another", "data": {}, "memo": {}}', b"[1, 2]",
                    b'{"\\u0000i": [[[1], 2]]}', b'{"\\u0000i": 5}'):
        path.write_bytes(content)
        built = grammar_cache.build(parser.grammar_text(), **build_options())
        assert built.parse("dim N\n", start="file")


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_a_damaged_file_with_the_right_key_falls_back(cache_home):
    grammar_cache.build(parser.grammar_text(), **build_options())
    path = cached_file(cache_home)
    text = path.read_text()
    path.write_text(text.replace('"memo"', '"mem0"'))
    built = grammar_cache.build(parser.grammar_text(), **build_options())
    assert built.parse("dim N\n", start="file")


def test_verify_never_reads_larks_shared_temp_cache(tmp_path):
    """A file planted where Lark's cache=True looks (the shared temp folder) is ignored."""
    temp = tmp_path / "shared-tmp"
    temp.mkdir()
    marker = tmp_path / "ran"
    import pickle

    class Boom:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    for name in ("cache", "cache_grammar"):
        for suffix in range(3):
            (temp / f".lark_{name}_root_{suffix}.tmp").write_bytes(pickle.dumps(Boom()))
    environment = {**os.environ, "TMPDIR": str(temp), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    process = subprocess.run(
        [sys.executable, "-m", "shapecheck", "verify", str(ROOT / "examples" / "multi_head.attn")],
        capture_output=True, text=True, env=environment, check=False, timeout=120)
    assert process.returncode == 0, process.stderr
    assert not marker.exists()
    assert not [p for p in temp.iterdir() if not p.name.startswith(".lark_")]


def test_the_shipped_tables_are_this_grammars():
    """After an edit of grammar/attn.lark: `python tools/grammar_tables.py` (until then every
    start analyses the grammar or reads the per-user cache, ~10 ms slower)."""
    from shapecheck.syntax import grammar_tables

    options = parser.parser_options(parser.BracketNewlines())
    data_options = {k: v for k, v in options.items() if k not in grammar_cache._LOAD_OPTIONS}
    assert grammar_tables.KEY == grammar_cache.cache_key(parser.grammar_text(), data_options,
                                                         python=False), \
        "grammar/attn.lark changed: run `python tools/grammar_tables.py`"


def test_the_shipped_tables_parse_as_the_analysed_grammar():
    from shapecheck.syntax import grammar_tables

    options = parser.parser_options(parser.BracketNewlines())
    shipped = grammar_cache.from_tables(grammar_tables.KEY, grammar_tables.DATA,
                                        grammar_tables.memo, parser.grammar_text(),
                                        grammar_tables.states, grammar_tables.UNLESS,
                                        grammar_tables.PATTERNS, **options)
    assert shipped is not None
    fresh = lark.Lark(parser.grammar_text(), **parser.parser_options(parser.BracketNewlines()))
    # The states come built (issue 36): a parser of Lark's own class, whose table has the
    # analysis's states (numbered as each analysis numbers them: compared without the numbers).
    ours, theirs = shipped.parser.parser, fresh.parser.parser
    assert type(ours) is type(theirs)
    assert _rows(ours._parse_table.states) == _rows(theirs._parse_table.states)
    for path in sorted((ROOT / "examples").rglob("*.attn")) + sorted(
            (ROOT / "tests" / "cases").glob("*.attn"))[:40]:
        text = path.read_text(encoding="utf-8")
        assert _outcome(shipped, text) == _outcome(fresh, text), path
    # Another grammar (or Lark) never reads them.
    assert grammar_cache.from_tables(grammar_tables.KEY, grammar_tables.DATA, grammar_tables.memo,
                                     parser.grammar_text() + "\n", grammar_tables.states,
                                     **options) is None


def test_the_shipped_parsers_callbacks_are_larks_each_made_on_first_use():
    # Issue 36: a rule's callback is made when the parser first reduces by it, by Lark's own
    # ParseTreeBuilder; each one is the one Lark makes for all rules at once.
    from shapecheck.syntax import grammar_tables

    options = parser.parser_options(parser.BracketNewlines())
    shipped = grammar_cache.from_tables(grammar_tables.KEY, grammar_tables.DATA,
                                        grammar_tables.memo, parser.grammar_text(),
                                        grammar_tables.states, grammar_tables.UNLESS,
                                        grammar_tables.PATTERNS, **options)
    assert shipped is not None
    callbacks = shipped._callbacks

    def made() -> list:
        return [key for key in callbacks if isinstance(key, lark.grammar.Rule)]

    assert made() == [] and callbacks  # none yet, and the parser still sees callbacks
    shipped.parse((ROOT / "examples" / "multi_head.attn").read_text(encoding="utf-8"),
                  start="file")
    assert 0 < len(made()) < len(shipped.rules) // 2
    eager = copy.copy(shipped)
    lark.Lark._prepare_callbacks(eager)  # Lark's own: every rule's callback at once
    assert type(eager._callbacks) is dict and len(eager._callbacks) >= len(shipped.rules)
    eager = eager._callbacks
    assert all(_callback(callbacks[rule]) == _callback(eager[rule]) for rule in shipped.rules)
    assert len(made()) == len(shipped.rules)


def _callback(made: object) -> object:
    """What a callback does: its wrappers (Lark's classes, with their settings) down to the
    transformer's method or the tree's default, named."""
    if hasattr(made, "node_builder"):
        settings = {k: v for k, v in vars(made).items() if k != "node_builder"}
        return (type(made).__name__, repr(settings), _callback(made.node_builder))
    if hasattr(made, "func") and hasattr(made, "args"):  # a partial
        return ("partial", _callback(made.func), made.args)
    if hasattr(made, "__wrapped__"):
        return ("wraps", _callback(made.__wrapped__))
    return getattr(getattr(made, "__func__", made), "__qualname__", repr(made))


def _rows(states: dict) -> list:
    """Each state's actions without the states they go to: (token, Shift) or (token, rule)."""
    def rule(argument: lark.grammar.Rule) -> tuple:
        return (str(argument.origin.name), tuple(str(s.name) for s in argument.expansion),
                argument.order, argument.alias)

    return sorted(sorted((str(token), ("Shift",) if action.name == "Shift" else rule(argument))
                         for token, (action, argument) in row.items())
                  for row in states.values())


def _outcome(parser_: lark.Lark, text: str) -> tuple:
    try:
        return ("tree", parser_.parse(text, start="file"))
    except lark.exceptions.UnexpectedInput as error:  # the expected tokens are a set
        return ("error", type(error).__name__, error.line, error.column,
                sorted(getattr(error, "expected", None) or ()))
    except Exception as error:  # a misuse the transformer reports
        return ("error", type(error).__name__, str(error))


def test_verify_reads_the_shipped_tables_without_a_decoder(tmp_path):
    code = ("import sys; from shapecheck.cli import main\n"
            "try: main(['verify', sys.argv[1]])\nexcept SystemExit: pass\n"
            "assert 'json' not in sys.modules, 'json imported'\n"
            "from shapecheck.syntax import parser; import lark\n"
            "assert parser._parsers().lark.source_path == '<deserialized>'\n")
    environment = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "empty")}
    process = subprocess.run([sys.executable, "-c", code, str(ROOT / "examples" / "multi_head.attn")],
                             capture_output=True, text=True, env=environment, check=False,
                             timeout=120, cwd=ROOT)
    assert process.returncode == 0, process.stderr
    assert not (tmp_path / "empty" / "shapecheck").exists()  # nothing analysed, nothing cached


def test_the_symbols_built_in_one_call_are_the_memos_records():
    made, generic = grammar_cache.nonterminal("expr"), grammar_cache.built(
        lark.grammar.NonTerminal, {"name": "expr"})
    assert type(made) is type(generic) and made == generic and made.name == "expr"
    made, generic = grammar_cache.terminal("NAME", True), grammar_cache.built(
        lark.grammar.Terminal, {"name": "NAME", "filter_out": True})
    assert type(made) is type(generic) and made == generic
    assert (made.name, made.filter_out) == (generic.name, generic.filter_out) == ("NAME", True)


def test_the_shipped_tables_make_each_action_and_symbol_once():
    """Issue 36: an action (shift to a state, reduce by a rule) is one tuple however many
    states take it, and an equal symbol or rule option one object (nothing changes them):
    ~530 tuples instead of ~4,900 to make, keep and collect on every start."""
    from shapecheck.syntax import grammar_tables

    records = grammar_tables.memo()
    states = grammar_tables.states(records)
    actions = [action for row in states.values() for action in row.values()]
    distinct = {(kind.name, target if kind.name == "Shift" else id(target))
                for kind, target in actions}
    assert len({id(action) for action in actions}) == len(distinct) < len(actions) / 5
    rules = [r for r in records.values() if isinstance(r, lark.grammar.Rule)]
    symbols = [s for rule in rules for s in (rule.origin, *rule.expansion)]
    assert len({id(s) for s in symbols}) == len(
        {(type(s), s.name, getattr(s, "filter_out", None)) for s in symbols})
    assert len({id(rule.options) for rule in rules}) == len(
        {tuple(vars(rule.options).items()) for rule in rules})
    for rule in rules:  # as Lark's deserialiser makes them
        assert type(rule.expansion) is list
        assert hash(rule) == hash((rule.origin, tuple(rule.expansion)))


def _lexer(parser_: lark.Lark) -> lark.lexer.BasicLexer:
    return parser_.parser.lexer.lexer  # under the postlexer


def test_the_shipped_keyword_table_gives_larks_scanner(monkeypatch):
    """Issue 36: the lexer's keyword table (which keywords NAME also matches) ships with the
    tables instead of being searched for on every start; the scanner is the one Lark builds."""
    from shapecheck.syntax import grammar_tables

    options = parser.parser_options(parser.BracketNewlines())
    fresh = lark.Lark(parser.grammar_text(), **parser.parser_options(parser.BracketNewlines()))
    assert grammar_cache.unless_table(fresh) == grammar_tables.UNLESS

    def searched(*args: object) -> None:
        raise AssertionError("the keyword table was searched for")

    shipped = grammar_cache.from_tables(grammar_tables.KEY, grammar_tables.DATA,
                                        grammar_tables.memo, parser.grammar_text(),
                                        grammar_tables.states, grammar_tables.UNLESS, **options)
    assert shipped is not None
    monkeypatch.setattr(lark.lexer, "_create_unless", searched)
    ours = _lexer(shipped).scanner
    monkeypatch.undo()
    theirs = _lexer(fresh).scanner
    assert [m.pattern for m in ours._mres] == [m.pattern for m in theirs._mres]
    assert ours.allowed_types == theirs.allowed_types
    mine, larks = _lexer(shipped).callback, _lexer(fresh).callback
    assert list(mine) == list(larks) == ["NAME"]
    assert [m.pattern for m in mine["NAME"].scanner._mres] == [
        m.pattern for m in larks["NAME"].scanner._mres]
    text = "dim N\ninput X: [N, N]\nY = X @ X.T  # a keyword-like name: dimension\n"
    assert _outcome(shipped, text) == _outcome(fresh, text)


def _shipped_parser(patterns: object) -> lark.Lark:
    from shapecheck.syntax import grammar_tables

    options = parser.parser_options(parser.BracketNewlines())
    made = grammar_cache.from_tables(grammar_tables.KEY, grammar_tables.DATA, grammar_tables.memo,
                                     parser.grammar_text(), grammar_tables.states,
                                     grammar_tables.UNLESS, patterns, **options)
    assert made is not None
    return made


def test_the_scanners_patterns_ship_compiled_for_this_engine_only(monkeypatch):
    """Issue 36: the scanner's regular expressions ship compiled (the engine's code, read by
    the same engine only: another Python compiles them); each equals a fresh compile (a
    Pattern compares its text, flags and code)."""
    from shapecheck.syntax import grammar_tables

    engine, patterns = grammar_tables.PATTERNS
    # Another engine: the same patterns, compiled as Lark compiles them.
    other = _shipped_parser(((0, 0, 0, 0), patterns))
    assert {m.pattern for m in _lexer(other).scanner._mres} <= {text for text, _ in patterns}
    if engine != grammar_cache.sre_engine():
        pytest.skip("the tables' patterns were compiled by another Python (compiled afresh here)")
    fresh = lark.Lark(parser.grammar_text(), **parser.parser_options(parser.BracketNewlines()))
    assert grammar_cache.compiled_patterns(fresh) == grammar_tables.PATTERNS

    def compiled_again(*args: object, **kwargs: object) -> None:
        raise AssertionError("a pattern was compiled on the way")

    shipped = _shipped_parser(grammar_tables.PATTERNS)
    re.purge()  # a compile would otherwise be answered from re's cache
    monkeypatch.setattr(re._parser, "parse", compiled_again)
    ours = _lexer(shipped).scanner
    keywords = _lexer(shipped).callback["NAME"].scanner
    monkeypatch.undo()
    for made in (*ours._mres, *keywords._mres):
        again = re._compiler.compile(made.pattern, 0)
        assert made == again and made.groupindex == again.groupindex
        assert made.groups == again.groups and made.flags == again.flags
    text = (ROOT / "examples" / "multi_head.attn").read_text(encoding="utf-8")
    assert _outcome(shipped, text) == _outcome(fresh, text)
    assert [m.pattern for m in _lexer(other).scanner._mres] == [m.pattern for m in ours._mres]
