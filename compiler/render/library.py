"""obc's runtime library in a job: which of its parts (templates/lib/, plain shell) a job
embeds, what each is by its sha256, and the variables through which the job's values reach
them.

The parts are the same bytes in every script of one obc version that uses them; a job's
values reach them only as the variables `settings` gives the job part. `obc plan` and a
verifier read a script's parts back by `part_sha256`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache

from ..core.resources import data_dir
from ..core.shell import LIBRARY_SECTION
from ..model.job import Job
from ..model.notify import NOTIFY_SECONDS
from ..model.runtimes import Apptainer, Container, Enroot, Native
from .meaning import RECORD_PREFIX
from .provenance import sha256

# Every part, in the order a script embeds them.
PART_ORDER = ("core", "words", "main", "rundir", "records", "finished", "files",
              "checkpoints", "resume", "resume_never", "on_signal", "launcher", "causes",
              "retry", "requeue", "notify", "slurm", "node_tasks", "health", "container", "native",
              "apptainer", "enroot", "stop_group", "unset_inherited")
_RUNTIME_PARTS = {Container: "container", Native: "native", Apptainer: "apptainer",
                  Enroot: "enroot"}


def library_parts(job: Job) -> tuple[str, ...]:
    """The names of the library parts `job` embeds, in PART_ORDER: the one place that
    decides them."""
    runtime = _RUNTIME_PARTS[type(job.runtime)]
    used = {
        "core", "words", "main", "rundir", "records", "finished", runtime,
        "files" if job.writes_into_run_dir else "",
        "checkpoints" if job.checkpoints else "",
        ("resume" if job.resumes else "resume_never") if job.checkpoints else "",
        "on_signal" if job.on_signal else "",
        "launcher" if job.launcher and job.node_steps else "",
        # The table of causes is retry's data (compiler/model/causes.py), not a job value.
        "causes" if job.retry else "",
        "retry" if job.retry else "",
        "requeue" if job.slurm and job.slurm.requeues_itself else "",
        "notify" if job.notify else "",
        "slurm" if job.node_steps else "",
        "node_tasks" if job.node_tasks else "",
        "health" if job.health else "",
        "stop_group" if runtime != "container" else "",
        "unset_inherited" if runtime in ("apptainer", "enroot") else "",
    }
    return tuple(name for name in PART_ORDER if name in used)


@cache
def part_text(name: str) -> str:
    """The part `name` as a script embeds it: templates/lib/NAME.sh, its last newline
    included."""
    return (data_dir("templates") / "lib" / f"{name}.sh").read_text(encoding="utf-8")


@cache
def part_sha256(name: str) -> str:
    """`sha256:HEX` of the part `name`'s bytes as a script embeds them."""
    return sha256_of(part_text(name))


def sha256_of(text: str) -> str:
    """`sha256:HEX` of `text`'s UTF-8 bytes, as the header names a part."""
    return "sha256:" + sha256(text.encode())


LIBRARY_LINE_PREFIX = "library  obc "


def library_line(job: Job) -> str:
    """The header's line that names each part `job` embeds, by obc's version and its sha256:
    `library  obc 0.3.0 core sha256:…, main sha256:…`. One line, however long: a program
    reads it back by splitting it on `, ` (`read_library`)."""
    parts = ", ".join(f"{name} {digest}" for name, digest in named_parts(job))
    return f"{LIBRARY_LINE_PREFIX}{job.obc_version} {parts}"


@cache
def released_parts() -> dict[str, dict[str, str]]:
    """The sha256 of every part each obc release embeds, by version then part
    (templates/lib/released.json): what `obc verify` holds a script's parts to, whichever obc
    wrote it. tests/compile/test_library.py holds this version's row to the parts as they are."""
    path = data_dir("templates") / "lib" / "released.json"
    return json.loads(path.read_text(encoding="utf-8"))


def job_part(text: str) -> str:
    """A script's text before its library: its header and the job (all of it, if it embeds
    no library)."""
    match = LIBRARY_SECTION.search(text)
    return text[:match.start()] if match else text


def named_parts(job: Job) -> tuple[tuple[str, str], ...]:
    """The parts `job` embeds with their sha256, as its header's library line names them."""
    return tuple((name, part_sha256(name)) for name in library_parts(job))
# The script's one call of the library, last (${1+"$@"}: posh, under set -u, refuses a bare
# "$@" when the job is started without arguments).
MAIN_CALL = 'obc_main ${1+"$@"}'


