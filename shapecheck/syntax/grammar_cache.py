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
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import lark
from lark import Lark

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


def cache_key(grammar: str, options: dict[str, Any]) -> str:
    text = "\0".join([str(FORMAT), grammar, repr(sorted(options.items())), lark.__version__,
                      sys.version.split()[0]])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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
        content = json.loads(text, object_hook=_decode)
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
        data, memo = parser.memo_serialize([lark.lexer.TerminalDef, lark.grammar.Rule])
        data["options"] = {k: v for k, v in data["options"].items() if k not in _LOAD_OPTIONS}
        text = json.dumps(_encode({"key": key, "data": data, "memo": memo}),
                          separators=(",", ":"))
        write_atomic(path, text, mode=0o600)
    except (OSError, TypeError, ValueError, AttributeError):
        pass


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


__all__ = ["build", "cache_folder", "cache_key", "read", "trusted_folder", "write"]
