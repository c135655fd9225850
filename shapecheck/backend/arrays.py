"""Arrays from ``.npy`` and ``.npz`` files, known by their headers before a byte is read.

:func:`open_npy` and :func:`open_npz` read only the headers (shape, element type,
byte order) and the sizes the files and the zip directory declare; an
:class:`ArrayFile` holds that, and reads its data only when :meth:`ArrayFile.read`
is called. So the run binds its dims and checks its memory estimate first, and a
zip bomb, or a member whose header claims a shape of 10**12, is refused before it
is decompressed. Files are opened through :mod:`shapecheck.fileio` (regular files
only, never blocking on a FIFO) and never unpickled: a header whose element type
holds Python objects is refused.
"""

from __future__ import annotations

import math
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Union

import numpy as np

from .. import fileio
from .errors import InputError, RunError, message

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK"
CHUNK = 1 << 20  # bytes decompressed at a time: reading a member allocates only its array
MAX_MEMBERS = 10_000

PathLike = Union[str, Path]


class UnreadableFile(RunError):
    """A file named on the command line cannot be read at all (exit 2, as for `verify`)."""

    exit_code = 2


@dataclass(frozen=True)
class ArrayFile:
    """An array in a file: its shape and element type from the header; data on :meth:`read`."""

    origin: str  # `x.npy` or `arrays.npz[X]`, for messages
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    mapped: bool  # a .npy, memory-mapped; an .npz member is decompressed into memory
    _read: Callable[[], np.ndarray]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def read(self) -> np.ndarray:
        """The data (a ``.npy`` is memory-mapped; an ``.npz`` member is decompressed)."""
        return self._read()


# --- .npy ------------------------------------------------------------------------------------


def open_npy(path: PathLike) -> ArrayFile:
    """A ``.npy`` file by its header; its data is memory-mapped on :meth:`ArrayFile.read`."""
    with _open(path) as handle:
        head = handle.read(len(NPY_MAGIC))
        if not head.startswith(NPY_MAGIC):
            reason = message("npz_not_npy") if head.startswith(ZIP_MAGIC) else message("no_magic")
            raise InputError(message("not_npy", path=path, reason=reason))
        handle.seek(0)
        shape, fortran, dtype = _header(handle, str(path), lambda e: _not_npy(path, e))
        offset = handle.tell()
        size = _file_size(handle)
    nbytes = math.prod(shape) * dtype.itemsize
    if size < offset + nbytes:
        raise InputError(message("not_npy", path=path, reason=message("truncated")))

    def read() -> np.ndarray:
        if nbytes == 0:
            return np.empty(shape, dtype=dtype, order="F" if fortran else "C")
        with _open(path) as again:  # the file may have changed since its header was read
            if _file_size(again) < offset + nbytes:
                raise InputError(message("not_npy", path=path, reason=message("truncated")))
            try:
                return np.memmap(again, dtype=dtype, mode="r", offset=offset, shape=shape,
                                 order="F" if fortran else "C")
            except (OSError, ValueError) as error:
                raise InputError(message("not_npy", path=path, reason=error)) from None

    return ArrayFile(str(path), shape, dtype, fortran, True, read)


# --- .npz ------------------------------------------------------------------------------------


def open_npz(path: PathLike) -> dict[str, ArrayFile]:
    """Every member of a ``.npz`` archive by key, known by its header only.

    The zip directory gives each member's uncompressed size and the first bytes
    its header; a member shorter than its header says is refused here, before
    anything is decompressed.
    """
    with _open(path) as handle:
        head = handle.read(len(NPY_MAGIC))
    if not head.startswith(ZIP_MAGIC):
        reason = message("npy_not_npz") if head.startswith(NPY_MAGIC) else message("no_magic")
        raise InputError(message("not_npz", path=path, reason=reason))
    try:
        with _open(path) as handle, zipfile.ZipFile(handle) as archive:
            members = archive.infolist()
            if len(members) > MAX_MEMBERS:
                raise InputError(message("not_npz", path=path, reason=message(
                    "npz_members", count=len(members), limit=MAX_MEMBERS)))
            return {key: _member(path, archive, info, key) for key, info in _keys(path, members)}
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, zlib.error,
            NotImplementedError, ValueError) as error:
        raise InputError(message("not_npz", path=path, reason=error)) from None


