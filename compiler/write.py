"""Stage 6, write: compiled scripts → files under OUT, or a report of how OUT differs.

The files are OUT/<id>/job.sh, and a sweep's OUT/<id>/sweep.sh and runs.tsv. obc owns a
file only if it carries obc's generated-file header (its second line). It never writes over,
deletes or follows anything else; each write goes to a temporary file in the same folder
and is renamed into place, so a file is always either old or new, never half-written.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import itertools
import os
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from .diagnostics import ObcError
from .pipeline import SCRIPT_MODE, SCRIPT_NAME
from .project import names_root
from .summary import GENERATED_PREFIX
from .sweep import RUNS_TABLE, SWEEP_SCRIPT

HEADER_PREFIX = "# " + GENERATED_PREFIX
HEADER_SUFFIX = ". DO NOT EDIT."
# The files obc writes in each folder of OUT, and so the only ones it may find stale there.
OUT_FILES = (SCRIPT_NAME, SWEEP_SCRIPT, RUNS_TABLE)

Status = Literal["written", "unchanged", "removed", "changed", "missing", "stale", "kept"]


@dataclass(frozen=True, slots=True)
class Change:
    """What happened, or (with --check) what would happen, to one file under OUT."""

    path: Path
    status: Status
    old: bytes | None = None
    new: bytes | None = None
    old_mode: int = SCRIPT_MODE
    # For an obc script no input produced: why it is stale, or kept.
    reason: str = ""
    # The mode obc writes the file with.
    mode: int = SCRIPT_MODE

    def diff(self) -> str:
        """Return a unified diff from the file on disk to what obc would write."""
        return "".join(difflib.unified_diff(
            _lines(self.old), _lines(self.new),
            fromfile="/dev/null" if self.old is None else str(self.path),
            tofile="/dev/null" if self.new is None else str(self.path)))

    def first_changed_line(self) -> int:
        """Return the 1-based number of the first line that differs (1 if none does)."""
        pairs = itertools.zip_longest(_lines(self.old), _lines(self.new))
        return next((n for n, (before, after) in enumerate(pairs, 1) if before != after), 1)

    def source(self) -> str | None:
        """Return the run file named in the header of the file on disk, if it names one."""
        # Line 2 only: a thousand kept scripts must not be decoded whole to find it.
        stream = io.BytesIO(self.old or b"")
        stream.readline()
        line = stream.readline().decode("utf-8", errors="replace").rstrip("\r\n")
        if line.startswith(HEADER_PREFIX) and line.endswith(HEADER_SUFFIX):
            return line[len(HEADER_PREFIX):-len(HEADER_SUFFIX)]
        return None


def _lines(data: bytes | None) -> list[str]:
    # Split at LF only, as the shell does (str.splitlines also splits at U+2028 and others),
    # and keep line ends: a CRLF line must differ from the LF line obc writes.
    return [line.decode("utf-8", errors="replace") for line in io.BytesIO(data or b"")]


def is_obc_file(path: Path) -> bool:
    """Return whether `path` is a regular file (not a link) that carries obc's header."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return False
        with path.open("rb") as stream:
            stream.readline()
            return stream.readline().startswith(HEADER_PREFIX.encode())
    except OSError:
        return False