@dataclass(frozen=True, slots=True)
class EmbeddedLibrary:
    """What a script says of its library and what it holds: the version and the parts its
    header names (name, sha256), and the parts its text embeds (name, sha256 of the text as
    embedded), both in their order; whether the library ends in its `obc_main` call, and
    the lines after that call that are not the plan record."""

    version: str
    named: tuple[tuple[str, str], ...]
    embedded: tuple[tuple[str, str], ...]
    has_main: bool
    after: tuple[str, ...]

    @property
    def edited(self) -> tuple[str, ...]:
        """The parts embedded whose text is not the one the header names (by hand, say)."""
        named = dict(self.named)
        return tuple(name for name, digest in self.embedded if named.get(name) != digest)


def read_library(text: str) -> EmbeddedLibrary | None:
    """Return the library a script's text names and embeds; None if its header has no library
    line (a script of obc 0.2 or older, or not obc's)."""
    lines = text.split("\n")
    header = next((line[2:] for line in lines
                   if line.startswith("# " + LIBRARY_LINE_PREFIX)), None)
    if header is None:
        return None
    version, _, names = header.removeprefix(LIBRARY_LINE_PREFIX).partition(" ")
    named = tuple(tuple(part.split(" ", 1)) for part in names.split(", ") if " " in part)
    starts = [n for n, line in enumerate(lines) if LIBRARY_SECTION.fullmatch(line)]
    end = _main_call(lines)
    embedded = []
    for start, stop in zip(starts, [*starts[1:], end], strict=True):
        # Each part is followed by the one empty line the script puts between two.
        body = lines[start:stop]
        if body and body[-1] == "":
            body = body[:-1]
        name = LIBRARY_SECTION.fullmatch(lines[start]).group(1)  # type: ignore[union-attr]
        embedded.append((name, sha256_of("\n".join(body) + "\n")))
    return EmbeddedLibrary(version, named, tuple(embedded), end < len(lines),
                           _after_library(lines[end + 1:]))


def _main_call(lines: list[str]) -> int:
    """The index of the script's last `obc_main` line (the library ends before it), or
    the number of lines if it has none."""
    return max((n for n, line in enumerate(lines) if line == MAIN_CALL), default=len(lines))


def _after_library(rest: list[str]) -> tuple[str, ...]:
    """The lines after the library's `obc_main` but the plan record (its marker and its
    line of JSON) and empty ones."""
    marker = next((n for n, line in enumerate(rest) if line.startswith(RECORD_PREFIX)), None)
    if marker is not None:
        del rest[marker:marker + 2]
    return tuple(line for line in rest if line.strip())


Setting = tuple[str, str | int]


