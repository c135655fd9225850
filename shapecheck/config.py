"""Configuration, as ruff does it: ``[tool.shapecheck]`` in ``pyproject.toml``, or
``shapecheck.toml`` / ``.shapecheck.toml`` (same keys, at the top level).

One entry point, :class:`Finder`: ``Finder(...).settings_for(path)`` gives the
:class:`Settings` that apply to a spec file (or a folder), used alike by
``verify``, ``report``, ``run`` and the language server.

- **Discovery**: from the file's folder upward, the first folder that holds a
  configuration wins (the closest one; configurations are not merged). In one
  folder, ``.shapecheck.toml`` beats ``shapecheck.toml``, which beats a
  ``pyproject.toml`` -- and a ``pyproject.toml`` without ``[tool.shapecheck]`` is
  passed over. Nothing found: the defaults.
- ``--config FILE`` uses that file for every spec (relative patterns then count
  from the current folder, as in ruff); ``--config 'KEY = VALUE'`` overrides one
  key on top of whatever applies; ``--isolated`` ignores every configuration file.
- Command-line flags are a layer above the file: ``--select`` replaces the
  selection, ``--extend-select`` and ``--ignore`` add to it; ``--exclude``
  replaces ``exclude``, ``--extend-exclude`` adds; ``--strict``/``--no-strict`` set
  ``fail-on`` (``strict`` is its alias in a file too).
- **Rule selection** (ruff's rules): a selector is a code (``SC402``), a prefix
  (``SC4``) or ``ALL``. Within one layer the most specific selector that matches a
  code decides; on a tie, ``ignore`` wins. Only warnings and notes can be turned
  off: an error means the spec is not shape-correct, so a selector that could
  only ever turn off errors is a configuration error.

A bad configuration raises :class:`ConfigError`, whose text names the file, the
line and the key. Reading a configuration never imports more than ``tomllib``.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field, replace
from pathlib import Path
from typing import Any

from .i18n import Table
from .records import Record

CONFIG_NAMES: tuple[str, ...] = (".shapecheck.toml", "shapecheck.toml", "pyproject.toml")
SECTION = ("tool", "shapecheck")

#: Folders a walk never enters unless ``exclude`` is replaced (ruff's list, less what
#: only Python projects have).
DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".mypy_cache", ".nox",
    ".pants.d", ".pytest_cache", ".pytype", ".ruff_cache", ".svn", ".tox", ".venv",
    "__pypackages__", "_build", "buck-out", "dist", "node_modules", "site-packages", "venv",
)

_KEYS: tuple[str, ...] = ("select", "extend-select", "ignore", "fail-on", "strict", "exclude",
                          "extend-exclude", "per-file-ignores", "dims", "respect-gitignore",
                          "modules")

# What a bad configuration is told (the file, line and key come first: ConfigError).
MESSAGES: Table = Table("config", "MESSAGES", {
    "one_file": "only one configuration file can be given",
    "cannot_read": "cannot read the configuration: {reason}",
    "no_section": "has no [tool.shapecheck] table",
    "top_level": "in this file the settings stand at the top level, without a "
    "[tool.shapecheck] header",
    "not_toml": "not valid TOML: {error}",
    "not_inline": "`{item}` is neither a file nor a TOML `KEY = VALUE` pair ({error})",
    "unknown_key_close": "unknown key; did you mean `{close}`?",
    "not_modules": "`modules` lists Python targets: \"FILE.py:NAME\" or {{ target = "
    "\"FILE.py:NAME\", init = {{ NAME = SIZE, \"DIM\" or \"[SHAPE]\" }} }}, got {value}",
    "unknown_key": "unknown key; the keys are {keys}",
    "not_bool": "must be true or false, not {value}",
    "not_fail_on": "must be \"warning\" or \"error\", not {value}",
    "fail_on_and_strict": "`strict` is an alias of `fail-on`; give one of them",
    "not_strings": "must be a list of strings, not {value}",
    "not_table_ignores": "must be a table of pattern = [codes], not {value}",
    "not_table_dims": "must be a table of NAME = positive integer, not {value}",
    "not_dim_name": "is not a dim name",
    "not_positive": "must be a positive integer, not {value}",
    "a_table": "a table",
    "no_code": "`{selector}` matches no code (codes look like `SC402`; prefixes like `SC4` "
    "and `ALL` work too)",
    "is_error": "`{selector}` is an error, and errors cannot be ignored (only warnings and "
    "notes)",
    "only_errors": "`{selector}` matches only errors, and errors cannot be ignored (only "
    "warnings and notes)",
})
MAX_DIM_DIGITS = 18  # as `--dim`


class ConfigError(Exception):
    """A configuration that cannot be used: names the file, the line and the key."""

    def __init__(self, path: str | Path | None, message: str, *, key: str | None = None,
                 line: int | None = None) -> None:
        super().__init__(message)
        self.path, self.message, self.key, self.line = path, message, key, line

    def __str__(self) -> str:
        where = "--config" if self.path is None else str(self.path)
        if self.line is not None:
            where += f":{self.line}"
        key = f" `{self.key}`:" if self.key else ""
        return f"{where}:{key} {self.message}"


class Layer(Record, frozen=True):
    """One layer of rule selection: a configuration file's, or the command line's."""

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


class Settings(Record, frozen=True):
    """What applies to the specs below one configuration file (or the defaults).

    ``root`` is the folder relative patterns (``exclude``, ``per-file-ignores``)
    count from: the configuration file's folder.
    """

    root: Path
    file: Path | None = None
    layers: tuple[Layer, ...] = ()
    #: what fails `verify` (codes.FAIL_ON): any warning about the code, or errors only
    fail_on: str = "warning"
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    dims: Mapping[str, int] = field(default_factory=dict)
    respect_gitignore: bool = True
    #: Python targets `verify` traces (docs/torch.md): (target, its `--init` items), the
    #: target's file relative to ``root``
    modules: tuple[tuple[str, tuple[str, ...]], ...] = ()

    # --- what a command asks ---------------------------------------------------------

    def disabled(self, path: str | Path | None = None) -> frozenset[str]:
        """The codes (warnings and notes only) not reported for ``path``."""
        from .messages import codes

        off = _resolve(self.layers, codes.REGISTRY)
        if path is not None:
            relative = self._relative(Path(path))
            for pattern, selectors in self.per_file_ignores:
                if _matches(pattern, relative):
                    off |= {code for selector in selectors for code in _expand(selector, codes.REGISTRY)}
        return frozenset(code for code in off if not codes.REGISTRY[code].severity.value == "error")

    def modules_in(self, path: str | Path) -> list[tuple[str, tuple[str, ...]]]:
        """The configured Python targets (``modules``) whose file is ``path``, each named
        ``/absolute/model.py:Name``, with its ``--init`` items."""
        wanted = Path(path).resolve()
        found: list[tuple[str, tuple[str, ...]]] = []
        for target, init in self.modules:
            file, _, name = target.rpartition(":")
            if file.endswith(".py") and (self.root / file).resolve() == wanted:
                found.append((f"{wanted}:{name}", init))
        return found

    def is_excluded(self, path: Path, is_dir: bool) -> bool:
        """Whether a walk skips ``path`` (``exclude`` and ``extend-exclude``)."""
        patterns = self.exclude + self.extend_exclude
        if not patterns:
            return False
        if is_dir and path.name in patterns:  # the common case, without pathspec
            return True
        extra = [p for p in patterns if p not in DEFAULT_EXCLUDE]
        if not extra:
            return False
        return _matches_any(tuple(extra), self._relative(path) + ("/" if is_dir else ""))

    def _relative(self, path: Path) -> str:
        absolute = Path(os.path.abspath(path))
        try:
            return absolute.relative_to(self.root).as_posix()
        except ValueError:
            return absolute.name


class Overrides(Record, frozen=True):
    """The command line's layer: flags, and ``--config 'KEY = VALUE'`` pairs."""

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    fail_on: str | None = None  # --strict ("warning") / --no-strict ("error")
    inline: Mapping[str, Any] = field(default_factory=dict)  # validated `--config K=V` keys

    def apply(self, settings: Settings) -> Settings:
        if self.inline:  # each key replaces the file's value, `ignore = []` included
            settings = _with_keys(settings, self.inline, None, "", override=True)
        layers = settings.layers
        if self.select is not None or self.extend_select or self.ignore:
            layers = layers + (Layer(self.select, self.extend_select, self.ignore),)
        return replace(
            settings, layers=layers,
            fail_on=settings.fail_on if self.fail_on is None else self.fail_on,
            exclude=settings.exclude if self.exclude is None else self.exclude,
            extend_exclude=settings.extend_exclude + self.extend_exclude,
        )


