"""The pre-commit hook (.pre-commit-hooks.yaml), run by pre-commit itself.

pre-commit installs this repository into a virtualenv of its own with pip (from the
package index pip is configured with) and runs the hook on a scratch git repository,
exactly as a user's `git commit` would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # git repositories and the hook, in subprocesses

ROOT = Path(__file__).resolve().parent.parent
GOOD = "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\noutput S = Q @ K.T\n"
BAD = "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\noutput S = Q @ K\n"
UNUSED_NOQA = "dim N, d\ninput Q: [N, d]\noutput S = Q @ Q.T  # noqa: SC401\n"


def test_the_manifest_declares_the_hooks() -> None:
    yaml = pytest.importorskip("yaml")
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    by_id = {hook["id"]: hook for hook in hooks}
    assert set(by_id) == {"shapecheck", "shapecheck-fix"}
    for hook in hooks:
        assert hook["language"] == "python" and hook["files"] == r"\.attn$"
        assert hook["entry"].startswith("shapecheck verify")


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    pytest.importorskip("pre_commit")
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("pre-commit needs git and this repository's git checkout")
    base = tmp_path_factory.mktemp("pre-commit")
    repository = base / "specs-repo"
    repository.mkdir()
    _git("init", "-q", cwd=repository)
    env = {**os.environ, "PRE_COMMIT_HOME": str(base / "cache"), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "PRE_COMMIT_COLOR": "never"}
    env.pop("VIRTUAL_ENV", None)
    return repository, env


def _try_repo(repository: Path, env: dict[str, str], hook: str, *files: str) -> subprocess.CompletedProcess[str]:
    """`pre-commit try-repo` on this checkout (its uncommitted changes included)."""
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), hook, "--files", *files],
        cwd=repository, env=env, capture_output=True, text=True, timeout=1200, check=False)


def test_pre_commit_runs_the_hook_on_a_scratch_repository(scratch) -> None:
    repository, env = scratch
    (repository / "good.attn").write_text(GOOD, encoding="utf-8")
    (repository / "bad.attn").write_text(BAD, encoding="utf-8")
    (repository / "notes.txt").write_text(BAD, encoding="utf-8")  # not a spec: never passed
    _git("add", "-A", cwd=repository)
    passed = _try_repo(repository, env, "shapecheck", "good.attn", "notes.txt")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout
    failed = _try_repo(repository, env, "shapecheck", "good.attn", "bad.attn")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "bad.attn:4:12: error[SC301]" in failed.stdout and "Failed" in failed.stdout


def test_pre_commit_fix_hook_rewrites_and_stops_the_commit(scratch) -> None:
    pytest.importorskip("shapecheck.fileio")  # --fix writes through it
    repository, env = scratch
    spec = repository / "noqa.attn"
    spec.write_text(UNUSED_NOQA, encoding="utf-8")
    _git("add", "-A", cwd=repository)
    first = _try_repo(repository, env, "shapecheck-fix", "noqa.attn")
    assert first.returncode == 1, first.stdout + first.stderr  # the file changed: look at it
    assert "files were modified by this hook" in first.stdout
    assert spec.read_text(encoding="utf-8") == UNUSED_NOQA.replace("  # noqa: SC401", "")
    _git("add", "-A", cwd=repository)
    second = _try_repo(repository, env, "shapecheck-fix", "noqa.attn")
    assert second.returncode == 0, second.stdout + second.stderr


# --- the README's samples, as written (issue 34) ----------------------------------------------

KARPATHY = ROOT / "tests" / "data" / "torch" / "karpathy_scale.py"  # scaled by the model width


def _readme_configs() -> list[str]:
    """The README's `.pre-commit-config.yaml` samples, in order."""
    import re

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(# \.pre-commit-config\.yaml\n.*?)```", text, re.S)
    assert len(blocks) == 2, "the remote hook and the local hook for PyTorch modules"
    return blocks


def _pre_commit_run(repository: Path, env: dict[str, str], config: str) -> subprocess.CompletedProcess[str]:
    (repository / ".pre-commit-config.yaml").write_text(config, encoding="utf-8")
    _git("add", "-A", cwd=repository)
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files"],
        cwd=repository, env=env, capture_output=True, text=True, timeout=1200, check=False)


@pytest.fixture()
def fresh(scratch, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A scratch repository of its own (pre-commit's cache is shared)."""
    _, env = scratch
    repository = tmp_path / "project"
    repository.mkdir()
    _git("init", "-q", cwd=repository)
    return repository, env


def test_the_readme_remote_hook_pinned_to_a_commit(fresh) -> None:
    """`rev:` is a commit SHA (the repository has no tag): the sample with this checkout's
    HEAD in it, run by `pre-commit run` as a user's commit would."""
    repository, env = fresh
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()
    config = _readme_configs()[0]
    assert "rev: 0000000000000000000000000000000000000000" in config
    config = config.replace("https://github.com/OWNER/shapecheck", str(ROOT)).replace(
        "0000000000000000000000000000000000000000", head)
    (repository / "good.attn").write_text(GOOD, encoding="utf-8")
    passed = _pre_commit_run(repository, env, config)
    assert passed.returncode == 0 and "Passed" in passed.stdout, passed.stdout + passed.stderr
    (repository / "bad.attn").write_text(BAD, encoding="utf-8")
    failed = _pre_commit_run(repository, env, config)
    assert failed.returncode == 1 and "bad.attn:4:12: error[SC301]" in failed.stdout, \
        failed.stdout + failed.stderr


def test_the_readme_local_hook_checks_pytorch_modules(fresh) -> None:
    """The local hook runs `verify .` in this environment (torch installed): a configured
    module whose scores are scaled by the model width (SC404, a warning) fails the commit,
    and passes once scaled by the head width."""
    pytest.importorskip("torch")
    repository, env = fresh
    if shutil.which("shapecheck", path=env.get("PATH")) is None:
        pytest.skip("the local hook runs the `shapecheck` on PATH")
    config = _readme_configs()[1]
    (repository / "model.py").write_text(KARPATHY.read_text(encoding="utf-8"), encoding="utf-8")
    (repository / "pyproject.toml").write_text(
        '[tool.shapecheck]\nmodules = [{ target = "model.py:Head", init = { n_embd = 35 } }]\n',
        encoding="utf-8")
    failed = _pre_commit_run(repository, env, config)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "model.py:22:42: warning[SC404]" in failed.stdout and "Failed" in failed.stdout
    fixed = KARPATHY.read_text(encoding="utf-8").replace("C**-0.5", "k.shape[-1]**-0.5")
    (repository / "model.py").write_text(fixed, encoding="utf-8")
    passed = _pre_commit_run(repository, env, config)
    assert passed.returncode == 0 and "Passed" in passed.stdout, passed.stdout + passed.stderr
