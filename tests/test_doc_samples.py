"""Every command sample in README.md and docs/*.md is executed (issue 18, item 13).

What counts as a sample (docs/design.md, "Docs samples are executed"):

- a **transcript**: a fenced block whose first line starts with ``$ ``. Each ``$``
  command (a trailing ``\\`` continues it) runs in a sandbox, and the lines up to the
  next ``$`` are its output, standard output and standard error as they interleave,
  compared line by line. Only what must vary is normalised: trailing blanks, and the
  sandbox's own path. A ``...`` inside an expected line matches any text, and a line
  that is only ``...`` any number of lines.
- a **command block**: a ```` ```sh ```` (or ``shell``, ``bash``, ``console``) block
  without ``$``. Each command runs in the sandbox and must end with status 0 or 1 (1:
  a spec with errors, as the broken examples have) — never a usage error (2), an
  unknown option, a missing file or a traceback.

A sample that cannot run here (an install, a GPU, a benchmark, a timing, the user's own
module) carries ``<!-- not run: REASON -->`` on the line before its fence, and is listed
in :data:`NOT_RUN` below, so that a sample cannot quietly stop being run.

The sandbox is a fresh folder holding a copy of ``examples/`` and the few files the docs
name as stand-ins for the reader's own (:func:`_sandbox`). After a change of behaviour,
regenerate the transcripts' outputs with ``python tests/test_doc_samples.py --update``
and review the diff.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every doc transcript, each a subprocess

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
COMMAND_LANGUAGES = {"sh", "shell", "bash", "console"}
NOT_RUN_MARK = re.compile(r"^<!--\s*not run:\s*(.+?)\s*-->\s*$")
TIMEOUT = 300

#: (file, first command of the sample) of every sample marked `<!-- not run: ... -->`.
NOT_RUN: set[tuple[str, str]] = {
    ("README.md", "python -m pip install -e . && shapecheck verify examples/multi_head.attn"),
    ("README.md", "python -m pip install -e '.[test]' && python -m pytest"),
    ("README.md", 'python -m pytest -m "not slow"'),  # the fast tier: a test run
    ("docs/conform.md", "shapecheck conform examples/multi_head.attn "
     "examples/implementations/attention_numpy.py:attention"),
    ("docs/torch.md", "shapecheck extract model.py:CausalSelfAttention -o attention.attn"),
    ("docs/torch.md", "shapecheck verify model.py:make"),  # a whole model: tests/test_whole_models.py
    ("docs/conform.md", "shapecheck conform examples/multi_head.attn layers.py:mha "
     "--name X=x --name W_Q=q_proj --name W_K=k_proj --name W_V=v_proj --name W_O=o_proj "
     "--name H=num_heads --layout W_Q=transpose --layout W_K=transpose "
     "--layout W_V=transpose --layout W_O=transpose"),
}


@dataclass(frozen=True)
class Sample:
    file: str  # relative to the repository root
    line: int  # of the opening fence
    kind: str  # "transcript" or "commands"
    body: tuple[str, ...]
    not_run: str | None

    @property
    def commands(self) -> list[str]:
        return [command for command, _ in steps(self)]

    @property
    def label(self) -> str:
        return f"{self.file}:{self.line}"


def samples() -> list[Sample]:
    found = []
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").split("\n")
        index = 0
        while index < len(lines):
            fence = re.match(r"^```(\S*)\s*$", lines[index])
            if not fence:
                index += 1
                continue
            end = next((j for j in range(index + 1, len(lines)) if lines[j].startswith("```")),
                       len(lines))
            body = tuple(lines[index + 1:end])
            kind = ("transcript" if body and body[0].startswith("$ ") else
                    "commands" if fence.group(1) in COMMAND_LANGUAGES else None)
            if kind is not None:
                found.append(Sample(path.relative_to(ROOT).as_posix(), index + 1, kind, body,
                                    _not_run(lines, index)))
            index = end + 1
    return found


def _not_run(lines: list[str], fence: int) -> str | None:
    before = fence - 1
    while before >= 0 and not lines[before].strip():
        before -= 1
    mark = NOT_RUN_MARK.match(lines[before]) if before >= 0 else None
    return mark.group(1) if mark else None


def steps(sample: Sample) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) in order; a command block expects nothing."""
    return [(command, expected) for command, _, expected in _parts(sample)]


def _parts(sample: Sample) -> list[tuple[str, list[str], list[str]]]:
    """(command, its lines as written, the lines after it) for each command."""
    out: list[tuple[str, list[str], list[str]]] = []
    lines = list(sample.body)
    index = 0
    while index < len(lines):
        line = lines[index]
        is_command = line.startswith("$ ") if sample.kind == "transcript" else bool(
            line.strip()) and not line.lstrip().startswith("#")
        if not is_command:
            if out:
                out[-1][2].append(line)
            index += 1
            continue
        written = [line]
        command = line[2:] if sample.kind == "transcript" else line
        while command.rstrip().endswith("\\") and index + 1 < len(lines):
            index += 1
            written.append(lines[index])
            command = command.rstrip()[:-1].rstrip() + " " + lines[index].strip()
        out.append((_strip_comment(command.strip()), written, []))
        index += 1
    return out


def _strip_comment(command: str) -> str:
    """`shapecheck verify x.attn   # why` -> the command (a `#` after blanks, outside quotes)."""
    quote = None
    for position, char in enumerate(command):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and position and command[position - 1] in " \t":
            return command[:position].rstrip()
    return command


