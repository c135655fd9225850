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


# Records each pause of the collector and its resumption: whether SymPy, Lark and shapecheck's
# symbolic package (SymPy's door) were imported when it was paused, and the loader then and
# when it resumed.
_PAUSES = ("import gc, sys\n"
           "events = []\n"
           "disable, enable = gc.disable, gc.enable\n"
           "def noting_disable():\n"
           "    floor = all(m in sys.modules for m in ('sympy', 'lark', 'shapecheck.symbolic'))\n"
           "    events.append(('off', floor, 'shapecheck.loader' in sys.modules))\n"
           "    disable()\n"
           "def noting_enable():\n"
           "    events.append(('on', 'shapecheck.loader' in sys.modules))\n"
           "    enable()\n"
           "gc.disable, gc.enable = noting_disable, noting_enable\n"
           "from shapecheck.cli import main\n")
_SHOW = "\nprint(events[:2], gc.isenabled())\n"


def test_the_console_script_imports_its_pipeline_with_the_collector_paused() -> None:
    # Issue 36 item 1: paused after SymPy, Lark and the symbolic package are imported (as the
    # floor imports them, with the collector running), before the loader; running again
    # once the loader is imported.
    code = (_PAUSES + f"sys.argv = ['shapecheck', 'verify', {str(SPEC)!r}]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n" + _SHOW)
    assert _last_line(code) == "[('off', True, False), ('on', True)] True"


def test_a_caller_of_main_imports_the_pipeline_with_its_collector_as_it_is() -> None:
    # the first pause is the loader's own (while a spec is parsed and checked)
    code = (_PAUSES + f"try:\n    main(['verify', {str(SPEC)!r}])\nexcept SystemExit:\n    pass\n"
            + _SHOW)
    assert _last_line(code) == "[('off', True, True), ('on', True)] True"
