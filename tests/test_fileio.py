"""shapecheck.fileio: regular files only on reading; atomic, safe writes (issue 7)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from shapecheck import fileio
from shapecheck.fileio import NotRegularFile, UnsafeWrite, read_bytes, write_atomic

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "single_head.attn"


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_reads_a_regular_file(tmp_path):
    path = tmp_path / "a.attn"
    path.write_bytes(b"dim N\n")
    assert read_bytes(path) == b"dim N\n"


def test_a_fifo_is_refused_at_once_never_a_hang(tmp_path):
    fifo = tmp_path / "pipe.attn"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFile, match="a FIFO"):
        read_bytes(fifo)


@pytest.mark.parametrize("device, what", [("/dev/zero", "character device"),
                                          ("/dev/null", "character device")])
def test_a_device_is_refused(device, what):
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    with pytest.raises(NotRegularFile, match=what):
        read_bytes(device)


def test_a_folder_is_refused(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a folder"):
        read_bytes(tmp_path)


@pytest.mark.slow
def test_verify_of_a_fifo_exits_2_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.attn"
    os.mkfifo(fifo)
    process = subprocess.run([sys.executable, "-m", "shapecheck", "verify", str(fifo)],
                             capture_output=True, text=True, timeout=60, check=False)
    assert process.returncode == 2
    assert "not a regular file" in process.stdout + process.stderr


def test_write_replaces_whole_with_the_usual_mode(tmp_path):
    target = tmp_path / "out.md"
    target.write_text("old")
    write_atomic(target, "new")
    assert target.read_text() == "new" and leftovers(tmp_path) == []
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask


def test_keep_mode_keeps_the_replaced_files_mode(tmp_path):
    target = tmp_path / "spec.attn"
    target.write_text("old")
    target.chmod(0o640)
    write_atomic(target, b"new", keep_mode=True)
    assert stat.S_IMODE(target.stat().st_mode) == 0o640 and target.read_text() == "new"


def test_a_symlink_at_the_target_is_replaced_not_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = tmp_path / "out.md"
    link.symlink_to(victim)
    write_atomic(link, "report")
    assert victim.read_text() == "precious"
    assert not link.is_symlink() and link.read_text() == "report"


def test_follow_symlinks_writes_the_file_the_link_names(tmp_path):
    real = tmp_path / "real.attn"
    real.write_text("old")
    real.chmod(0o600)
    link = tmp_path / "link.attn"
    link.symlink_to(real.name)
    written = write_atomic(link, "fixed", follow_symlinks=True, keep_mode=True)
    assert written == real and link.is_symlink() and real.read_text() == "fixed"
    assert stat.S_IMODE(real.stat().st_mode) == 0o600


def test_a_symlink_planted_at_any_temporary_name_is_never_followed(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    target = tmp_path / "out.npz"
    first, second = b"\x01" * 8, b"\x02" * 8
    names = iter([first, second])
    # The first name drawn is taken by a planted symlink: it is skipped, never opened.
    (tmp_path / f".out.npz.{first.hex()}.tmp").symlink_to(victim)
    monkeypatch.setattr(fileio.os, "urandom", lambda n: next(names))
    write_atomic(target, b"data")
    assert victim.read_text() == "precious" and target.read_bytes() == b"data"
    monkeypatch.undo()
    # The old fixed name of `run --save` is no longer used at all.
    (tmp_path / ".other.npz.partial").symlink_to(victim)
    write_atomic(tmp_path / "other.npz", b"data")
    assert victim.read_text() == "precious"


@pytest.mark.parametrize("make, message", [
    (lambda p: os.mkfifo(p), "a FIFO"),
    (lambda p: p.mkdir(), "is a folder"),
])
def test_a_fifo_or_folder_target_is_refused(tmp_path, make, message):
    target = tmp_path / "out.md"
    make(target)
    with pytest.raises(UnsafeWrite, match=message):
        write_atomic(target, "x")
    assert leftovers(tmp_path) == []


def test_a_device_target_is_refused():
    with pytest.raises(UnsafeWrite, match="character device"):
        write_atomic("/dev/null", "x")


def test_empty_path_missing_folder_and_protected_files(tmp_path):
    with pytest.raises(UnsafeWrite, match="the path is empty"):
        write_atomic("", "x")
    with pytest.raises(UnsafeWrite, match="its folder does not exist"):
        write_atomic(tmp_path / "missing" / "out.md", "x")
    spec = tmp_path / "model.attn"
    spec.write_text("dim N\n")
    hard = tmp_path / "hard.npz"
    os.link(spec, hard)
    for target in (spec, hard):
        with pytest.raises(UnsafeWrite, match="the spec"):
            write_atomic(target, "x", protect=[spec])
    assert spec.read_text() == "dim N\n"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.md"
    target.write_text("old")

    def broken(handle):
        handle.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        write_atomic(target, broken)
    assert target.read_text() == "old" and leftovers(tmp_path) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_an_os_error(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(PermissionError):
            write_atomic(folder / "out.md", "x")
    finally:
        folder.chmod(0o755)


def test_a_folder_that_cannot_hold_files_is_an_os_error():
    # /proc refuses new files even for root: the error is an OSError, with no temporary left.
    with pytest.raises(OSError):
        write_atomic("/proc/shapecheck-test.npz", b"x")


WRITER = """
import sys
from shapecheck.fileio import write_atomic
index, target = int(sys.argv[1]), sys.argv[2]
payload = bytes([65 + index]) * 2_000_000
for _ in range(5):
    write_atomic(target, payload)
"""


def test_concurrent_writers_leave_one_complete_file(tmp_path):
    target = tmp_path / "out.bin"
    processes = [subprocess.Popen([sys.executable, "-c", WRITER, str(i), str(target)])
                 for i in range(6)]
    assert all(p.wait(timeout=120) == 0 for p in processes)
    data = target.read_bytes()
    assert len(data) == 2_000_000 and len(set(data)) == 1
    assert leftovers(tmp_path) == []