class Finder:
    """Finds the settings for each spec, caching one answer per folder."""

    def __init__(self, *, config: Sequence[str] = (), isolated: bool = False,
                 overrides: Overrides | None = None, cwd: Path | None = None) -> None:
        self.cwd = Path(os.path.abspath(cwd or os.getcwd()))
        self.isolated = isolated
        self.overrides = overrides or Overrides()
        self._by_folder: dict[Path, Settings] = {}
        self._fixed: Settings | None = None
        files = [item for item in config if not _is_inline(item)]
        inline: dict[str, Any] = {}
        for item in config:
            if _is_inline(item):
                inline.update(parse_inline(item))
        if len(files) > 1:
            raise ConfigError(None, MESSAGES["one_file"])
        if inline:
            self.overrides = replace(self.overrides, inline={**self.overrides.inline, **inline})
        if files:
            self._fixed = load(Path(files[0]), root=self.cwd)
        elif isolated:
            self._fixed = Settings(root=self.cwd)

    def settings_for(self, path: str | Path) -> Settings:
        """The settings for a spec file or folder (``path`` need not exist)."""
        if self._fixed is not None:
            return self.overrides.apply(self._fixed)
        absolute = Path(os.path.abspath(path))
        folder = absolute if absolute.is_dir() else absolute.parent
        return self._for_folder(folder)

    def _for_folder(self, folder: Path) -> Settings:
        seen: list[Path] = []
        found: Settings | None = None
        for candidate in (folder, *folder.parents):
            if candidate in self._by_folder:
                found = self._by_folder[candidate]
                break
            seen.append(candidate)
            config = find_in(candidate)
            if config is not None:
                found = self.overrides.apply(load(config))
                break
        if found is None:
            found = self.overrides.apply(Settings(root=self.cwd))
        for candidate in seen:
            self._by_folder[candidate] = found
        return found


