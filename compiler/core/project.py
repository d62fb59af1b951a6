"""Where a run file's project is: the git work tree that holds it. Paths written into the
scripts are relative to it, so that the bytes do not depend on where obc runs."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from .text import visible


def git_work_tree(path: Path) -> Path | None:
    """Return the nearest folder at or above `path` that holds `.git` (a folder, or the file
    of a linked work tree or submodule), or None. git itself is not run."""
    start = os.path.abspath(path)
    if _work_trees is not None and start in _work_trees:
        return _work_trees[start]
    found = next((folder for folder in (Path(start), *Path(start).parents)
                  if os.path.lexists(folder / ".git")), None)
    if _work_trees is not None:
        _work_trees[start] = found
    return found


def project_root(folder: Path) -> Path:
    """Return the root of the project of the files in `folder` (an absolute path): the git
    work tree that holds it, or else the folder itself, resolved."""
    start = str(folder)
    if _roots is not None and start in _roots:
        return _roots[start]
    root = (git_work_tree(folder) or folder).resolve()
    if _roots is not None:
        _roots[start] = root
    return root


# The work tree and project root of each folder asked about, while one compile runs
# (one_tree): its run files and every other file it names ask about the same few folders,
# ten thousand times.
_work_trees: dict[str, Path | None] | None = None
_roots: dict[str, Path] | None = None
# The name of each folder (relative_name), by the folder and what it is named relative to.
_names: dict[tuple[str, str], str] | None = None


@contextlib.contextmanager
def one_tree() -> Iterator[None]:
    """Within it, git_work_tree and project_root look at each folder once: a compile takes
    the folders as it finds them (a `.git` made or removed, or a link changed, meanwhile is
    not seen until the next compile)."""
    global _work_trees, _roots, _names  # noqa: PLW0603 -- the memo of the compile under way
    outer = _work_trees, _roots, _names
    _work_trees = {} if outer[0] is None else outer[0]
    _roots = {} if outer[1] is None else outer[1]
    _names = {} if outer[2] is None else outer[2]
    try:
        yield
    finally:
        _work_trees, _roots, _names = outer


def source_name(run_file: Path) -> str:
    """Return how a script names its run file: relative to the git work tree that holds it,
    or outside one, relative to the working directory; as one line of visible text."""
    return relative_name(run_file, git_work_tree(run_file.parent))


def relative_name(path: Path, anchor: Path | None = None) -> str:
    """Return `path` relative to `anchor` (the working directory if None), as one line of
    visible text (shown). A file's folder is named once a compile (one_tree): ten thousand
    run files in one folder ask for it ten thousand times."""
    name = path.name
    if name in ("", ".", ".."):  # not a file's name: the path is named whole
        return _relative(path, anchor)
    key = os.path.abspath(path.parent), str(anchor)
    if _names is None or key not in _names:
        folder = _relative(path.parent, anchor)
        if _names is not None:
            _names[key] = folder
    else:
        folder = _names[key]
    shown_name = _visible_name(name)  # a name alone: no Path made of it
    return shown_name if folder == "." else f"{folder}/{shown_name}"


def _relative(path: Path, anchor: Path | None) -> str:
    return shown(Path(os.path.relpath(path.absolute(), anchor or Path.cwd())))


def shown(path: Path) -> str:
    """Return a path as one line of visible text: bytes that are not UTF-8 as \\xe9, control
    and invisible characters as \\x1b or \\u202e (a name must not rewrite a terminal or a
    script's header)."""
    return _visible_name(path.as_posix())


def _visible_name(name: str) -> str:
    return visible(os.fsencode(name).decode("utf-8", "backslashreplace"))


def names_root(out: Path) -> Path:
    """Return the folder that the run files named by the scripts under `out` are relative
    to, read the way source_name wrote them."""
    return git_work_tree(out) or Path.cwd()
