"""Stage 6a, compare: compiled scripts against OUT → the change each file would undergo.
Reads OUT, never writes it: write.py carries the changes out.

The files are OUT/<id>/job.sh, a sweep's OUT/<id>/sweep.sh and runs.tsv, and the submit.sh
of a job with stages. obc owns a file only if it carries obc's generated-file header (its
second line). It never writes over, deletes or follows anything else.

Every file under OUT is accounted for: one the inputs produce is compared byte for byte; an
obc file they do not produce is kept only if the run file its header names compiles to
exactly its bytes; and anything else where obc writes, or claiming obc's header anywhere
under OUT, is reported as not obc's (`--check` fails), but left as it is.
"""

from __future__ import annotations

import difflib
import errno
import io
import itertools
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO, Literal, Protocol

from ..core.diagnostics import ObcError
from ..core.project import names_root
from ..render.stages import SUBMIT_SCRIPT
from ..render.summary import GENERATED_PREFIX
from ..render.sweep import RUNS_TABLE, SWEEP_SCRIPT
from .pipeline import SCRIPT_MODE, SCRIPT_NAME

HEADER_PREFIX = "# " + GENERATED_PREFIX
HEADER_SUFFIX = ". DO NOT EDIT."
_HEADER = HEADER_PREFIX.encode()
# The files obc writes in each folder of OUT, and so the only ones it may find stale there.
OUT_FILES = (SCRIPT_NAME, SWEEP_SCRIPT, RUNS_TABLE, SUBMIT_SCRIPT)

# How a file claiming obc wrote it starts: the header, on line 1 or 2.
CLAIM = GENERATED_PREFIX.split(" from ")[0].encode()

Status = Literal["written", "unchanged", "removed", "changed", "missing", "stale", "kept",
                 "foreign", "conflict", "unreadable"]


@dataclass(frozen=True, slots=True)
class Change:
    """What happened, or (with --check) what would happen, to one file under OUT."""

    path: Path
    status: Status
    old: bytes | None = None
    new: bytes | None = None
    old_mode: int = SCRIPT_MODE
    # For a file no input produced: why it is stale, kept, or not obc's (foreign); for one
    # where something that is not obc's stands (a conflict): what stands there.
    reason: str = ""
    # The mode obc writes the file with.
    mode: int = SCRIPT_MODE
    # Once the bytes are let go (without_bytes): the first line that differs, and whether
    # only the mode does.
    line: int | None = None
    mode_only: bool | None = None
    # Where the new bytes wait to be renamed over the file (write.stage), and the folders
    # made for them, deepest first.
    staged: str | None = None
    made: tuple[Path, ...] = ()
    # Why OUT could not be read where the file goes (unreadable), or the new bytes could not
    # be staged.
    error: OSError | None = None

    def without_bytes(self) -> Change:
        """Return this change without the files' bytes, with what a report says of them."""
        same = self.only_mode_differs()
        # Equal bytes have no line that differs: not split into lines to find none.
        return replace(self, old=None, new=None, line=1 if same else self.first_changed_line(),
                       mode_only=same)

    def only_mode_differs(self) -> bool:
        """Return whether the file's bytes are what obc writes (a change is then its mode)."""
        return self.old == self.new if self.mode_only is None else self.mode_only

    def diff(self) -> str:
        """Return a unified diff from the file on disk to what obc would write."""
        return "".join(difflib.unified_diff(
            _lines(self.old), _lines(self.new),
            fromfile="/dev/null" if self.old is None else str(self.path),
            tofile="/dev/null" if self.new is None else str(self.path)))

    def first_changed_line(self) -> int:
        """Return the 1-based number of the first line that differs (1 if none does)."""
        if self.line is not None:
            return self.line
        if self.old is None or self.new is None:  # a file made or removed whole
            return 1
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
        return stat.S_ISREG(path.lstat().st_mode) and _has_header(path)
    except OSError:
        return False


