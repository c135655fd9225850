"""The language of every human-readable text: English (the default) or Chinese.

Every sentence shapecheck prints lives in a *table*: the code registry and its word tables
(:mod:`shapecheck.codes`), the report's templates (:mod:`shapecheck.report.templates`),
``run``'s messages (:mod:`shapecheck.backend.errors`), the formats' words
(:mod:`shapecheck.formats.common`) and the command line's own messages
(:mod:`shapecheck.cli`). A table is declared with its English text::

    NOTES = Table("codes", "NOTES", {"declared": "`{name}` is declared here as {shape}"})

and reads like a ``dict``; each lookup answers in the current language. The Chinese text of
table ``NOTES`` of group ``codes`` is the dict ``NOTES`` in :mod:`shapecheck.i18n.zh.codes`,
loaded only when Chinese is asked for. A key missing there falls back to English (and
``tests/test_i18n.py`` fails: every key of every table needs its translation, with the same
``{fields}``).

The language is chosen, most specific first, by :func:`use` / :func:`set_language` (the
command line's ``--lang``), then the environment variable ``SHAPECHECK_LANG``, then English.
It must be chosen *before* a spec is checked: a diagnostic's text is made when the
diagnostic is. Codes, JSON keys, severities, shapes and the spec's own names are never
translated.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from importlib import import_module
from types import ModuleType

__all__ = ["DEFAULT", "ENV", "LANGUAGES", "Table", "TABLES", "code_text", "current", "normalise",
           "set_language", "use"]

LANGUAGES: tuple[str, ...] = ("en", "zh")
DEFAULT = "en"
ENV = "SHAPECHECK_LANG"
#: The language tag of each language, for HTML's ``lang`` attribute.
TAGS: dict[str, str] = {"en": "en", "zh": "zh-CN"}

_chosen: ContextVar[str | None] = ContextVar("shapecheck_language", default=None)
_catalogues: dict[tuple[str, str], ModuleType | None] = {}

#: Every table, by (group, name): the completeness test walks them.
TABLES: dict[tuple[str, str], Table] = {}


def normalise(value: str) -> str | None:
    """``zh``, ``zh_CN``, ``zh-Hans``, ``zh_CN.UTF-8`` -> ``zh``; an unknown language -> None."""
    base = value.strip().lower().replace("_", "-").split(".")[0].split("-")[0]
    return base if base in LANGUAGES else None


def current() -> str:
    """The language texts are looked up in now."""
    chosen = _chosen.get()
    if chosen is not None:
        return chosen
    from_env = os.environ.get(ENV)
    if from_env:
        return normalise(from_env) or DEFAULT
    return DEFAULT


def set_language(language: str) -> Token[str | None]:
    """Choose the language for the rest of this context (the command line calls it once)."""
    found = normalise(language)
    if found is None:
        raise ValueError(f"unknown language {language!r}; expected one of {', '.join(LANGUAGES)}")
    return _chosen.set(found)


@contextmanager
def use(language: str) -> Iterator[None]:
    """Texts in ``language`` inside the ``with`` block::

        with i18n.use("zh"):
            program = check_text(source)   # its diagnostics are worded in Chinese
    """
    token = set_language(language)
    try:
        yield
    finally:
        _chosen.reset(token)


def catalogue(language: str, group: str) -> ModuleType | None:
    """The module holding ``group``'s tables in ``language`` (None for English)."""
    key = (language, group)
    if key not in _catalogues:
        _catalogues[key] = None if language == DEFAULT else \
            import_module(f"{__name__}.{language}.{group}")
    return _catalogues[key]


class Table(Mapping[str, str]):
    """A table of texts: English as given, other languages from their catalogue."""

    def __init__(self, group: str, name: str, english: dict[str, str]) -> None:
        self.group, self.name, self.english = group, name, english
        TABLES[(group, name)] = self

    def translation(self, language: str) -> Mapping[str, str]:
        module = catalogue(language, self.group)
        return self.english if module is None else getattr(module, self.name, {})

    def __getitem__(self, key: str) -> str:
        language = current()
        if language != DEFAULT:
            found = self.translation(language).get(key)
            if found is not None:
                return found
        return self.english[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.english)

    def __len__(self) -> int:
        return len(self.english)

    def __contains__(self, key: object) -> bool:
        return key in self.english

    def __repr__(self) -> str:
        return f"Table({self.group!r}, {self.name!r}, {len(self.english)} texts)"


def code_text(code_id: str, field: str, english: str) -> str:
    """A field of a registry code (``summary``, ``message``, ``what``, ...) in the current language."""
    language = current()
    if language == DEFAULT:
        return english
    module = catalogue(language, "codes")
    entry = getattr(module, "CODES", {}).get(code_id, {})
    return entry.get(field, english)
