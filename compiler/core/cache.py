"""obc's cache on disk: small JSON records named by the hash of what they depend on.

Two kinds share it: shellcheck's findings for a text (so a script shape, or an unchanged
script, is checked once per shellcheck build), and compiled scripts by the bytes of their run
file (so `compile --check` of an unchanged tree compiles nothing). A record's name is the
hash of everything its content depends on, so a record is never stale, only unused; any
record can be deleted at any time. Writes go to a temporary file renamed into place, so concurrent
compiles read a whole record or none. A cache that cannot be read or written is skipped.

Records (and Jinja's compiled templates, which are pickles) are read only from a folder that
no one but the invoker can change: owned by them, mode 0700, in folders no one else can
replace it from. Any other folder is refused, and obc compiles without a cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Part of every key: a new record layout makes the old records unused, never misread.
FORMAT = "obc-cache-2"
ENV_DIR = "OBC_COMPILE_CACHE"


def default_dir() -> Path | None:
    """Return the cache folder: $OBC_COMPILE_CACHE, else $XDG_CACHE_HOME/obc, else ~/.cache/obc;
    None when OBC_COMPILE_CACHE is set but empty (no cache) or no home is known."""
    chosen = os.environ.get(ENV_DIR)
    if chosen is not None:
        return Path(chosen) if chosen else None
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "obc"
    try:
        return Path.home() / ".cache" / "obc"
    except RuntimeError:  # no HOME and no passwd entry
        return None


@dataclass(frozen=True, slots=True)
class Location:
    """The cache folder to use (None: no cache), and why the chosen one was refused, if it was."""

    folder: Path | None
    refused: str = ""


def private_location() -> Location:
    """Return the cache folder (default_dir), made if missing, if only the invoker can change
    what is in it; else no folder, and why (nothing if it just cannot be made)."""
    chosen = default_dir()
    if chosen is None:
        return Location(None)
    try:
        return Location(_private(chosen))
    except OSError:  # cannot be made or read: skipped, as a record that cannot be
        return Location(None)
    except _Unsafe as error:
        return Location(None, f"{chosen}: {error}")


class _Unsafe(Exception):
    """A folder that someone besides the invoker can change."""


def _private(folder: Path) -> Path:
    """Return where `folder` resolves to, made mode 0700 if missing or only readable by others;
    raise _Unsafe if another user owns it, anyone else can write it, or can replace it or a
    folder above it."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    real = Path(os.path.realpath(folder))
    me = os.geteuid()
    info = real.lstat()
    if info.st_uid != me:
        raise _Unsafe(f"it is owned by uid {info.st_uid}, not by you")
    if info.st_mode & 0o022:
        # Others could have written records in it already: tightening it would not undo that.
        raise _Unsafe(f"others can write in it (mode {stat.S_IMODE(info.st_mode):04o})")
    if info.st_mode & 0o077:
        real.chmod(0o700)  # yours and written by you alone: made private
    for child, parent in zip((real, *real.parents), real.parents, strict=False):
        above = parent.lstat()
        if above.st_uid not in (me, 0):
            raise _Unsafe(f"{parent} is owned by uid {above.st_uid}, who can replace what is in it")
        sticky_and_ours = above.st_mode & stat.S_ISVTX and child.lstat().st_uid in (me, 0)
        if above.st_mode & 0o022 and not sticky_and_ours:
            raise _Unsafe(f"others can replace what is in {parent} "
                          f"(mode {stat.S_IMODE(above.st_mode):04o})")
    return real


def digest(*parts: str | bytes) -> str:
    """Return a hex SHA-256 of `parts`, each length-prefixed so that no two lists collide."""
    hasher = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
        hasher.update(len(data).to_bytes(8, "big"))
        hasher.update(data)
    return hasher.hexdigest()


class Store:
    """One kind of record, under `root/kind/`; a `None` root stores nothing."""

    def __init__(self, root: Path | None, kind: str) -> None:
        self.folder = None if root is None else root / kind
        # The folders of records made or found already: ten thousand records go to 256.
        self._made: set[Path] = set()

    def get(self, key: str) -> Any:
        """Return the record stored under `key`, or None if there is none (or it is unreadable)."""
        if self.folder is None:
            return None
        try:
            # Bytes to json's C decoder: a text stream would decode them once more first.
            with open(self._path(key), "rb") as stream:
                return json.loads(stream.read())
        except (OSError, ValueError):
            return None

    def put(self, key: str, value: Any) -> None:
        """Store `value` under `key`, atomically; a failure (full disk, read-only) is ignored."""
        if self.folder is None:
            return
        path = self._path(key)
        with contextlib.suppress(OSError):
            if path.parent not in self._made:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._made.add(path.parent)
            fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as stream:
                    # dumps, not dump: only a whole dump goes through json's C encoder.
                    stream.write(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key[2:]}.json"
