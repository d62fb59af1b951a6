"""Where a run file's project is: the git work tree that holds it. Paths written into the
scripts are relative to it, so that the bytes do not depend on where obc runs."""

from __future__ import annotations

import os
from pathlib import Path

from .text import visible


def git_work_tree(path: Path) -> Path | None:
    """Return the nearest folder at or above `path` that holds `.git` (a folder, or the file
    of a linked work tree or submodule), or None. git itself is not run."""
    start = Path(os.path.abspath(path))
    for folder in (start, *start.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return None


def source_name(run_file: Path) -> str:
    """Return how a script names its run file: relative to the git work tree that holds it,
    or outside one, relative to the working directory; as one line of visible text."""
    anchor = git_work_tree(run_file.parent) or Path.cwd()
    return shown(Path(os.path.relpath(run_file.absolute(), anchor)))


def shown(path: Path) -> str:
    """Return a path as one line of visible text: bytes that are not UTF-8 as \\xe9, control
    and invisible characters as \\x1b or \\u202e (a name must not rewrite a terminal or a
    script's header)."""
    return visible(os.fsencode(path.as_posix()).decode("utf-8", "backslashreplace"))


def names_root(out: Path) -> Path:
    """Return the folder that the run files named by the scripts under `out` are relative
    to, read the way source_name wrote them."""
    return git_work_tree(out) or Path.cwd()