def settings(job: Job) -> list[list[Setting]]:
    """The variables through which `job`'s values and switches reach the library's parts,
    in groups that the job part writes one a line: the job, its stop, its checkpoints, its
    resume, on_signal, its launcher, retry, notify, Slurm, health, its runtime. An empty value
    is a switch that is off: the job sets it all the same, so that a variable it inherited
    cannot switch a feature on."""
    checkpoints, slurm, retry, on_signal = job.checkpoints, job.slurm, job.retry, job.on_signal
    launcher, trigger = job.launcher, on_signal.trigger if on_signal else None
    health = job.health
    notify = job.notify
    runtime: list[Setting] = []
    if job.container:
        runtime = [("OBC_HOME_IN_RUN_DIR", "1" if job.container.as_invoker else "")]
    elif job.native and not job.native.venv:
        runtime = [("OBC_VENV", "")]  # else the job's obc_paths sets it, where the job runs
    if not job.container:
        runtime.append(("OBC_TERM_GROUP", "" if job.apptainer else "1"))
    groups: list[list[Setting]] = [
        # Who the run is: the one line in which two runs of a sweep differ.
        [("OBC_JOB", job.id), ("OBC_INPUTS", job.training_inputs)],
        [("OBC_RUNTIME", _runtime_name(job)),
         ("OBC_STEPS", " ".join(step.name for step in job.steps))],
        [("OBC_STOP_TIMEOUT", job.stop_timeout), ("OBC_SIGNALS", " ".join(trapped_signals(job))),
         ("OBC_SHARED", "1" if job.shared else "")],
        [("OBC_CHECKPOINT_STEP", checkpoints.step if checkpoints else ""),
         ("OBC_CHECK_OUTPUT_DIR", "1" if job.checked_output_dir else ""),
         *([("OBC_CHECKPOINTS_OWN_FOLDER", "1" if checkpoints.own_folder else ""),
            ("OBC_PREPARED_DIR", checkpoints.prepared_dir or ""),
            ("OBC_TRAINER_TITLE", checkpoints.trainer_title)] if checkpoints else [])],
        [("OBC_RESUME", checkpoints.resume if job.resumes else ""),
         *([("OBC_RESUME_FIELD", checkpoints.resume_field)] if checkpoints else []),
         *([("OBC_TRAINER_OUTPUT_DIR", checkpoints.output_dir),
            ("OBC_RESUME_FLAG", checkpoints.resume_flag)] if job.resumes else [])],
        # A checkpoint asked for by a trigger file, or the grace given to the step that has
        # the signal and saves by itself (OBC_GIVE_GRACE: its name).
        [("OBC_CHECKPOINT_TRIGGER", trigger or ""),
         ("OBC_GIVE_GRACE", _saves_on_term(job)),
         *([("OBC_CHECKPOINT_GRACE", on_signal.grace)] if on_signal else [])],
        # Read by the parts launcher and slurm only, on several nodes.
        [("OBC_LAUNCHER_STEP", launcher.step if launcher else ""),
         *([("OBC_LAUNCHER", launcher.kind), ("OBC_NPROC_PER_NODE", launcher.nproc_per_node),
            ("OBC_LOCAL_WORDS", len(launcher.local_words))] if launcher else [])]
        if job.node_steps else [],
        [("OBC_RETRY_MAX", retry.max if retry else ""),
         *([("OBC_RETRY_EXIT_CODES", " ".join(str(code) for code in retry.exit_codes)),
            ("OBC_RETRY_REQUEUES", "1" if slurm else "")] if retry else [])],
        [("OBC_NOTIFY_ON", " ".join(notify.events) if notify else ""),
         *([("OBC_NOTIFY_URL", notify.url or ""),
            ("OBC_NOTIFY_URL_SECRET", notify.url_secret or ""),
            ("OBC_NOTIFY_SECONDS", NOTIFY_SECONDS)] if notify else [])],
        [("OBC_TIME_LIMIT_SIGNAL", slurm.signal_name if job.requeues_at_time_limit else ""),
         *([("OBC_MAX_RESTARTS", slurm.max_restarts)] if job.requeues_at_time_limit else [])],
        [("OBC_NODE_STEPS", " ".join(job.node_steps)),
         *([("OBC_MASTER_PORT", slurm.rendezvous_port),
            ("OBC_GPUS_PER_NODE", slurm.gpus_per_node),
            ("OBC_TORCHRUN_STEP", slurm.torchrun_step or ""),
            ("OBC_TORCHRUN_PROGRAM_STEP", slurm.torchrun_program_step or "")]
           if job.node_steps else [])],
        [("OBC_HEALTH_TIMEOUT", health.timeout if health else ""),
         *([("OBC_HEALTH_GPUS", health.gpus),
            ("OBC_HEALTH_REQUEUE", (slurm.max_restarts or "") if health.requeue and slurm else "")]
           if health else [])],
        runtime,
    ]
    return [group for group in groups if group]


# The first line of the job part (settings' first group): who the run is, and its training
# inputs, which the part finished compares each .obc/done/STEP with.
_WHO = re.compile(r"^OBC_JOB=\S+ OBC_INPUTS=(sha256:[0-9a-f]{64})$", re.MULTILINE)


def read_training_inputs(text: str) -> str | None:
    """The training inputs (OBC_INPUTS) the job part of a script's `text` sets; None if it
    sets none (not a job.sh of this obc's)."""
    who = _WHO.search(text)
    return who[1] if who else None


def _saves_on_term(job: Job) -> str:
    """The step that saves a checkpoint when it has TERM (a script under its launcher, a
    trainer that saves on TERM), if the job asks for one; else empty."""
    if job.on_signal is None or job.on_signal.trigger:
        return ""
    if job.launcher:
        return job.launcher.step
    assert job.checkpoints is not None  # a trainer's, which checkpoints on a signal
    return job.checkpoints.step


def _runtime_name(job: Job) -> str:
    return job.container.engine if job.container else _RUNTIME_PARTS[type(job.runtime)]


# The signals a job stops on, with their numbers (Linux; the exit code is 128 + the number),
# as the part main's obc_signal_number has them: always TERM, INT and HUP; and the one Slurm
# sends before the time limit, if another.
SIGNAL_NUMBERS = {"HUP": 1, "INT": 2, "USR1": 10, "USR2": 12, "TERM": 15}


def trapped_signals(job: Job) -> list[str]:
    """The names of the signals `job` stops on."""
    names = ["TERM", "INT", "HUP"]
    if job.slurm and job.slurm.signal_name not in names:
        names.append(job.slurm.signal_name)
    return names