def _has_header(path: Path | str) -> bool:
    """Whether the file at `path` has obc's generated-file header on its second line."""
    try:
        with open(path, "rb") as stream:
            return _carries_header(stream)
    except OSError:
        return False


def _carries_header(stream: BinaryIO) -> bool:
    """Whether the file open in `stream`, read from its start, has obc's header on its second
    line (its first two lines are read)."""
    stream.readline()
    return stream.readline().startswith(_HEADER)


class Placed(Protocol):
    """Where a file goes under OUT and which run file made it (pipeline.Placed)."""

    @property
    def relative_path(self) -> str: ...
    @property
    def source_file(self) -> str: ...
    @property
    def folder(self) -> str: ...


class Output(Placed, Protocol):
    """A file to write under OUT (pipeline.Script, sweep.SweepFile, incremental.Reused)."""

    @property
    def text(self) -> str: ...
    @property
    def mode(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Elsewhere:
    """What run files not given compile to: those named by obc's files under OUT."""

    outputs: tuple[Output, ...] = ()
    # Each of them that did not compile, by the name its scripts' headers give it: why not.
    problems: Mapping[str, str] = field(default_factory=dict)


# Compiles the run files named by obc's files under OUT (header name → path) that were not
# given, with the options of the inputs that were.
CompileNamed = Callable[[dict[str, Path]], Elsewhere]


def _compile_nothing(named: dict[str, Path]) -> Elsewhere:
    return Elsewhere(problems=dict.fromkeys(named, "was not compiled"))


def changes_to(out: Path, scripts: Iterable[Output], *, prune: bool = False,
               compile_named: CompileNamed = _compile_nothing) -> list[Change]:
    """Compare OUT with `scripts`: changed, missing, unchanged, stale, kept and foreign files,
    in path order (see account_for)."""
    scripts = list(scripts)
    return account_for(out, [compare(out, script) for script in scripts], scripts, prune=prune,
                       compile_named=compile_named)


def compare(out: Path, output: Output) -> Change:
    """Compare one file to write under OUT with what is there: a conflict if what stands
    there is not obc's."""
    path = out / output.relative_path
    conflict = _folder_conflict(out) or _folder_conflict(path.parent)
    if conflict:
        return Change(path, "conflict", reason=conflict, mode=output.mode)
    return _compare(path, output.text.encode(), output.mode)


def account_for(out: Path, compared: Iterable[Change], placed: Iterable[Placed], *,
                prune: bool = False, compile_named: CompileNamed = _compile_nothing) -> \
        list[Change]:
    """Return the changes `compared` (each file the inputs produce against OUT, from compare,
    in the order of `placed`, where they go and which run file made them) with every other
    file under OUT accounted for: changed, missing, unchanged, stale, kept and foreign files,
    in path order. An obc file that no input produced is stale when its run file is gone,
    does not compile (`compile_named` compiles it) or compiles to other files; with `prune`,
    always. It is kept when its run file was not given and compiles to exactly its bytes and
    mode, and changed when to other ones. Any other file where obc writes, or claiming obc's
    header elsewhere under OUT, is foreign.

    Raises ObcError, naming every such path, if anything that is not obc's (a link, a folder,
    a file without the header) stands where a script must go: obc writes nothing then; and
    the OSError of the first file whose place in OUT could not be read.
    """
    by_path = {change.path: change for change in compared}
    unreadable = next((c.error for c in by_path.values() if c.status == "unreadable"), None)
    if unreadable is not None:
        raise unreadable
    conflicts = [change.reason for change in by_path.values() if change.status == "conflict"]
    if conflicts:
        raise ObcError("not obc's, but where obc must write (obc writes nothing):\n  "
                       + "\n  ".join(dict.fromkeys(conflicts)) + "\nobc replaces only files "
                       "that carry its generated-file header, and never follows or replaces a "
                       "link; move these away or delete them")
    changes = list(by_path.values())
    compiled: dict[str, list[str]] = {}
    for script in placed:
        folders = compiled.setdefault(script.source_file, [])
        folders += [] if script.folder in folders else [script.folder]
    # The new bytes waiting beside their files are obc's own, not files found in OUT.
    waiting = {change.staged for change in changes if change.staged}
    produced = {os.fspath(path) for path in by_path}
    found = list(_unaccounted(out, lambda path: path in produced or (
        bool(waiting) and os.path.abspath(path) in waiting)))
    changes += [Change(path, "foreign", reason=reason) for path, reason in found if reason]
    unproduced = [Change(path, "stale", path.read_bytes()) for path, reason in found
                  if not reason]
    root = names_root(out)
    named = {source: root / source for change in unproduced
             if (source := change.source()) and source not in compiled
             and _names_a_file(root, source)}
    elsewhere = compile_named(named) if named and not prune else Elsewhere()
    producers = _Producers(root, compiled, elsewhere.problems, {
        out / output.relative_path: (output.text.encode(), output.mode)
        for output in elsewhere.outputs if output.source_file in named})
    changes += [_unproduced(change, producers, prune) for change in unproduced]
    return sorted(changes, key=lambda change: str(change.path))


@dataclass(frozen=True, slots=True)
class _Producers:
    """The run files that obc's files under OUT name, as far as they are known: `compiled`,
    those given, by the folders they made; and of those not given, `problems`, why each
    that does not compile does not, and `produced`, the bytes and mode of each file they make,
    by path. The names are relative to `root`."""

    root: Path
    compiled: dict[str, list[str]]
    problems: Mapping[str, str]
    produced: dict[Path, tuple[bytes, int]]


def _unproduced(change: Change, producers: _Producers, prune: bool) -> Change:
    """What becomes of an obc file that no input given produced this time (`change`: it as
    stale): it stays stale, or it is kept or changed as its run file, not given, makes it."""
    why = "not produced by these inputs (--prune)" if prune else _why_stale(
        change.path, change.source(), producers)
    if why:
        return replace(change, reason=why)
    compared = _compare(change.path, *producers.produced[change.path])
    if compared.status == "changed":
        return compared
    return replace(compared, status="kept", reason=f"its run file {change.source()} was not "
                   "given; it compiles to these bytes")


def _why_stale(path: Path, source: str | None, producers: _Producers) -> str | None:
    """Why an obc file that no input given produced is stale; None if its run file, not
    given, makes it."""
    if source is None:
        return "its header names no run file"
    if source not in producers.compiled and not _names_a_file(producers.root, source):
        return f"its run file {source} is gone"
    if len(producers.compiled.get(source, [])) == 1:
        return f"its run file {source} now has id '{producers.compiled[source][0]}'"
    if source in producers.problems:
        return f"its run file {source} {producers.problems[source]}"
    if path not in producers.produced:
        return f"its run file {source} no longer makes it"
    return None


def _names_a_file(root: Path, source: str) -> bool:
    """Whether a header's run file name is a path inside `root` (relative, no `..`) that is
    a file: only such a name is compiled to see whether it makes the file."""
    name = Path(source)
    return not name.is_absolute() and ".." not in name.parts and (root / name).is_file()


def _unaccounted(out: Path, known: Callable[[str], bool]) -> Iterator[tuple[Path, str]]:
    """Every file under OUT that obc must account for but those `known` to be (by path as
    text: compared already, or obc's new bytes waiting to be renamed; ten thousand files not
    read again): each obc file where obc writes, with no reason; and with why it is not obc's,
    anything else there (a link, a folder, a file without the header) and any file elsewhere
    that claims obc's header. Links are not followed."""
    if not out.is_dir() or out.is_symlink():
        return
    yield from _unaccounted_in(os.fspath(out), 0, known)


def _unaccounted_in(folder: str, depth: int, known: Callable[[str], bool]) -> \
        Iterator[tuple[Path, str]]:
    """_unaccounted in `folder`, `depth` folders below OUT, and in the folders under it. Each
    entry's kind comes with its folder's listing: a folder of OUT costs no stat of its own."""
    with os.scandir(folder) as listing:  # one that cannot be read could hide anything: raised
        entries = sorted(listing, key=lambda entry: entry.name)
    for entry in entries:
        if known(entry.path):
            continue
        if depth == 1 and entry.name in OUT_FILES:
            yield Path(entry.path), "" if _is_obc_entry(entry) else _why_not_obcs(entry)
        elif entry.is_dir(follow_symlinks=False):
            yield from _unaccounted_in(entry.path, depth + 1, known)
        elif depth == 0 and entry.is_symlink() and entry.is_dir():
            yield Path(entry.path), "a symbolic link, where obc makes its folders"
        elif entry.is_file(follow_symlinks=False) and _has_claim(entry.path):
            yield Path(entry.path), "its header claims obc wrote it, where obc writes no file"


def _why_not_obcs(entry: os.DirEntry) -> str:
    if entry.is_symlink():
        return "a symbolic link, where obc writes its files"
    if not entry.is_file(follow_symlinks=False):
        return "not a regular file, where obc writes its files"
    return "it has no generated-file header, where obc writes its files"


def _is_obc_entry(entry: os.DirEntry) -> bool:
    """is_obc_file of a listed entry, whose kind its listing told already."""
    return entry.is_file(follow_symlinks=False) and _has_header(entry.path)


def _has_claim(path: str) -> bool:
    """Whether the file at `path` has obc's header on line 1 or 2."""
    try:
        with open(path, "rb") as stream:
            return any(CLAIM in stream.readline(4096) for _ in range(2))
    except OSError:
        return False


def _folder_conflict(folder: Path) -> str | None:
    """What stands where obc needs a folder, if it is not one (a link, a file); a folder
    missing is none: obc makes it."""
    found = _lstat(folder)
    if found is not None and stat.S_ISLNK(found.st_mode):
        return f"{folder}: is a symbolic link"
    if found is not None and not stat.S_ISDIR(found.st_mode):
        return f"{folder}: is not a folder"
    return None


def _compare(path: Path, new: bytes, mode: int) -> Change:
    """Compare the file at `path` with the bytes and mode obc writes there; a conflict if what
    stands there is not obc's file. One lstat says what is there, one open reads it."""
    found = _lstat(path)
    if found is None:
        return Change(path, "missing", None, new, mode=mode)
    if stat.S_ISLNK(found.st_mode):
        return Change(path, "conflict", reason=f"{path}: is a symbolic link", mode=mode)
    old = _read_obc_file(path) if stat.S_ISREG(found.st_mode) else None
    if old is None:
        return Change(path, "conflict", mode=mode,
                      reason=f"{path}: is not a file with obc's generated-file header")
    old_mode = stat.S_IMODE(found.st_mode)
    return Change(path, "unchanged" if old == new and old_mode == mode else "changed", old,
                  new, old_mode, mode=mode)


def _read_obc_file(path: Path) -> bytes | None:
    """The bytes of the regular file at `path` if it carries obc's header (is_obc_file), else
    None; a file that cannot be opened is not obc's to replace either."""
    try:
        stream = path.open("rb")
    except OSError:
        return None
    with stream:
        if not _carries_header(stream):
            return None
        stream.seek(0)
        return stream.read()


def _lstat(path: Path) -> os.stat_result | None:
    """The status of `path` itself (a link not followed); None if nothing is there, as
    Path.exists says (an error that says more is raised)."""
    try:
        return path.lstat()
    except OSError as error:
        if error.errno in _NOTHING_THERE:
            return None
        raise


# The errors of a look at a path that mean nothing is there (pathlib's _IGNORED_ERRNOS).
_NOTHING_THERE = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)