# --- the sandbox ------------------------------------------------------------------------------


def _sandbox(folder: Path) -> Path:
    """A copy of examples/ and the stand-ins the docs name for the reader's own files."""
    import numpy as np

    shutil.copytree(ROOT / "examples", folder / "examples",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "examples" / "multi_head.attn", folder / "model.attn")
    shutil.copy(ROOT / "examples" / "causal.attn", folder / "other.attn")
    (folder / "specs").mkdir()
    for name in ("multi_head.attn", "causal.attn", "grouped_query.attn"):
        shutil.copy(ROOT / "examples" / name, folder / "specs" / name)
    shutil.copy(ROOT / "examples" / "multi_head.attn", folder / "specs" / "mha.attn")
    rng = np.random.default_rng(0)
    np.save(folder / "x.npy", rng.standard_normal((128, 512)))
    np.savez(folder / "arrays.npz", X=rng.standard_normal((16, 64)))
    for name, shape in (("q", (5, 4)), ("k", (7, 4)), ("v", (7, 3))):  # docs/inference.md
        np.save(folder / f"{name}.npy", rng.standard_normal(shape))
    return folder


def _environment(folder: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("SHAPECHECK_", "FORCE_COLOR", "GITHUB_"))}
    bin_folder = str(Path(sys.executable).parent)
    env.update(PATH=bin_folder + os.pathsep + env.get("PATH", ""), NO_COLOR="1",
               PYTHONUNBUFFERED="1", HOME=str(folder), COLUMNS="100")
    return env


def execute(command: str, folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=folder, env=_environment(folder),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=TIMEOUT)


def normalise(text: str, folder: Path) -> list[str]:
    lines = [line.rstrip() for line in text.replace(str(folder), ".").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def matches(expected: str, actual: str) -> bool:
    if "..." not in expected:
        return expected == actual
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, actual) is not None


def transcript_matches(want: list[str], got: list[str]) -> bool:
    """Line by line; a line that is only `...` stands for any number of lines."""
    if not want:
        return not got
    if want[0].strip() == "...":
        return any(transcript_matches(want[1:], got[skip:]) for skip in range(len(got) + 1))
    return bool(got) and matches(want[0], got[0]) and transcript_matches(want[1:], got[1:])


# --- the tests --------------------------------------------------------------------------------

RUN = [sample for sample in samples() if sample.not_run is None]


@pytest.mark.parametrize("sample", RUN, ids=[sample.label for sample in RUN])
def test_the_sample_does_what_the_docs_say(sample: Sample, tmp_path: Path) -> None:
    folder = _sandbox(tmp_path)
    how = (f"update {sample.label} to what the command prints now "
           f"(`python tests/test_doc_samples.py --update` rewrites every transcript), or mark "
           f"it `<!-- not run: REASON -->` and add it to NOT_RUN in tests/test_doc_samples.py")
    for command, expected in steps(sample):
        done = execute(command, folder)
        got = normalise(done.stdout, folder)
        if sample.kind == "commands":
            assert done.returncode in (0, 1) and "Traceback" not in done.stdout, (
                f"{sample.label}: `{command}` exited {done.returncode}:\n{done.stdout}\n{how}")
            continue
        want = [line.rstrip() for line in expected]
        while want and not want[-1]:
            want.pop()
        if not transcript_matches(want, got):
            import difflib

            diff = "\n".join(difflib.unified_diff(want, got, "the docs", "the command",
                                                  lineterm=""))
            pytest.fail(f"{sample.label}: `{command}` prints something else:\n{diff}\n{how}",
                        pytrace=False)


def test_the_samples_not_run_are_the_listed_ones() -> None:
    marked = {(sample.file, sample.commands[0] if sample.commands else "")
              for sample in samples() if sample.not_run is not None}
    assert marked == NOT_RUN, (
        f"marked `<!-- not run -->` but not in NOT_RUN: {sorted(marked - NOT_RUN)}; "
        f"in NOT_RUN but no longer marked: {sorted(NOT_RUN - marked)} "
        "(tests/test_doc_samples.py lists each sample that is not run, with its first command)")


def test_samples_are_found() -> None:
    found = samples()
    assert sum(sample.kind == "transcript" for sample in found) >= 3
    assert sum(sample.kind == "commands" for sample in found) >= 8


# --- regenerating the transcripts ------------------------------------------------------------


def update() -> int:
    """Rewrite each transcript's outputs with what its commands print now."""
    import tempfile

    changed = 0
    for path in DOCS:
        relative = path.relative_to(ROOT).as_posix()
        lines = path.read_text(encoding="utf-8").split("\n")
        for sample in reversed([s for s in samples() if s.file == relative
                                and s.kind == "transcript" and s.not_run is None]):
            body: list[str] = []
            with tempfile.TemporaryDirectory() as scratch:
                folder = _sandbox(Path(scratch))
                for command, written, _ in _parts(sample):
                    body.extend(written)
                    body.extend(normalise(execute(command, folder).stdout, folder))
            start, end = sample.line, sample.line + len(sample.body)
            if lines[start:end] != body:
                lines[start:end] = body
                changed += 1
        path.write_text("\n".join(lines), encoding="utf-8")
    print(f"updated {changed} transcript(s)")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_doc_samples.py --update")
    sys.exit(update())