# --- finding and reading a file ---------------------------------------------------------


def find_in(folder: Path) -> Path | None:
    """The configuration file of ``folder`` itself, if it has one."""
    for name in CONFIG_NAMES:
        candidate = folder / name
        if not candidate.is_file():
            continue
        if name != "pyproject.toml" or _has_section(candidate):
            return candidate
    return None


def _has_section(pyproject: Path) -> bool:
    try:
        text = pyproject.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    if "shapecheck" not in text:  # the fast answer for almost every pyproject.toml
        return False
    if not _MAYBE_SECTION.search(text) and "\\u" not in text and "\\U" not in text:
        return False  # "shapecheck" only elsewhere (a dependency, a path): no need to parse
    return _section(_parse(pyproject, text)) is not None


# Where a `tool.shapecheck` table could start, however it is spelt: a header
# (`[tool.shapecheck]`, `[ "tool" . 'shapecheck' ]`, `[[tool.shapecheck.x]]`), a dotted key at
# the top (`tool.shapecheck.select = ...`), a `[tool]` table or a top-level `tool = {...}`
# (its keys may then be `shapecheck`). Only quoted keys with escapes (`"\u0074ool"`) can hide
# one otherwise, and the text is parsed when it has any.
_MAYBE_SECTION = re.compile(
    r"""^[ \t]*(?:\[\[?[ \t]*)?["']?tool["']?[ \t]*(?:\.[ \t]*["']?shapecheck|\]|=)""",
    re.MULTILINE)


