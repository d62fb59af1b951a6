"""Where a run file's project is: the git work tree that holds it. Paths written into the
scripts are relative to it, so that the bytes do not depend on where obc runs."""

from __future__ import annotations

import os
from pathlib import Path


def git_work_tree(path: Path) -> Path | None:
    """Return the nearest folder at or above `path` that holds `.git` (a folder, or the file
    of a linked work tree or submodule), or None. git itself is not run."""
    for folder in (path.absolute(), *path.absolute().parents):
        if (folder / ".git").exists():
            return folder
    return None


def source_name(run_file: Path) -> str:
    """Return how a script names its run file: relative to the git work tree that holds it,
    or outside one, relative to the working directory."""
    anchor = git_work_tree(run_file.parent) or Path.cwd()
    return Path(os.path.relpath(run_file.absolute(), anchor)).as_posix()


def resolve_source(name: str, out: Path) -> Path:
    """Return where the run file a script under `out` names is, read the way source_name
    wrote it."""
    return (git_work_tree(out) or Path.cwd()) / name
