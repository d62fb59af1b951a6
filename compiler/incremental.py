"""Compiled scripts reused across runs: a run file whose bytes, name, embedded files, obc
build and shellcheck build are all as when it last compiled (and passed the check) gives the
same script, so `compile --check` of an unchanged tree only hashes it.

A record holds the script's id and a hash of its text, not the text: when the script in OUT
has that hash it is the text, and when it has not, the run file is compiled again.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .cache import FORMAT, Store, digest
from .load import MAX_FILE_BYTES, Source
from .normalise import attachment_fields
from .project import source_name
from .resources import data_dir, schema_path

_PACKAGE = Path(__file__).parent
_ID = re.compile("[a-z0-9][a-z0-9_.-]*")


@dataclass(frozen=True, slots=True)
class Reuse:
    """Where records are kept, what all of them depend on, and the OUT they describe."""

    store: Store
    # The obc build (its code, templates and schema) and the shellcheck that checked them.
    context: str
    out: Path


@dataclass(frozen=True, slots=True)
class Reused:
    """A script as it compiled last time: its id, where the id stands, and its text."""

    job_id: str
    id_line: int
    id_column: int
    text: str


@cache
def build_fingerprint() -> str:
    """Return a hash of obc's own code, templates and schema: a version string alone would not
    change when a checkout is edited."""
    files = sorted({*_PACKAGE.rglob("*.py"), *data_dir("templates").glob("*.j2"), schema_path()})
    return digest(*(part for path in files
                    for part in (path.relative_to(path.parent.parent).as_posix(),
                                 path.read_bytes())))


def lookup(reuse: Reuse, path: Path, display: str,
           project: Path) -> tuple[str | None, Reused | None]:
    """Return the key of the run file at `path` (in the project rooted at `project`), and its
    script as it compiled last time if the run file, every file it embeds and the script in
    OUT are as they were then."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None, None  # never open a pipe or a device here
        data = path.read_bytes()
    except OSError:
        return None, None  # the compile proper reports it
    # Where the run file is named from and where it resolves to decide what it may embed and
    # how its header names it; its bytes, what it says.
    key = digest(FORMAT, "scripts", reuse.context, display, source_name(path),
                 os.path.abspath(path), os.path.realpath(path), str(project), data)
    try:
        return key, _reused(reuse, path, reuse.store.get(key))
    except (KeyError, TypeError, ValueError):  # a record from elsewhere, or damaged
        return key, None


def _reused(reuse: Reuse, path: Path, record: Any) -> Reused | None:
    if record is None or record["attachments"] != _attachment_prints(
            path.parent, [name for name, _, _ in record["attachments"]]):
        return None
    try:
        script = (reuse.out / record["id"] / "job.sh").read_bytes()
    except OSError:
        return None
    if hashlib.sha256(script).hexdigest() != record["sha256"]:
        return None
    line, column = record["id_mark"]
    if not _ID.fullmatch(record["id"]):  # it names a folder obc writes to: never trust blindly
        return None
    return Reused(record["id"], line, column, script.decode("utf-8"))


def remember(reuse: Reuse, key: str, record: dict[str, Any]) -> None:
    """Keep `record` (of a script that passed the check) under `key`."""
    reuse.store.put(key, record)


def record(job_id: str, id_line: int, id_column: int, text: str, source: Source) -> \
        dict[str, Any] | None:
    """Return what to keep of a script compiled from `source`, None if a file it embeds is
    gone already."""
    prints = attachment_prints(source)
    if prints is None:
        return None
    return {"id": job_id, "id_mark": [id_line, id_column],
            "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(), "attachments": prints}


def attachment_prints(source: Source) -> list[list[str]] | None:
    """Return what identifies each file a loaded run file embeds: its name as written, where
    it resolves to, and a hash of its bytes."""
    return _attachment_prints(source.directory,
                              [relative for _, relative in attachment_fields(source.data)])


def _attachment_prints(directory: Path, names: list[str]) -> list[list[str]] | None:
    prints = []
    for name in names:
        real = os.path.realpath(directory / name)
        try:
            if not stat.S_ISREG(os.stat(real).st_mode):
                return None  # never open a pipe or a device here
            with open(real, "rb") as stream:
                content = stream.read(MAX_FILE_BYTES + 1)
        except OSError:
            return None
        prints.append([name, real, hashlib.sha256(content).hexdigest()])
    return prints