def load(path: Path, *, root: Path | None = None) -> Settings:
    """Read one configuration file (``root``: where its relative patterns count from)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise ConfigError(path, MESSAGES["cannot_read"].format(reason=reason)) from None
    data = _parse(path, text)
    is_pyproject = path.name == "pyproject.toml"
    if is_pyproject:
        table = _section(data)
        if table is None:
            raise ConfigError(path, MESSAGES["no_section"])
    else:
        table = data
        if "tool" in table and isinstance(table["tool"], dict) and "shapecheck" in table["tool"]:
            raise ConfigError(path, MESSAGES["top_level"], key="tool",
                              line=_line_of(text, (), "tool"))
    base = Settings(root=root or Path(os.path.abspath(path)).parent, file=path)
    return _with_keys(base, table, path, text, prefix=SECTION if is_pyproject else ())


def _parse(path: Path, text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        line = getattr(error, "lineno", None)
        if line is None:
            found = re.search(r"at line (\d+)", str(error))
            line = int(found.group(1)) if found else None
        if line is None and "end of document" in str(error):
            line = max(1, len(text.splitlines()))
        raise ConfigError(path, MESSAGES["not_toml"].format(error=error), line=line) from None


def _section(data: dict[str, Any]) -> dict[str, Any] | None:
    tool = data.get("tool")
    if isinstance(tool, dict) and isinstance(tool.get("shapecheck"), dict):
        return tool["shapecheck"]
    return None


def _is_inline(item: str) -> bool:
    return "=" in item and not Path(item).exists()


def parse_inline(item: str) -> dict[str, Any]:
    """``--config 'select = ["SC4"]'``: one TOML key and value."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data = tomllib.loads(item)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(None, MESSAGES["not_inline"].format(item=item, error=error)) from None
    # `tool.shapecheck.select = [...]` is accepted as well as `select = [...]`.
    section = _section(data)
    return section if section is not None else data


# --- validating the keys -------------------------------------------------------------------


def _with_keys(settings: Settings, table: Mapping[str, Any], path: Path | None, text: str,
               prefix: tuple[str, ...] = (), *, override: bool = False) -> Settings:
    """``settings`` with the keys of ``table``; with ``override`` (``--config 'KEY =
    VALUE'``) a selection key replaces that key of the file's own layer instead of
    adding a layer on top of it."""
    def fail(key: str, message: str, table_path: tuple[str, ...] = ()) -> ConfigError:
        line = _line_of(text, prefix + table_path, key) if text else None
        return ConfigError(path, message, key=".".join(table_path + (key,)), line=line)

    for key in table:
        if key not in _KEYS:
            import difflib

            close = difflib.get_close_matches(key, list(_KEYS), n=1)
            raise fail(key, MESSAGES["unknown_key_close"].format(close=close[0]) if close else
                       MESSAGES["unknown_key"].format(keys=", ".join(f"`{k}`" for k in _KEYS)))
    changes: dict[str, Any] = {}
    select = extend = ignore = None
    for key, value in table.items():
        if key in ("select", "extend-select", "ignore"):
            selectors = _strings(value, fail, key)
            for selector in selectors:
                problem = selector_problem(selector, turning_off=key == "ignore")
                if problem:
                    raise fail(key, problem)
            if key == "select":
                select = selectors
            elif key == "extend-select":
                extend = selectors
            else:
                ignore = selectors
        elif key == "fail-on":
            from .messages.codes import FAIL_ON

            if value not in FAIL_ON:
                raise fail(key, MESSAGES["not_fail_on"].format(value=_show(value)))
            changes["fail_on"] = value
        elif key in ("strict", "respect-gitignore"):
            if not isinstance(value, bool):
                raise fail(key, MESSAGES["not_bool"].format(value=_show(value)))
            if key == "strict" and "fail-on" in table:
                raise fail(key, MESSAGES["fail_on_and_strict"])
            if key == "strict":  # the older spelling of `fail-on`
                changes["fail_on"] = "warning" if value else "error"
            else:
                changes["respect_gitignore"] = value
        elif key in ("exclude", "extend-exclude"):
            changes[key.replace("-", "_")] = _strings(value, fail, key)
        elif key == "per-file-ignores":
            changes["per_file_ignores"] = _per_file_ignores(value, fail)
        elif key == "dims":
            changes["dims"] = _dims(value, fail)
        elif key == "modules":
            changes["modules"] = _modules(value, fail)
    if select is not None or extend is not None or ignore is not None:
        changes["layers"] = _layers_with(settings.layers, select, extend, ignore, override)
    return replace(settings, **changes)