class Output(Protocol):
    """A file to write under OUT (pipeline.Script, sweep.SweepFile, incremental.Reused)."""

    @property
    def relative_path(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def mode(self) -> int: ...
    @property
    def source_file(self) -> str: ...
    @property
    def folder(self) -> str: ...


def plan(out: Path, scripts: Iterable[Output], *, prune: bool = False) -> list[Change]:
    """Compare OUT with `scripts`: changed, missing, unchanged, stale and kept files, in path
    order. An obc file that no input produced is stale when its run file is gone, or was
    compiled now into other files; with `prune`, always; else it is kept.

    Raises ObcError, naming every such path, if anything that is not obc's (a link, a folder,
    a file without the header) stands where a script must go: obc writes nothing then.
    """
    scripts = list(scripts)
    wanted = {out / script.relative_path: (script.text.encode(), script.mode)
              for script in scripts}
    conflicts = [problem for path in wanted if (problem := _conflict(out, path))]
    if conflicts:
        raise ObcError("not obc's, but where obc must write (obc writes nothing):\n  "
                       + "\n  ".join(dict.fromkeys(conflicts)) + "\nobc replaces only files "
                       "that carry its generated-file header, and never follows or replaces a "
                       "link; move these away or delete them")
    changes = [_compare(path, text, mode) for path, (text, mode) in wanted.items()]
    compiled: dict[str, list[str]] = {}
    for script in scripts:
        folders = compiled.setdefault(script.source_file, [])
        folders += [] if script.folder in folders else [script.folder]
    root = names_root(out)
    changes += [_unproduced(root, path, compiled, prune)
                for path in _obc_files(out) if path not in wanted]
    return sorted(changes, key=lambda change: str(change.path))


def _unproduced(root: Path, path: Path, compiled: dict[str, list[str]], prune: bool) -> Change:
    """What becomes of an obc script that no input produced this time (`root`: what the run
    file in its header is relative to)."""
    old = path.read_bytes()
    source = Change(path, "stale", old).source()
    if prune:
        return Change(path, "stale", old, reason="not produced by these inputs (--prune)")
    if source is None:
        return Change(path, "stale", old, reason="its header names no run file")
    if not (root / source).is_file():
        return Change(path, "stale", old, reason=f"its run file {source} is gone")
    if source in compiled and len(compiled[source]) == 1:
        return Change(path, "stale", old, reason=f"its run file {source} now has id "
                      f"'{compiled[source][0]}'")
    if source in compiled:
        return Change(path, "stale", old, reason=f"its run file {source} no longer makes it")
    return Change(path, "kept", old, reason=f"its run file {source} was not given")


def _conflict(out: Path, path: Path) -> str | None:
    for folder in (out, path.parent):
        if folder.is_symlink():
            return f"{folder}: is a symbolic link"
        if folder.exists() and not folder.is_dir():
            return f"{folder}: is not a folder"
    if path.is_symlink():
        return f"{path}: is a symbolic link"
    if path.exists() and not is_obc_file(path):
        return f"{path}: is not a file with obc's generated-file header"
    return None


def _compare(path: Path, new: bytes, mode: int) -> Change:
    if not path.exists():
        return Change(path, "missing", None, new, mode=mode)
    old, old_mode = path.read_bytes(), stat.S_IMODE(path.stat().st_mode)
    return Change(path, "unchanged" if old == new and old_mode == mode else "changed", old,
                  new, old_mode, mode=mode)


def _obc_files(out: Path) -> list[Path]:
    if not out.is_dir() or out.is_symlink():
        return []
    return sorted(path for folder in out.iterdir() if folder.is_dir() and not folder.is_symlink()
                  for path in (folder / name for name in OUT_FILES) if is_obc_file(path))


def apply(changes: list[Change]) -> list[Change]:
    """Carry out a plan: write changed and missing files, remove stale ones.

    Each new file is written beside its target first, and all of them are flushed to disk
    with one sync; only then is each renamed into place, and a second sync makes the renames
    durable. So a power cut leaves every file old or new, never empty, at the cost of two
    syncs rather than two per file (which cost seconds for a thousand files on a busy disk).
    Raises ObcError if a write or removal fails: when a file cannot be written nothing has
    changed; when a rename or removal fails, the files before it are done, it and the ones
    after it are as they were.
    """
    staged = _stage([change for change in changes if change.status in ("changed", "missing")])
    try:
        _sync(staged)
        done = [_carry_out(change, staged) for change in changes]
    finally:
        for tmp in staged.values():  # those not renamed, after a failure
            Path(tmp).unlink(missing_ok=True)
    _sync(staged)
    return done


def _stage(changes: list[Change]) -> dict[Path, str]:
    """Write each change's bytes to a temporary file beside it; return them by target."""
    staged: dict[Path, str] = {}
    try:
        for change in changes:
            staged[change.path] = _write_temporary(change.path, change.new or b"", change.mode)
    except OSError as error:
        for tmp in staged.values():
            Path(tmp).unlink(missing_ok=True)
        raise ObcError(f"{change.path}: cannot write: {error.strerror or error}; no file was "
                       "changed") from error
    return staged


def _write_temporary(path: Path, data: bytes, mode: int, *,
                     durable: bool = False) -> str:
    """Write `data` to a new temporary file in `path`'s folder, with `mode` whatever the umask
    (and flushed to disk if `durable`); return its name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp: O_EXCL, mode 0600, unpredictable name, in the same folder so rename is atomic.
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fchmod(stream.fileno(), mode)
            if durable:
                os.fsync(stream.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def _carry_out(change: Change, staged: dict[Path, str]) -> Change:
    try:
        if change.path in staged:
            os.replace(staged[change.path], change.path)
            return Change(change.path, "written", change.old, change.new, mode=change.mode)
        if change.status == "stale":
            change.path.unlink()
            _remove_if_empty(change.path.parent)
            return Change(change.path, "removed", change.old, reason=change.reason)
    except OSError as error:
        verb = "remove" if change.status == "stale" else "write"
        raise ObcError(f"{change.path}: cannot {verb}: {error.strerror or error}; the files "
                       "before it are done, it and the ones after it are as they were") from error
    return change


def write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Write one file: `data` to `path`, with `mode` whatever the umask, through a temp file
    flushed to disk and renamed, the rename made durable too."""
    tmp = _write_temporary(path, data, mode, durable=True)
    try:
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    # Makes the rename itself durable; without it a power cut can bring the old name back.
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync(staged: dict[Path, str]) -> None:
    """Flush the file system that holds the written files: one call for all of them."""
    if not staged:
        return
    fd = os.open(next(iter(staged)).parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _syncfs(fd)
    finally:
        os.close(fd)


def _syncfs(fd: int) -> None:
    # syncfs(2) flushes one file system; Python has no binding for it, and os.sync() would
    # flush every file system of the machine.
    import ctypes  # noqa: PLC0415 -- only a compile that writes needs it

    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, "syncfs", None) is None or libc.syncfs(fd) != 0:
        os.sync()


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not empty: it holds files that are not obc's
        folder.rmdir()
