"""The pre-commit hooks, run by the real `pre-commit` in a throwaway team repository that uses
this checkout as the hook source: they pass on fresh output and fail on stale output."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

GIT_IDENTITY = {"GIT_AUTHOR_NAME": "obc tests", "GIT_AUTHOR_EMAIL": "tests@obc.invalid",
                "GIT_COMMITTER_NAME": "obc tests", "GIT_COMMITTER_EMAIL": "tests@obc.invalid"}
CONFIG = """\
repos:
  - repo: {source}
    rev: {rev}
    hooks:
      - id: obc-validate
        files: ^examples/[^/]+\\.ya?ml$
      - id: obc-check
        args: [examples, -o, out]
"""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_IDENTITY}).stdout.strip()


def hook_source(root: Path) -> tuple[Path, str]:
    """This checkout as pre-commit sees a hook repository: its files, uncommitted edits
    included, committed in a fresh git repository. Returns the path and the commit."""
    source = root / "obc-source"
    listed = git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in sorted(set(listed.split("\0")) - {""}):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    git(source, "init", "-q")
    git(source, "add", ".")
    git(source, "commit", "-q", "-m", "obc under test")
    return source, git(source, "rev-parse", "HEAD")


def pre_commit(team: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files", "--color",
                           "never"], cwd=team, capture_output=True, text=True, check=False,
                          env={**os.environ, **GIT_IDENTITY, "PRE_COMMIT_HOME": str(cache)},
                          timeout=900)


@pytest.mark.slow
def test_pre_commit_hooks_pass_on_fresh_output_and_fail_on_stale(tmp_path):
    source, rev = hook_source(tmp_path)
    team = tmp_path / "team"
    shutil.copytree(REPO / "examples", team / "examples")
    subprocess.run([sys.executable, "-m", "compiler", "compile", "examples", "-o", "out"],
                   cwd=team, check=True, capture_output=True)
    (team / ".pre-commit-config.yaml").write_text(CONFIG.format(source=source, rev=rev))
    git(team, "init", "-q")
    git(team, "add", ".")
    git(team, "commit", "-q", "-m", "runs and their scripts")

    fresh = pre_commit(team, tmp_path / "pre-commit-cache")
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    assert re.search(r"^obc validate\.+Passed$", fresh.stdout, re.MULTILINE)  # not "Skipped"
    assert re.search(r"^obc compile --check\.+Passed$", fresh.stdout, re.MULTILINE)

    script = team / "out" / "docker-qlora" / "job.sh"
    script.write_text(script.read_text().replace("OBC_JOB=docker-qlora", "OBC_JOB=edited"))
    (team / "examples" / "steps-eval.yaml").unlink()
    git(team, "add", "-A")

    stale = pre_commit(team, tmp_path / "pre-commit-cache")
    assert stale.returncode == 1, stale.stdout + stale.stderr
    assert "out/docker-qlora/job.sh:" in stale.stdout
    assert "out/steps-eval/job.sh:1:1: error: stale" in stale.stdout
    assert "to fix, run: obc compile examples -o out" in stale.stdout
    assert re.search(r"^obc validate\.+Passed$", stale.stdout, re.MULTILINE)

    run_file = team / "examples" / "docker-qlora.yaml"
    run_file.write_text(run_file.read_text().replace("kind: docker", "kind: dockr"))
    git(team, "add", "-A")
    invalid = pre_commit(team, tmp_path / "pre-commit-cache")
    assert invalid.returncode == 1
    assert re.search(r"^obc validate\.+Failed$", invalid.stdout, re.MULTILINE)
    assert "examples/docker-qlora.yaml:" in invalid.stdout
    assert "did you mean 'docker'" in invalid.stdout
