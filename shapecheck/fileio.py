"""Safe reads and atomic writes: every command reads and writes files through here.

Reading (:func:`read_bytes`, :func:`open_regular`): regular files only. The file
is opened without blocking and checked with ``fstat`` on the open descriptor, so a
FIFO, a device or a folder is a clear error (:class:`NotRegularFile`), never a hang
and never an endless read of ``/dev/zero``.

Writing (:func:`write_atomic`): the content goes to a fresh temporary file beside
the target, with an unpredictable name, created exclusively (``O_EXCL`` and
``O_NOFOLLOW``: never through a planted symlink), flushed to disk, then renamed
over the target. So the target is whole or untouched, and concurrent writers leave
one complete file (the last rename wins). Refused before anything is written
(:class:`UnsafeWrite`): an empty path, a missing folder, a target that is a folder,
a device, a FIFO or a socket, and a target that is one of the ``protect``-ed files
(the spec, the input arrays). A symlink at the target is replaced by the new file,
unless ``follow_symlinks``: then the file it points to is replaced, in its own
folder (what an editor's "fix" wants). The new file gets the usual permissions
(0666 minus the umask), or with ``keep_mode`` those of the file it replaces.

Every error is an :class:`OSError` whose ``strerror`` says what is wrong in words,
so callers print ``cannot write PATH: {error.strerror}``. This module imports only
the standard library's lightest parts: ``verify`` loads it on every start.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Union

from .i18n import Table

if TYPE_CHECKING:  # annotations only (typing's Union and its forward reference cost ~1M
    # instructions of every start, issue 36)
    PathLike = Union[str, "os.PathLike[str]"]
    Protected = Union[PathLike, tuple[PathLike, str]]  # a path, or (path, what it is)
    Content = Union[bytes, str, Callable[[BinaryIO], None]]

MESSAGES: Table = Table("fileio", "MESSAGES", {
    "fifo": "not a regular file (a FIFO)",
    "char_device": "not a regular file (a character device)",
    "block_device": "not a regular file (a block device)",
    "socket": "not a regular file (a socket)",
    "folder": "is a folder",
    "other": "not a regular file",
    "empty": "the path is empty",
    "no_folder": "its folder does not exist",
    "protected": "it is {what}, which would be overwritten",
    "symlink_loop": "the symlink does not lead to a file",
    "no_temporary": "no unused temporary name",
})

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_NOCTTY = getattr(os, "O_NOCTTY", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation
_TEMPORARY_ATTEMPTS = 100


class NotRegularFile(OSError):
    """A path that names a FIFO, a device, a socket or a folder, where a file was expected."""


class UnsafeWrite(OSError):
    """A write refused before anything was written (see the module's rules)."""


def _error(kind: type[OSError], code: int, key: str, path: PathLike, **fields: str) -> OSError:
    return kind(code, MESSAGES[key].format(**fields), os.fspath(path))


def _kind_of(mode: int) -> str | None:
    """The message key for what a non-regular file is; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISCHR(mode):
        return "char_device"
    if stat.S_ISBLK(mode):
        return "block_device"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "other"


# --- reading ---------------------------------------------------------------------------


def open_regular(path: PathLike) -> BinaryIO:
    """Open a regular file for reading (binary); anything else raises :class:`NotRegularFile`.

    Never blocks: the file is opened with ``O_NONBLOCK`` (a FIFO without a writer
    opens at once) and checked with ``fstat`` before a byte is read.
    """
    if not os.fspath(path):
        raise _error(FileNotFoundError, errno.ENOENT, "empty", path)
    descriptor = os.open(path, os.O_RDONLY | _O_NONBLOCK | _O_NOCTTY | _O_CLOEXEC | _O_BINARY)
    try:
        kind = _kind_of(os.fstat(descriptor).st_mode)
        if kind is not None:
            code = errno.EISDIR if kind == "folder" else errno.EINVAL
            raise _error(IsADirectoryError if kind == "folder" else NotRegularFile, code, kind,
                         path)
        if _O_NONBLOCK and hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_bytes(path: PathLike) -> bytes:
    """The whole content of a regular file (see :func:`open_regular`)."""
    with open_regular(path) as handle:
        return handle.read()


# --- writing ---------------------------------------------------------------------------


def check_target(path: PathLike, *, protect: Iterable[Protected] = (),
                 follow_symlinks: bool = False) -> Path:
    """Check that ``path`` may be written; returns the path that will be replaced.

    Call it before long work, so that a bad output path is refused before the
    work is done; :func:`write_atomic` checks again when it writes.
    """
    text = os.fspath(path)
    if not text:
        raise _error(UnsafeWrite, errno.EINVAL, "empty", text)
    target = Path(text)
    if follow_symlinks:
        target = _resolve_link(target)
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISLNK(info.st_mode):
        kind = _kind_of(info.st_mode)
        if kind is not None:
            raise _error(UnsafeWrite, errno.EISDIR if kind == "folder" else errno.EINVAL, kind,
                         text)
        for protected, what in _protected(protect):
            if (info.st_dev, info.st_ino) == protected:
                raise _error(UnsafeWrite, errno.EEXIST, "protected", text, what=what)
    folder = target.parent
    if not folder.is_dir():
        raise _error(UnsafeWrite, errno.ENOENT, "no_folder", text)
    return target


def _resolve_link(target: Path) -> Path:
    """Follow a chain of symlinks at ``target`` to the path they finally name."""
    for _ in range(40):  # as the kernel's limit on nested links
        try:
            if not stat.S_ISLNK(os.lstat(target).st_mode):
                return target
        except FileNotFoundError:
            return target
        link = Path(os.readlink(target))
        target = link if link.is_absolute() else target.parent / link
    raise _error(UnsafeWrite, errno.ELOOP, "symlink_loop", target)


def _protected(protect: Iterable[Protected]) -> Iterable[tuple[tuple[int, int], str]]:
    for item in protect:
        path, what = item if isinstance(item, tuple) else (item, "the spec")
        try:
            info = os.stat(path)
        except OSError:
            continue
        yield (info.st_dev, info.st_ino), what


def write_atomic(path: PathLike, content: Content, *, protect: Iterable[Protected] = (),
                 keep_mode: bool = False, follow_symlinks: bool = False,
                 mode: int | None = None) -> Path:
    """Write ``content`` to ``path`` whole or not at all; returns the path written.

    ``content`` is bytes, text (written as UTF-8 with ``\\n`` line ends) or a
    function that writes to the open binary file. ``protect`` lists files that must
    never be replaced (a path, or a ``(path, description)`` pair for the message).
    ``keep_mode``: the new file takes the mode of the file it replaces.
    ``follow_symlinks``: a symlink at ``path`` is followed and its target replaced.
    ``mode``: the new file's mode, instead of 0666 minus the umask (0600: private).
    Raises :class:`OSError` (an :class:`UnsafeWrite` for a refused target); the
    old file, if any, is then untouched and no temporary file is left behind.
    """
    protect = list(protect)
    target = check_target(path, protect=protect, follow_symlinks=follow_symlinks)
    if mode is None:
        mode = _new_mode(target, keep_mode)
    descriptor, temporary = _create_temporary(target)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            if callable(content):
                content(handle)
            else:
                handle.write(content.encode("utf-8") if isinstance(content, str) else content)
            handle.flush()
            os.fsync(handle.fileno())
            os.chmod(handle.fileno(), mode)
        # Checked again just before the rename: the target may have changed meanwhile.
        check_target(target, protect=protect)
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    return target


def _create_temporary(target: Path) -> tuple[int, Path]:
    """A new file beside ``target``: an unpredictable name, created exclusively, 0600."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC | _O_BINARY
    for _ in range(_TEMPORARY_ATTEMPTS):
        name = f".{target.name}.{os.urandom(8).hex()}.tmp"
        temporary = target.with_name(name)
        try:
            return os.open(temporary, flags, 0o600), temporary
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, MESSAGES["no_temporary"], os.fspath(target))


def _new_mode(target: Path, keep_mode: bool) -> int:
    if keep_mode:
        try:
            return stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            pass
    return 0o666 & ~_umask()


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


__all__ = ["NotRegularFile", "UnsafeWrite", "check_target", "open_regular", "read_bytes",
           "write_atomic"]
