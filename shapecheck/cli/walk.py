"""Which files a command checks: the paths named on the command line, and every
``*.attn`` below a named folder.

- A **file named on the command line is always checked**, whatever its name and
  whatever ``exclude`` or ``.gitignore`` say (as ruff and mypy do).
- A **folder** means every ``*.attn`` file below it, in sorted order, except what
  the settings' ``exclude``/``extend-exclude`` exclude (by default version-control
  and virtual-environment folders such as ``.git`` and ``.venv``) and what
  ``.gitignore`` files ignore (unless ``respect-gitignore = false``). The
  ``.gitignore`` files that count are those of the walked folders and of their
  parents up to the repository root (the folder that holds ``.git``; outside a
  repository, up to the file system's root), and the repository's
  ``.git/info/exclude``. Symbolic links to folders are not followed.
- A path that does not exist or cannot be listed is reported as a
  :class:`Target` with its ``problem`` (the command turns it into SC007).
- A file named twice (``verify specs specs/a.attn``) is checked once.

One entry point: :func:`targets`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..config import Finder
from ..records import Record

SPEC_SUFFIX = ".attn"
STDIN = "-"


class Target(Record, frozen=True):
    """One thing to check: a file (as named or as found), or a path that failed."""

    path: Path
    problem: OSError | None = None
    explicit: bool = False  # named on the command line


def targets(paths: Sequence[str], finder: Finder) -> list[Target]:
    """Every file to check, in order, each once; failed paths in place."""
    seen: set[Path] = set()
    found: list[Target] = []
    for raw in paths:
        for target in _expand(raw, finder):
            key = Path(os.path.realpath(target.path)) if target.problem is None else target.path
            if key in seen:
                continue
            seen.add(key)
            found.append(target)
    return found


def _expand(raw: str, finder: Finder) -> Iterator[Target]:
    path = Path(raw)
    try:
        is_dir = path.is_dir()
        if not is_dir:
            os.stat(path)  # a missing path raises here, with the system's reason
    except OSError as error:
        yield Target(path, error, explicit=True)
        return
    if not is_dir:
        yield Target(path, explicit=True)
        return
    settings = finder.settings_for(path)
    ignores = _parent_ignores(path) if settings.respect_gitignore else []
    yield from _walk(path, finder, ignores)


def _walk(folder: Path, finder: Finder, ignores: list[tuple[Path, Any]]) -> Iterator[Target]:
    settings = finder.settings_for(folder)
    if settings.respect_gitignore:
        own = _load_ignore(folder / ".gitignore")
        if own is not None:
            ignores = [*ignores, (Path(os.path.abspath(folder)), own)]
    try:
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError as error:
        yield Target(folder, error)
        return
    for entry in entries:
        path = folder / entry.name
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        if settings.is_excluded(path, is_dir):
            continue
        if ignores and settings.respect_gitignore and _ignored(path, is_dir, ignores):
            continue
        if is_dir:
            yield from _walk(path, finder, ignores)
        elif entry.name.endswith(SPEC_SUFFIX) and _is_file(entry):
            yield Target(path)


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()  # a symbolic link to a file counts
    except OSError:
        return False


# --- .gitignore ---------------------------------------------------------------------------


def repository_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` that holds ``.git``."""
    folder = Path(os.path.abspath(start))
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _parent_ignores(folder: Path) -> list[tuple[Path, Any]]:
    """The ignore files above ``folder`` (its own is read by the walk)."""
    absolute = Path(os.path.abspath(folder))
    root = repository_root(absolute)
    parents = list(absolute.parents)
    if root is not None:
        parents = [p for p in parents if p == root or root in p.parents]
    found: list[tuple[Path, Any]] = []
    if root is not None:
        info = _load_ignore(root / ".git" / "info" / "exclude")
        if info is not None:
            found.append((root, info))
    for parent in reversed(parents):
        spec = _load_ignore(parent / ".gitignore")
        if spec is not None:
            found.append((parent, spec))
    return found


def _load_ignore(path: Path) -> Any:
    try:
        if not path.is_file():
            return None
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    import pathspec  # only where a .gitignore exists

    return pathspec.GitIgnoreSpec.from_lines(lines)


def _ignored(path: Path, is_dir: bool, ignores: list[tuple[Path, Any]]) -> bool:
    """git's rule: the last matching pattern wins, deeper files after shallower ones."""
    absolute = Path(os.path.abspath(path))
    verdict: bool | None = None
    for base, spec in ignores:
        try:
            relative = absolute.relative_to(base).as_posix()
        except ValueError:
            continue
        result = spec.check_file(relative + "/" if is_dir else relative)
        if result.include is not None:
            verdict = result.include
    return bool(verdict)