def _layers_with(layers: tuple[Layer, ...], select: tuple[str, ...] | None,
                 extend: tuple[str, ...] | None, ignore: tuple[str, ...] | None,
                 override: bool) -> tuple[Layer, ...]:
    if not override or not layers:
        return layers + (Layer(select, extend or (), ignore or ()),)
    file_layer = layers[-1]  # the configuration file's: the command line's come after
    return layers[:-1] + (Layer(
        file_layer.select if select is None else select,
        file_layer.extend_select if extend is None else extend,
        file_layer.ignore if ignore is None else ignore),)


def _strings(value: Any, fail: Any, key: str, table_path: tuple[str, ...] = ()) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise fail(key, MESSAGES["not_strings"].format(value=_show(value)), table_path)
    return tuple(value)


def _per_file_ignores(value: Any, fail: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise fail("per-file-ignores", MESSAGES["not_table_ignores"].format(value=_show(value)))
    entries = []
    for pattern, selectors in value.items():
        listed = _strings(selectors, fail, pattern, ("per-file-ignores",))
        for selector in listed:
            problem = selector_problem(selector, turning_off=True)
            if problem:
                raise fail(pattern, problem, ("per-file-ignores",))
        entries.append((pattern, listed))
    return tuple(entries)


def _modules(value: Any, fail: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``modules = ["model.py:make", {target = "model.py:Attention", init = {n_head = 4}}]``."""
    if not isinstance(value, list):
        raise fail("modules", MESSAGES["not_modules"].format(value=_show(value)))
    entries: list[tuple[str, tuple[str, ...]]] = []
    for item in value:
        if isinstance(item, str) and ":" in item:
            entries.append((item, ()))
            continue
        if not isinstance(item, dict) or not isinstance(item.get("target"), str) \
                or ":" not in item["target"] or set(item) - {"target", "init"}:
            raise fail("modules", MESSAGES["not_modules"].format(value=_show(item)))
        init = item.get("init", {})
        if not isinstance(init, dict) or not all(
                isinstance(v, str) and (_init_text(v) or v.startswith("[") and v.endswith("]"))
                or isinstance(v, int) and not isinstance(v, bool) and v > 0
                for v in init.values()):
            raise fail("modules", MESSAGES["not_modules"].format(value=_show(item)))
        entries.append((item["target"], tuple(f"{k}={v}" for k, v in init.items())))
    return tuple(entries)


def _init_text(text: str) -> bool:
    """A dim's name or size, with its convention after it if any (`"W window inclusive"`,
    docs/language.md §10.3)."""
    first, *words = text.split() or [""]
    return (first.isidentifier() or first.isdigit() and int(first) > 0) and \
        (not words or " ".join(words) in ("window inclusive", "window exclusive"))


def _dims(value: Any, fail: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        raise fail("dims", MESSAGES["not_table_dims"].format(value=_show(value)))
    dims: dict[str, int] = {}
    for name, size in value.items():
        if not name.isidentifier():
            raise fail(name, MESSAGES["not_dim_name"], ("dims",))
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0 \
                or len(str(size)) > MAX_DIM_DIGITS:
            raise fail(name, MESSAGES["not_positive"].format(value=_show(size)), ("dims",))
        dims[name] = size
    return dims


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dict):
        return MESSAGES["a_table"]
    return repr(value)


def _line_of(text: str, table: tuple[str, ...], key: str) -> int | None:
    """The line where ``key`` is set inside ``[table]`` (a best effort; TOML parsers
    keep no positions). Falls back to the table's header, or to the parent key that
    holds an inline table."""
    current: tuple[str, ...] = ()
    header: int | None = None
    parent_line: int | None = None
    key_re = re.compile(r'^\s*(?:"([^"]*)"|\'([^\']*)\'|([A-Za-z0-9_-]+))\s*(?:\.|=)')
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("["):
            current = _header_names(line)
            if current == table:
                header = number
            continue
        found = key_re.match(raw)
        if not found:
            continue
        name = next(group for group in found.groups() if group is not None)
        if current == table and name == key:
            return number
        if table and current == table[:-1] and name == table[-1]:
            parent_line = number  # `dims = {...}` or `dims.N = 0` in the parent table
    return parent_line or header


def _header_names(line: str) -> tuple[str, ...]:
    inner = line.strip("[] \t")
    inner = inner.split("#", 1)[0].strip().rstrip("]").strip()
    return tuple(part.strip().strip('"\'') for part in inner.split("."))


# --- rule selection ---------------------------------------------------------------------------


def selector_problem(selector: str, *, turning_off: bool) -> str | None:
    """Why ``selector`` cannot be used (None when it can)."""
    from .messages import codes

    matched = _expand(selector, codes.REGISTRY)
    if not matched:
        return MESSAGES["no_code"].format(selector=selector)
    if turning_off and all(codes.REGISTRY[code].severity.value == "error" for code in matched):
        return MESSAGES["is_error" if len(matched) == 1 else "only_errors"].format(selector=selector)
    return None


def _expand(selector: str, registry: Mapping[str, Any]) -> set[str]:
    selector = selector.strip().upper()
    if selector == "ALL":
        return set(registry)
    if not selector:
        return set()
    return {code for code in registry if code.startswith(selector)}


def _specificity(selector: str) -> int:
    selector = selector.strip().upper()
    return 0 if selector == "ALL" else len(selector)


def _resolve(layers: Iterable[Layer], registry: Mapping[str, Any]) -> set[str]:
    """The codes turned off after every layer (each code starts on)."""
    on = set(registry)
    for layer in layers:
        base = set() if layer.select is not None else on
        positives = (layer.select or ()) + layer.extend_select
        after = set()
        for code in registry:
            best_on = max((_specificity(s) for s in positives if code in _expand(s, registry)),
                          default=-1)
            best_off = max((_specificity(s) for s in layer.ignore if code in _expand(s, registry)),
                           default=-1)
            if best_on < 0 and best_off < 0:
                keep = code in base
            else:
                keep = best_on > best_off
            if keep:
                after.add(code)
        on = after
    return set(registry) - on


# --- patterns ----------------------------------------------------------------------------------

_SPECS: dict[tuple[str, ...], Any] = {}


def _matches_any(patterns: tuple[str, ...], relative: str) -> bool:
    """gitignore-style matching (as ruff's `exclude`): `name` anywhere, `dir/x.attn` from the root."""
    spec = _SPECS.get(patterns)
    if spec is None:
        import pathspec  # only when a configuration names patterns of its own

        spec = _SPECS[patterns] = pathspec.GitIgnoreSpec.from_lines(patterns)
    return bool(spec.match_file(relative))


def _matches(pattern: str, relative: str) -> bool:
    return _matches_any((pattern,), relative)


def default_bindings(defaults: Mapping[str, int], declared: Iterable[str]) -> dict[str, int]:
    """The configuration's ``[dims]`` that a spec declares (the others do not apply to it)."""
    names = set(declared)
    return {name: value for name, value in defaults.items() if name in names}
