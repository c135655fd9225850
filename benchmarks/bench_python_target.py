"""A Python target against its floor (issue 36 item 4). Prints ratios; never a timed test.

The floor of `shapecheck verify FILE:FACTORY` is what any tool that traces the module must
do: `import torch`, call the factory, and one `torch.export` of what it returns. Both run
as fresh processes, alternated round by round (so both see the same machine load); the
figure is the median of the paired ratios, in wall time and in CPU time (the children's
rusage). Target: <= 1.1x.

- FACTORY is a function without parameters returning ``(module, inputs)``, the inputs a
  dict by ``forward`` argument (``verify``'s own form for a factory, docs/torch.md); by
  default a generated file building nanoGPT's ``CausalSelfAttention`` (the project's copy,
  tests/data/torch/nanogpt.py). ``--target FILE:FACTORY`` names another: a whole model's
  factory measures a whole model against its own export.
- ``--folder K``: K targets listed in one ``[tool.shapecheck] modules`` and checked by one
  ``verify FOLDER``, against ``import torch`` plus K exports in one process (torch is
  imported once, not once per target).
- ``--profile``: where the time above the floor goes, in one process (CPU time of each
  phase: import torch, shapecheck's modules, building the target, the export, the second
  pass over the graph if one was needed, lowering, checking).

Two floors are printed: the static export (``torch.export.export(module, (), inputs)``, the
issue's floor) and the export with the batch and sequence axes symbolic, which is the one
export ``verify`` does (so that B and T are dims of the spec, not numbers); the second is
the floor of any tool that names those dims. ``--frozen`` adds both floors with what
`import torch` made and what is left at the exit frozen (``gc.freeze``), as ``verify``'s own
process does (cli/collector.py): the issue's floors do not, so only these say whether
``verify`` does less work of its own. ``--against CHECKOUT`` times another checkout's
``verify`` in the same rounds.

Usage: python benchmarks/bench_python_target.py [--runs N] [--target FILE:FACTORY]
       [--folder K] [--profile] [--frozen] [--against CHECKOUT]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

NANOGPT = f'''
import sys
sys.path.insert(0, {str(ROOT / "tests" / "data" / "torch")!r})
import torch
from nanogpt import CausalSelfAttention


def make():
    torch.manual_seed(0)
    return CausalSelfAttention(64, 4), {{"x": torch.randn(2, 16, 64)}}
'''

# The floor: what tracing the module costs any tool (the factory's file loaded by path).
# SYMBOLIC: its batch and sequence axes traced as symbolic, as verify traces them (the
# export a tool that names those dims cannot do without).
# FROZEN ("static-frozen", "symbolic-frozen"): what `import torch` made frozen, and what is
# left before the exit (gc.freeze), as verify's own process does (cli/collector.py): the
# floor of like with like, which says whether verify does less work of its own.
FLOOR = '''
import gc, importlib.util, sys, torch
symbolic = sys.argv[1].startswith("symbolic")
frozen = sys.argv[1].endswith("-frozen")
if frozen:
    gc.freeze()


def axes(value):
    if not isinstance(value, torch.Tensor) or value.dim() < 2:
        return None
    rank = value.dim()
    return {axis: torch.export.Dim.AUTO for axis in {0, rank - 2 if rank >= 3 else rank - 1}
            if value.shape[axis] > 1}


for target in sys.argv[2:]:
    path, _, name = target.rpartition(":")
    spec = importlib.util.spec_from_file_location("target_" + str(abs(hash(target))), path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    module, inputs = getattr(loaded, name)()
    shapes = {k: axes(v) for k, v in inputs.items()} if symbolic else None
    torch.export.export(module.eval(), (), inputs, dynamic_shapes=shapes)
if frozen:
    gc.freeze()
'''


def _time(command: list[str], cwd: Path, root: Path = ROOT) -> tuple[float, float, int]:
    """Wall time, CPU time (user + system, the child's rusage) and exit status of one run
    (``root``: the checkout whose ``shapecheck`` it imports)."""
    # bytecode written (the warm-up run writes it), as an installed package has it: with
    # PYTHONDONTWRITEBYTECODE inherited, a checkout without __pycache__ compiles shapecheck's
    # modules in every timed run (~0.1-0.3 s of verify's CPU, none of the floor's)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          env={**env, "PYTHONPATH": str(root)}, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):  # time no failure
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n"
                         f"{done.stderr.decode(errors='replace')[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def paired(label: str, commands: dict[str, tuple[list[str], Path]], runs: int,
           cwd: Path) -> None:
    """``commands``: name -> (command, checkout); "verify" against every other, alternated."""
    for command, root in commands.values():  # warm the file cache (and Lark's, torch's)
        _time(command, cwd, root)
    times: dict[str, dict[str, list[float]]] = {n: {"wall": [], "CPU": []} for n in commands}
    loads = [os.getloadavg()[0]]
    for _ in range(runs):
        for name, (command, root) in commands.items():
            wall, cpu, _status = _time(command, cwd, root)
            times[name]["wall"].append(wall)
            times[name]["CPU"].append(cpu)
        loads.append(os.getloadavg()[0])
    print(f"{label} (load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores, "
          f"{runs} alternated rounds)")
    for kind in ("wall", "CPU"):
        mine = times["verify"][kind]
        shown = [f"verify {statistics.median(mine):.2f} s"]
        for name in commands:
            if name == "verify":
                continue
            base = times[name][kind]
            ratios = [a / b for a, b in zip(mine, base)]
            quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
            shown.append(f"{name} {statistics.median(base):.2f} s, verify / it "
                         f"{statistics.median(ratios):.2f} ({quartiles[0]:.2f}-{quartiles[2]:.2f})")
        print(f"  {kind:>4} medians: " + "; ".join(shown))


def folder_of(targets: list[str], folder: Path) -> None:
    """``folder``: a project whose configuration lists every target (by absolute path)."""
    listed = ", ".join(f'"{t}"' for t in targets)
    (folder / "pyproject.toml").write_text(f"[tool.shapecheck]\nmodules = [{listed}]\n")


def profile(target: str) -> None:
    """CPU time of each phase of one `verify` of ``target``, in this process."""
    clock = time.process_time
    marks = [("start", clock())]
    import torch  # noqa: F401

    marks.append(("import torch", clock()))
    import shapecheck.pytorch.front as front
    from shapecheck.pytorch.front import lower, target as targets
    from shapecheck.pytorch.front.sourcemap import check_extraction

    marks.append(("shapecheck's modules", clock()))
    built = targets.build(target)
    marks.append(("build the target", clock()))
    module = built.module.eval()
    with front._named_forward(module, list(built.inputs)):
        exported = torch.export.export(module, (), dict(built.inputs),
                                       dynamic_shapes=front._dynamic_shapes(built), strict=False)
    marks.append(("torch.export", clock()))
    once = lower.lowers_as_traced(exported)
    program = exported if once else exported.run_decompositions({})
    marks.append(("second pass (run_decompositions)" if not once else "no second pass", clock()))
    extraction = front._write(built, program)
    marks.append(("lowering", clock()))
    check_extraction(extraction, target)
    marks.append(("checking", clock()))
    total = marks[-1][1] - marks[0][1]
    print(f"profile of {target} (CPU, one process, load {os.getloadavg()[0]:.1f}):")
    for (_, before), (name, after) in zip(marks, marks[1:]):
        print(f"  {name:<34} {1000 * (after - before):7.0f} ms  {100 * (after - before) / total:4.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--target", help="FILE:FACTORY (default: nanoGPT's attention)")
    parser.add_argument("--folder", type=int, default=0, metavar="K")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--frozen", action="store_true",
                        help="also both floors with torch's objects frozen, as verify's")
    parser.add_argument("--against", metavar="CHECKOUT",
                        help="another checkout's verify, timed in the same rounds")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        target = options.target
        if target is None:
            (folder / "model.py").write_text(NANOGPT)
            target = f"{folder / 'model.py'}:make"
        path, _, name = target.rpartition(":")
        target = f"{Path(path).resolve()}:{name}"
        if options.profile:
            profile(target)
            return
        verify = [sys.executable, "-m", "shapecheck", "verify", target]
        commands = {"verify": (verify, ROOT),
                    "floor (static export)": ([sys.executable, "-c", FLOOR, "static", target],
                                              ROOT),
                    "floor (symbolic B, T)": ([sys.executable, "-c", FLOOR, "symbolic", target],
                                              ROOT)}
        if options.frozen:
            for kind in ("static", "symbolic"):
                commands[f"floor ({kind}, frozen)"] = (
                    [sys.executable, "-c", FLOOR, f"{kind}-frozen", target], ROOT)
        if options.against:
            commands["against"] = (verify, Path(options.against).resolve())
        print("target <= 1.1 (issue 36); the ratios are medians of paired runs (quartiles)")
        paired(f"verify {target}", commands, options.runs, folder)
        if options.folder:
            project = folder / "project"
            project.mkdir()
            copies = []
            for index in range(options.folder):  # K files, so nothing is shared by name
                copy = project / f"model_{index}.py"
                copy.write_text(Path(path).read_text())
                copies.append(f"{copy}:{name}")
            folder_of(copies, project)
            paired(f"verify of a folder of {options.folder} targets (one [tool.shapecheck] "
                   f"modules) / import torch + {options.folder} exports in one process", {
                       "verify": ([sys.executable, "-m", "shapecheck", "verify", str(project)],
                                  ROOT),
                       "floor (symbolic B, T)": (
                           [sys.executable, "-c", FLOOR, "symbolic", *copies], ROOT)},
                   options.runs, folder)


if __name__ == "__main__":
    main()
