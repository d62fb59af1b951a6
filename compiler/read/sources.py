"""The files a run file names: `files:` sources and an Axolotl config file, the run files
themselves, and obc.lock. Each must be a regular file inside the project once links are
resolved, and what one run file embeds is bounded.

The project is the git work tree that holds the run file (the nearest folder above it with a
`.git` entry; git itself is not run), or the run file's folder when there is none; `obc
--allow-dir DIR` adds a folder outside it. A path is checked before anything is opened, so a
file outside is never read (its content cannot reach a script, a diff or a CI log) and a named
pipe or a device can neither block obc nor flood it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..core.diagnostics import ObcError
from ..core.files import read_at_most
from ..core.project import project_root

# What one run file may embed, all its files together: an Axolotl config and a few plugins
# are tens of KB. Checked against each file's size before it is read.
MAX_EMBEDDED_BYTES = 1024 * 1024
OUTSIDE_HINT = ("obc reads only files of the project (the git work tree, or else the folder, "
                "of the run file or obc.lock); move the file in, or allow its folder with "
                "obc --allow-dir DIR")
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))
# Never wait on a pipe or device, never follow a link swapped in after the check.
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


class SourceError(ValueError):
    """A named file that obc does not read, and why; `hint` says what to do instead."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class BudgetError(SourceError):
    """The file would take the run file's embedded files over MAX_EMBEDDED_BYTES."""


@dataclass(frozen=True, slots=True)
class Project:
    """The folders a run file may read: its project's root and the allowed folders, resolved."""

    root: Path
    allowed: tuple[Path, ...] = ()

    def holds(self, resolved: Path) -> bool:
        return any(resolved.is_relative_to(folder) for folder in (self.root, *self.allowed))


def find_project(run_file: Path, allowed: tuple[Path, ...] = ()) -> Project:
    """Return the project of `run_file`, found from where it is named (not where a link to it
    points), so that a link cannot move a run file into another project."""
    return Project(project_root(Path(os.path.abspath(run_file)).parent), allowed)


def allowed_folders(folders: Iterable[Path]) -> tuple[Path, ...]:
    """Resolve the folders of --allow-dir; raise ObcError for one that is not a folder."""
    resolved = []
    for folder in folders:
        if not folder.is_dir():
            raise ObcError(f"--allow-dir {folder}: not a folder")
        resolved.append(folder.resolve())
    return tuple(resolved)


def check_inside(project: Project, path: Path) -> Path:
    """Return `path` resolved, if it is in the project; raise SourceError if it is not.

    Nothing is opened, and the answer does not depend on whether the file exists."""
    resolved = Path(os.path.realpath(path))
    if project.holds(resolved):
        return resolved
    if project.holds(Path(os.path.abspath(path))):
        raise SourceError("is a symbolic link to a file outside the project", OUTSIDE_HINT)
    raise SourceError("is outside the project", OUTSIDE_HINT)


def check_regular(resolved: Path) -> os.stat_result:
    """Return the status of a resolved path that is a regular file; raise SourceError if it
    is anything else (looked at with lstat, so a pipe or device is never opened)."""
    try:
        info = os.lstat(resolved)
    except OSError as error:
        raise SourceError(error.strerror or str(error)) from error
    for is_kind, kind in _KINDS:
        if is_kind(info.st_mode):
            raise SourceError(f"is {kind}, not a regular file")
    if not stat.S_ISREG(info.st_mode):
        raise SourceError("is not a regular file")
    return info


class TooLargeError(SourceError):
    """The file holds more bytes than the reader takes; `size` is as many as were seen."""

    def __init__(self, size: int) -> None:
        super().__init__(f"is {size:,} bytes")
        self.size = size


def read_inside(project: Project, path: Path, limit: int) -> bytes:
    """Return the bytes of the regular file at `path`, if it is in the project and holds at
    most `limit` bytes; raise SourceError (TooLargeError) without reading more than that."""
    resolved = check_inside(project, path)
    info = check_regular(resolved)
    if info.st_size > limit:
        raise TooLargeError(info.st_size)
    data = _read_at_most(resolved, info, limit)
    if len(data) > limit:  # it grew, or the system does not know its size (/proc)
        raise TooLargeError(len(data))
    return data


class Embedding:
    """Reads the files one run file embeds, within MAX_EMBEDDED_BYTES for all of them."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.used = 0

    def read(self, path: Path) -> str:
        """Return the text of the file at `path`; raise SourceError (BudgetError when the
        budget is spent) without reading more than the budget allows."""
        try:
            data = read_inside(self.project, path, MAX_EMBEDDED_BYTES - self.used)
        except TooLargeError as error:
            raise self._over_budget(error.size) from None
        self.used += len(data)
        return decode_text(data)

    def _over_budget(self, size: int) -> BudgetError:
        already = f", after {self.used:,} bytes of other files" if self.used else ""
        return BudgetError(f"is {size:,} bytes{already}; a run file embeds at most "
                           f"{MAX_EMBEDDED_BYTES:,} bytes (1 MiB) of files in all",
                           "embed less: the job can read large files from a folder "
                           "(a mount or the run dir) instead")


def _read_at_most(resolved: Path, info: os.stat_result, limit: int) -> bytes:
    """Read up to limit + 1 bytes of the file checked as `info`, refusing a swapped file."""
    try:
        with os.fdopen(os.open(resolved, _OPEN_FLAGS), "rb") as stream:
            opened = os.fstat(stream.fileno())
            if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
                raise SourceError("changed while obc was reading it")
            return read_at_most(stream, limit)
    except OSError as error:
        raise SourceError(error.strerror or str(error)) from error


def decode_text(data: bytes) -> str:
    """Return the bytes of a file read as UTF-8 text; raise SourceError if they are not."""
    if b"\0" in data:
        raise SourceError("contains a NUL byte; obc reads only text files")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SourceError("is not UTF-8 text") from error
