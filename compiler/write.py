"""Stage 6, write: compiled scripts → files under OUT, or a report of how OUT differs.

obc owns a file only if it carries obc's generated-file header. It never writes over,
deletes or follows anything else; each write goes to a temporary file in the same folder
and is renamed into place, so a file is always either old or new, never half-written.
"""

from __future__ import annotations

import difflib
import os
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .diagnostics import ObcError
from .pipeline import SCRIPT_NAME, Script
from .render import GENERATED_PREFIX

HEADER_PREFIX = "# " + GENERATED_PREFIX
MODE = 0o755

Status = Literal["written", "unchanged", "removed", "changed", "missing", "stale"]


@dataclass(frozen=True, slots=True)
class Change:
    """What happened, or (with --check) what would happen, to one file under OUT."""

    path: Path
    status: Status
    old: str | None = None
    new: str | None = None

    def diff(self) -> str:
        """Return a unified diff from the file on disk to what obc would write."""
        return "".join(difflib.unified_diff(
            (self.old or "").splitlines(keepends=True), (self.new or "").splitlines(keepends=True),
            fromfile=str(self.path), tofile=str(self.path)))


def is_obc_file(path: Path) -> bool:
    """Return whether `path` is a regular file (not a link) that carries obc's header."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return False
        with path.open(encoding="utf-8", errors="replace") as stream:
            stream.readline()
            return stream.readline().startswith(HEADER_PREFIX)
    except OSError:
        return False


def plan(out: Path, scripts: Iterable[Script]) -> list[Change]:
    """Compare OUT with `scripts`: changed, missing, unchanged and stale files, in path order."""
    changes: list[Change] = []
    wanted = {out / script.relative_path: script.text for script in scripts}
    for path, text in wanted.items():
        _refuse_foreign(out, path)
        if not path.exists():
            changes.append(Change(path, "missing", None, text))
            continue
        old = path.read_text(encoding="utf-8", errors="replace")
        same = old == text and stat.S_IMODE(path.stat().st_mode) == MODE
        changes.append(Change(path, "unchanged" if same else "changed", old, text))
    changes += [Change(path, "stale", path.read_text(encoding="utf-8", errors="replace"))
                for path in _obc_files(out) if path not in wanted]
    return sorted(changes, key=lambda change: str(change.path))


def _refuse_foreign(out: Path, path: Path) -> None:
    for part in (out, path.parent, path):
        if part.is_symlink():
            raise ObcError(f"{part}: is a symbolic link; obc does not follow or replace links")
    if path.exists() and not is_obc_file(path):
        raise ObcError(f"{path}: exists and was not written by obc (no obc header); "
                       "move it away or delete it")


def _obc_files(out: Path) -> list[Path]:
    if not out.is_dir() or out.is_symlink():
        return []
    return sorted(path for folder in out.iterdir() if folder.is_dir() and not folder.is_symlink()
                  for path in [folder / SCRIPT_NAME] if is_obc_file(path))


def apply(changes: list[Change]) -> list[Change]:
    """Carry out a plan: write changed and missing files, remove stale ones."""
    done = []
    for change in changes:
        if change.status in ("changed", "missing"):
            write_atomic(change.path, change.new or "")
            done.append(Change(change.path, "written"))
        elif change.status == "stale":
            change.path.unlink()
            _remove_if_empty(change.path.parent)
            done.append(Change(change.path, "removed"))
        else:
            done.append(change)
    return done


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path`, mode 0755 whatever the umask, through a temp file and rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as stream:
            stream.write(text)
            stream.flush()
            os.fchmod(stream.fileno(), MODE)
            os.fsync(stream.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass  # not empty: it holds files that are not obc's
