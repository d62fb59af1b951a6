"""`obc verify` of any script obc writes: a job.sh by its library (verify.py); a job's
submit.sh and a sweep's sweep.sh, which start other scripts, as a whole.

A submit.sh or sweep.sh is obc's when it is, byte for byte, the script this obc writes for
its plan record, and each job.sh it starts is the one whose sha256 it holds (found where it
finds them: OUT/<folder>/job.sh beside its own folder), with its library as released. Each
job.sh's job part is, as ever, what the admin reads.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..core.text import visible
from ..pipeline.pipeline import SCRIPT_NAME
from ..render.meaning import MAX_SHOWN, Hashed, NotWhole, read_back, read_record
from ..render.render import render_submit, render_sweep
from ..render.stages import Submit
from ..render.summary import SUBMIT_SCRIPT
from ..render.sweep import SWEEP_SCRIPT, Sweep
from .verify import Verdict, verify_text


@dataclass(frozen=True, slots=True)
class Starter:
    """A script that starts others, as its record says: its name, what it calls each
    script it starts, its obc version, the text this obc writes for it, and each script it
    starts as (which one, its folder under OUT, its sha256)."""

    name: str
    noun: str
    version: str
    written: str
    started: tuple[tuple[str, str, str], ...]


def _submit(submit: Submit) -> Starter:
    return Starter(SUBMIT_SCRIPT, "stage", submit.obc_version, render_submit(submit),
                   tuple((stage.name, stage.folder, stage.checksum) for stage in submit.stages))


def _sweep(sweep: Sweep) -> Starter:
    return Starter(SWEEP_SCRIPT, "run", sweep.obc_version, render_sweep(sweep),
                   tuple((run.id, run.id, run.checksum) for run in sweep.runs))


# Each script that starts others: the type its record is of, its name, and what it is.
STARTERS: tuple[tuple[type, str, Callable[[Any], Starter]], ...] = (
    (Submit, SUBMIT_SCRIPT, _submit), (Sweep, SWEEP_SCRIPT, _sweep))


def verify_script(path: Path) -> Verdict:
    """Judge the script at `path`: a submit.sh or sweep.sh as a whole, with the job.sh
    scripts it starts; any other by its library."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return Verdict(None, (), (f"cannot be read: {error}",))
    try:
        starter = read_starter(text)
    except Unrebuildable as error:
        return Verdict(None, (), (
            f"its plan record keeps a text of several lines or more than {MAX_SHOWN} "
            "characters by its sha256, "
            f"so the {error} obc writes cannot be made again from it: not verified",))
    return verify_text(text) if starter is None else _verdict(starter, path, text)


class Unrebuildable(Exception):
    """A submit.sh or sweep.sh (named by the message) whose record keeps a text as its hash."""


def read_starter(text: str) -> Starter | None:
    """The submit.sh or sweep.sh a script's record says it is; None if it says neither (a
    job.sh, or no record); raise Unrebuildable if it says one only in part."""
    record = read_record(text)
    for cls, name, starter in STARTERS:
        try:
            return starter(read_back(record, cls))
        except Hashed as error:
            raise Unrebuildable(name) from error
        # Values of the right kinds can still be ones no run file makes (an empty name).
        except (NotWhole, IndexError, KeyError, TypeError, ValueError, AttributeError):
            continue
    return None


def _verdict(starter: Starter, path: Path, text: str) -> Verdict:
    problems = []
    if text != starter.written:
        problems.append(f"it is not the {starter.name} obc {__version__} writes for its "
                        "record (edited, or written by an obc with other templates): "
                        f"{_first_difference(starter.written, text)}")
    # As the script finds OUT: `cd -P "$its folder/.."`.
    out = path.parent.resolve().parent
    shown = [f"../{folder}/{SCRIPT_NAME}" for _, folder, _ in starter.started]
    for (which, folder, checksum), script in zip(starter.started, shown, strict=True):
        problems += [f"{starter.noun} {visible(which)}: {problem}" for problem in
                     _started_problems(out / folder / SCRIPT_NAME, visible(script), checksum)]
    count = f"{len(shown)} {starter.noun}{'s' if len(shown) != 1 else ''}"
    return Verdict(starter.version, (), tuple(problems), started=tuple(shown),
                   summary=f"obc {starter.version}'s {starter.name}, and the job.sh of its "
                           f"{count} as compiled, each library as released")


def _started_problems(script: Path, shown: str, checksum: str) -> list[str]:
    """What is wrong with a job.sh a script starts: not there, not the one whose sha256 it
    holds, or its library not as released."""
    try:
        data = script.read_bytes()
    except FileNotFoundError:
        return [f"{shown}: no such file"]
    except OSError as error:
        return [f"{shown}: cannot be read: {error.strerror or error}"]
    problems = []
    if hashlib.sha256(data).hexdigest() != checksum:
        problems.append(f"{shown} is not the job.sh obc compiled for it (its sha256 differs)")
    library = verify_text(data.decode("utf-8", "replace")).problems
    return problems + [f"{shown}: {problem}" for problem in library]


def _first_difference(written: str, text: str) -> str:
    """Where `text` first differs from what obc writes, by line."""
    if text + "\n" == written:
        return "its last line has no newline"
    ours, theirs = written.split("\n"), text.split("\n")
    pairs = enumerate(zip(ours, theirs, strict=False))
    at = next((n for n, (line, their) in pairs if line != their), min(len(ours), len(theirs)))
    if at >= len(theirs):
        return f"it ends at line {len(theirs)}, before the rest obc writes"
    return f"line {at + 1} is {visible(theirs[at])}"