def _keys(path: PathLike, members: list[zipfile.ZipInfo]) -> list[tuple[str, zipfile.ZipInfo]]:
    keys: list[tuple[str, zipfile.ZipInfo]] = []
    seen: set[str] = set()
    for info in members:
        if info.is_dir():
            continue
        key = info.filename.removesuffix(".npy")
        if key == info.filename:
            raise InputError(message("npz_key", path=path, key=info.filename,
                                     reason=message("npz_not_array")))
        if key in seen:
            raise InputError(message("npz_key", path=path, key=key, reason=message("npz_twice")))
        seen.add(key)
        keys.append((key, info))
    return keys


def _member(path: PathLike, archive: zipfile.ZipFile, info: zipfile.ZipInfo,
            key: str) -> ArrayFile:
    origin = message("npz_member", path=path, key=key)

    def refuse(reason: object) -> InputError:
        return InputError(message("npz_key", path=path, key=key, reason=reason))

    with archive.open(info) as stream:
        shape, fortran, dtype = _header(stream, origin, refuse)
        offset = stream.tell()
    nbytes = math.prod(shape) * dtype.itemsize
    if info.file_size < offset + nbytes:
        raise refuse(message("truncated"))

    def read() -> np.ndarray:
        try:
            with _open(path) as handle, zipfile.ZipFile(handle) as again, \
                    again.open(info.filename) as stream:
                stream.read(offset)
                return _read_into(stream, shape, dtype, fortran, refuse)
        except (zipfile.BadZipFile, EOFError, zlib.error, ValueError) as error:
            raise refuse(error) from None

    return ArrayFile(origin, shape, dtype, fortran, False, read)


def _read_into(stream: BinaryIO, shape: tuple[int, ...], dtype: np.dtype, fortran: bool,
               refuse: Callable[[object], InputError]) -> np.ndarray:
    """Decompress straight into the array's memory, a chunk at a time (no second copy)."""
    size = math.prod(shape) * dtype.itemsize
    raw = np.empty(size, dtype=np.uint8)
    view = memoryview(raw)
    position = 0
    while position < size:
        chunk = stream.read(min(CHUNK, size - position))
        if not chunk:
            raise refuse(message("truncated"))
        view[position:position + len(chunk)] = chunk
        position += len(chunk)
    if dtype.itemsize == 0:
        return np.empty(shape, dtype=dtype)
    return raw.view(dtype).reshape(shape, order="F" if fortran else "C")


# --- headers ---------------------------------------------------------------------------------


def _header(stream: BinaryIO, origin: str,
            refuse: Callable[[object], InputError]) -> tuple[tuple[int, ...], bool, np.dtype]:
    """Shape, Fortran order and element type from a NumPy header (never unpickles)."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(stream)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = fmt.read_array_header_2_0(stream)
        else:
            raise ValueError(f"unknown format version {version}")
    except (ValueError, EOFError, SyntaxError, TypeError, OverflowError, MemoryError,
            RecursionError) as error:
        raise refuse(error) from None
    except OSError as error:
        raise refuse(error.strerror or error) from None
    if dtype.hasobject:
        raise InputError(message("pickled", path=origin))
    if any(size < 0 for size in shape):
        raise refuse(message("negative_shape", shape=shape))
    return tuple(int(size) for size in shape), bool(fortran), dtype


def _not_npy(path: PathLike, reason: object) -> InputError:
    return InputError(message("not_npy", path=path, reason=reason))


def _file_size(handle: BinaryIO) -> int:
    handle.seek(0, 2)
    return handle.tell()


def _open(path: PathLike) -> BinaryIO:
    try:
        return fileio.open_regular(path)
    except FileNotFoundError:
        raise UnreadableFile(message("no_file", path=path)) from None
    except OSError as error:
        raise UnreadableFile(message("unreadable", path=path,
                                     reason=error.strerror or error)) from None


__all__ = ["ArrayFile", "UnreadableFile", "open_npy", "open_npz"]


def save_npz(path: str, arrays: dict[str, np.ndarray], protect: list[tuple[str, str]]) -> None:
    """The archive, whole or not at all (fileio: a fresh temporary, then a rename)."""
    try:
        fileio.write_atomic(path, lambda handle: np.savez(handle, **arrays), protect=protect)
    except OSError as error:
        raise UnreadableFile(message("cannot_write", path=path,
                                     reason=error.strerror or error)) from None
