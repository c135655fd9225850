"""The cyclic collector of a process that runs one command (issue 36 item 4, cli/collector.py).

The console script and ``python -m shapecheck`` own their process: what `import torch` made
is frozen before a Python target is traced, and what is left is frozen before the exit (a
spec's `verify` freezes nothing). A program or a test that calls ``main(argv)`` keeps its
collector as it was.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shapecheck.cli import collector, main

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "causal.attn"

# prints, at the very end of the process, whether anything was frozen
_AT_EXIT = ("import atexit, gc, sys\n"
            "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
            "from shapecheck.cli import main\n")


def _last_line(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_the_console_script_on_a_spec_freezes_nothing() -> None:
    # main() reads sys.argv: the process is the command's own, but it traced no module
    code = _AT_EXIT + f"sys.argv = ['shapecheck', 'verify', {str(SPEC)!r}]\nmain()\n"
    assert _last_line(code) == "frozen False"


def test_a_caller_of_main_keeps_its_collector() -> None:
    code = _AT_EXIT + f"try:\n    main(['verify', {str(SPEC)!r}])\nexcept SystemExit:\n    pass\n"
    assert _last_line(code) == "frozen False"


_PARSER_AT_EXIT = ("import atexit, sys\n"
                   "atexit.register(lambda: print('parser', sys.modules['shapecheck.syntax.parser']"
                   "._parsers.cache_info().currsize))\n"
                   "from shapecheck.cli import main\n")


def test_the_console_script_lets_its_parser_go_before_the_exit() -> None:
    # Issue 36 item 1: freed by reference counts, not walked by the exit's collections.
    code = _PARSER_AT_EXIT + f"sys.argv = ['shapecheck', 'verify', {str(SPEC)!r}]\nmain()\n"
    assert _last_line(code) == "parser 0"


def test_a_caller_of_main_keeps_its_parser() -> None:
    code = (_PARSER_AT_EXIT
            + f"try:\n    main(['verify', {str(SPEC)!r}])\nexcept SystemExit:\n    pass\n")
    assert _last_line(code) == "parser 1"


def test_main_in_this_process_freezes_nothing() -> None:
    before = gc.get_freeze_count()
    with pytest.raises(SystemExit) as done:
        main(["verify", str(SPEC)])
    assert done.value.code == 0
    assert gc.get_freeze_count() <= before  # frozen objects may still be freed; none added
    assert not collector.owned()


def test_torch_is_frozen_once_in_an_owned_process(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setattr(collector, "_owned", False)
    monkeypatch.setattr(collector, "_torch_frozen", False)
    before = gc.get_freeze_count()
    collector.torch_frozen()  # not owned: nothing
    collector.before_exit()
    assert gc.get_freeze_count() <= before  # frozen objects may still be freed; none added
    collector.own_process()
    try:
        collector.before_exit()  # owned, but no Python target traced: as a spec's verify
        assert gc.get_freeze_count() <= before
        collector.torch_frozen()
        frozen = gc.get_freeze_count()
        assert frozen > before and "torch" in sys.modules
        kept = [[] for _ in range(1000)]  # made after: a second target's leftovers
        collector.torch_frozen()  # once per process: what the first target left is not frozen
        assert gc.get_freeze_count() <= frozen
        collector.before_exit()  # the exit: now what is left is frozen too
        assert gc.get_freeze_count() > frozen + len(kept) // 2
        del kept
    finally:
        gc.unfreeze()
