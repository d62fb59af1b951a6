"""Outputs reused across runs: a run file whose bytes, name, embedded files, obc build and
shellcheck build are all as when it last compiled (and passed the check) gives the same files
(its job.sh, or a sweep's scripts, sweep.sh and runs.tsv), so `compile --check` of an
unchanged tree only reads it and its record.

A record holds, for each file, where it goes under OUT, its mode, its text and where the id
it is named after stands. It says what the run file compiles to, never what is in OUT:
changes.changes_to compares the files in OUT with that text, byte for byte, as with any compile.
The library parts a text embeds (nine tenths of a job.sh) are kept by name, not as text: a
record is only read by the obc build that wrote it, whose parts are the same bytes.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ..core.cache import FORMAT, Store, digest
from ..core.files import read_at_most
from ..core.project import source_name
from ..core.resources import data_dir, schema_path
from ..core.shell import LIBRARY_SECTION
from ..read.load import MAX_FILE_BYTES, Mark, display_name
from ..render.library import PART_ORDER, part_text

# compiler/, all of whose modules make obc's build.
_PACKAGE = Path(__file__).parent.parent
# A folder or file name under OUT as obc makes them: never `..`, never a path.
_NAME = re.compile("[a-z0-9][a-z0-9_.-]*")


@dataclass(frozen=True, slots=True)
class Reuse:
    """Where records are kept, and what all of them depend on."""

    store: Store
    # The obc build (its code, templates and schema), the shellcheck that checked the
    # scripts and the options that decide what a run file compiles to.
    context: str


@dataclass(frozen=True, slots=True)
class Reused:
    """A file under OUT as its run file compiled to it last time, and so compiles to it now:
    what changes_to and the duplicate-id check need of it (pipeline.Script and
    sweep.SweepFile say more)."""

    relative_path: str
    text: str
    mode: int
    # The run file as diagnostics name it, as the header names it, and where the id stands.
    file: str
    source_file: str
    id_mark: Mark
    # No job to show: obc plan, which needs one, never reuses.
    job = None

    @property
    def folder(self) -> str:
        return self.relative_path.split("/")[0]


@cache
def build_fingerprint() -> str:
    """Return a hash of obc's own code, templates and schema: a version string alone would not
    change when a checkout is edited."""
    return digest(*(part for path in fingerprinted_files()
                    for part in (path.relative_to(path.parent.parent).as_posix(),
                                 path.read_bytes())))


def fingerprinted_files() -> list[Path]:
    """obc's code, its templates with the runtime library's parts (templates/lib/), and the
    schema: what a script depends on besides its run file."""
    templates = (path for path in data_dir("templates").rglob("*") if path.is_file())
    return sorted({*_PACKAGE.rglob("*.py"), *templates, schema_path()})


def lookup(reuse: Reuse, path: Path, project: Path, policy: str = "") -> \
        tuple[str | None, list[Reused] | None]:
    """Return the key of the run file at `path` (in the project rooted at `project`, judged by
    the site `policy`, as text), and its files as it compiled last time if the run file and
    every file it embeds are as they were then."""
    data = _read_regular(str(path))
    if data is None:
        return None, None  # the compile proper reports it
    # Where the run file is named from and where it resolves to decide what it may embed and
    # how its header names it; its bytes, what it says.
    names = display_name(path), source_name(path)
    key = digest(FORMAT, "outputs", reuse.context, *names, os.path.abspath(path),
                 os.path.realpath(path), str(project), policy, data)
    try:
        return key, _reused(path, names, reuse.store.get(key))
    except (KeyError, TypeError, ValueError):  # a record from elsewhere, or damaged
        return key, None


def _reused(path: Path, names: tuple[str, str], record: Any) -> list[Reused] | None:
    """The files a record says the run file at `path` compiles to, named as `names` says
    (diagnostics, the header); None if the record is not one, or its inputs changed."""
    if record is None or record["inputs"] != _input_prints(
            path.parent, [name for name, _, _ in record["inputs"]]):
        return None
    found = []
    for relative, mode, pieces, line, column in record["outputs"]:
        parts = relative.split("/")
        text = _text(pieces)
        # It names a file obc writes to: never trust it blindly.
        if len(parts) != 2 or not all(_NAME.fullmatch(part) for part in parts) or \
                text is None:
            return None
        found.append(Reused(relative, text, int(mode), *names, Mark(int(line), int(column))))
    return found or None


def _pieces(text: str) -> list[str | list[str]]:
    """`text` as a record keeps it: each library part it embeds as written, by its name
    (`[name]`), the text between them as it is. A part is looked for only where a section
    line names it (each part's first line): the script is read once, not once a part."""
    pieces: list[str | list[str]] = []
    done = 0
    at = text.find(_SECTION_START)
    while at >= 0:
        section = LIBRARY_SECTION.match(text, at)
        name = section.group(1) if section else ""
        if name in PART_ORDER and text.startswith(part_text(name), at):
            pieces += [text[done:at], [name]]
            done = at + len(part_text(name))
        at = text.find(_SECTION_START, max(done, at + 1))
    return [*pieces, text[done:]]


# How a section line starts (LIBRARY_SECTION).
_SECTION_START = "# --- obc's library: "


def _text(pieces: Any) -> str | None:
    """The text that a record's `pieces` stand for; None if they are not what _pieces makes."""
    if not isinstance(pieces, list):
        return None
    texts = []
    for piece in pieces:
        if isinstance(piece, str):
            texts.append(piece)
        elif isinstance(piece, list) and len(piece) == 1 and piece[0] in PART_ORDER:
            texts.append(part_text(piece[0]))
        else:
            return None
    return "".join(texts)


def record(outputs: Iterable[Any], inputs: list[str], directory: Path) -> \
        dict[str, Any] | None:
    """Return what to keep of the files a run file in `directory` compiled to (each with a
    relative_path, text, mode and id_mark), built from the files `inputs` names besides it;
    None if one of those is gone already."""
    prints = _input_prints(directory, inputs)
    if prints is None:
        return None
    return {"outputs": [[output.relative_path, output.mode, _pieces(output.text),
                         output.id_mark.line, output.id_mark.column] for output in outputs],
            "inputs": prints}


def _input_prints(directory: Path, names: list[str]) -> list[list[str]] | None:
    """Return what identifies each file: its name as written, where it resolves to, and a
    hash of its bytes (of as many as obc reads)."""
    prints = []
    for name in names:
        real = os.path.realpath(directory / name)
        content = _read_regular(real)
        if content is None:
            return None
        prints.append([name, real, hashlib.sha256(content).hexdigest()])
    return prints


def _read_regular(path: str) -> bytes | None:
    """Return as many bytes of the regular file at `path` as obc reads (one more than it
    accepts); None if it is not one (a pipe or a device is never opened) or cannot be read."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as stream:
            return read_at_most(stream, MAX_FILE_BYTES)
    except OSError:
        return None
