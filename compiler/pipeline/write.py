"""Stage 6b, write: the changes changes.py found → files under OUT. The only module of obc
that writes under OUT (the import contract in pyproject.toml keeps every package but pipeline
and cli from importing it).

Each write goes to a temporary file in the same folder and is renamed into place, so a file
is always either old or new, never half-written. A compile stages each file as soon as it is
checked (Settle, in the process that made it), so that no process holds every script; the
renames wait until every input has passed, and a compile that fails removes what it staged.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from ..core.diagnostics import ObcError
from .changes import Change, Output, compare

# The changes whose new bytes are written.
_TO_WRITE = ("changed", "missing")


@dataclass(frozen=True, slots=True)
class Settle:
    """What becomes of a chunk's checked files (pipeline.Settle): each is compared with OUT
    and then, to `write`, its new bytes are staged beside it; else (--check) only what the
    report says of it is kept, and its bytes too if it differs and `diff` shows it."""

    out: Path
    write: bool
    diff: bool = False

    def __call__(self, outputs: Iterable[Output]) -> list[Change]:
        return [self._settle(output) for output in outputs]

    def _settle(self, output: Output) -> Change:
        try:
            change = compare(self.out, output)
        except OSError as error:  # account_for raises it, if the inputs have no problem
            return Change(self.out / output.relative_path, "unreadable", error=error)
        if change.status not in _TO_WRITE:
            return change.without_bytes()
        if self.write:
            return stage(change)
        return change if self.diff else change.without_bytes()



def stage(change: Change) -> Change:
    """Write the new bytes of `change` to a temporary file beside it, for apply to rename
    over it (or discard to remove), and let the bytes go; if they cannot be written, the
    change keeps the error, and apply then writes no file."""
    made = []
    folder = change.path.parent
    while not folder.exists():
        made.append(folder)
        folder = folder.parent
    try:
        staged = _write_temporary(change.path, change.new or b"", change.mode)
    except OSError as error:
        _remove_folders(made)
        return replace(change.without_bytes(), error=error)
    return replace(change.without_bytes(), staged=staged, made=tuple(made))


def discard(changes: Iterable[Change]) -> None:
    """Remove what was staged for `changes`, and the folders made for it, if empty."""
    changes = list(changes)
    for change in changes:
        if change.staged:
            Path(change.staged).unlink(missing_ok=True)
    _remove_folders(folder for change in changes for folder in change.made)


def _remove_folders(folders: Iterable[Path]) -> None:
    for folder in sorted(set(folders), key=lambda f: len(f.parts), reverse=True):
        _remove_if_empty(folder)


def apply(changes: list[Change]) -> list[Change]:
    """Carry out a plan: write changed and missing files, remove stale ones.

    Each new file is written beside its target first, and all of them are flushed to disk
    with one sync; only then is each renamed into place, and a second sync makes the renames
    durable. So a power cut leaves every file old or new, never empty, at the cost of two
    syncs rather than two per file (which cost seconds for a thousand files on a busy disk).
    Changes staged already (stage) are renamed; the others are written first. Raises
    ObcError if a write or removal fails: when a file cannot be written nothing has changed;
    when a rename or removal fails, the files before it are done, it and the ones after it
    are as they were.
    """
    try:
        unwritten = next((change for change in changes if change.error), None)
        if unwritten is not None:
            raise _cannot_write(unwritten.path, unwritten.error)
        staged = _stage([change for change in changes
                         if change.status in _TO_WRITE and not change.staged])
    except ObcError:
        discard(changes)
        raise
    staged.update((change.path, change.staged) for change in changes if change.staged)
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
        raise _cannot_write(change.path, error) from error
    return staged


def _cannot_write(path: Path, error: OSError) -> ObcError:
    return ObcError(f"{path}: cannot write: {error.strerror or error}; no file was changed")


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
