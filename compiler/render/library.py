"""obc's runtime library in a job: which of its parts (templates/lib/, plain shell) a job
embeds, what each is by its sha256, and the variables through which the job's values reach
them.

The parts are the same bytes in every script of one obc version that uses them; a job's
values reach them only as the variables `settings` gives the job part. `obc plan` and a
verifier read a script's parts back by `part_sha256`.
"""

from __future__ import annotations

import hashlib
from functools import cache

from ..core.resources import data_dir
from ..model.job import Job
from ..model.runtimes import Apptainer, Container, Enroot, Native

# Every part, in the order a script embeds them.
PART_ORDER = ("core", "words", "main", "rundir", "records", "finished", "files",
              "checkpoints", "resume", "resume_never", "on_signal", "retry", "requeue",
              "slurm", "node_tasks", "container", "native", "apptainer", "enroot",
              "stop_group", "unset_inherited")
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
        "retry" if job.retry else "",
        "requeue" if job.slurm and job.slurm.requeues_itself else "",
        "slurm" if job.node_steps else "",
        "node_tasks" if job.node_tasks else "",
        "stop_group" if runtime != "container" else "",
        "unset_inherited" if runtime in ("apptainer", "enroot") else "",
    }
    return tuple(name for name in PART_ORDER if name in used)


@cache
def part_text(name: str) -> str:
    """The part `name` as a script embeds it: templates/lib/NAME.sh, its last newline
    included."""
    return (data_dir("templates") / "lib" / f"{name}.sh").read_text(encoding="utf-8")


def part_sha256(name: str) -> str:
    """`sha256:HEX` of the part `name`'s bytes as a script embeds them."""
    return "sha256:" + hashlib.sha256(part_text(name).encode()).hexdigest()


def library_line(job: Job) -> str:
    """The header's line that names each part `job` embeds, by obc's version and its sha256:
    `library  obc 0.3.0 core sha256:…, main sha256:…`. One line, however long: a program
    reads it back by splitting it on `, `."""
    parts = ", ".join(f"{name} {part_sha256(name)}" for name in library_parts(job))
    return f"library  obc {job.obc_version} {parts}"


Setting = tuple[str, str | int]


def settings(job: Job) -> list[list[Setting]]:
    """The variables through which `job`'s values and switches reach the library's parts,
    in groups that the job part writes one a line: the job, its stop, its checkpoints, its
    resume, on_signal, retry, Slurm, its runtime. An empty value is a switch that is off: the
    job sets it all the same, so that a variable it inherited cannot switch a feature on."""
    checkpoints, slurm, retry, on_signal = job.checkpoints, job.slurm, job.retry, job.on_signal
    runtime: list[Setting] = []
    if job.container:
        runtime = [("OBC_HOME_IN_RUN_DIR", "1" if job.container.as_invoker else "")]
    elif job.native and not job.native.venv:
        runtime = [("OBC_VENV", "")]  # else the job's obc_paths sets it, where the job runs
    if not job.container:
        runtime.append(("OBC_TERM_GROUP", "" if job.apptainer else "1"))
    groups: list[list[Setting]] = [
        [("OBC_JOB", job.id), ("OBC_RUNTIME", _runtime_name(job)),
         ("OBC_STEPS", " ".join(step.name for step in job.steps))],
        [("OBC_INPUTS", job.training_inputs)],
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
            ("OBC_RESUME_OPTION", checkpoints.resume_option)] if job.resumes else [])],
        [("OBC_CHECKPOINT_TRIGGER", on_signal.trigger if on_signal else ""),
         *([("OBC_CHECKPOINT_GRACE", on_signal.grace)] if on_signal else [])],
        [("OBC_RETRY_MAX", retry.max if retry else ""),
         *([("OBC_RETRY_EXIT_CODES", " ".join(str(code) for code in retry.exit_codes)),
            ("OBC_RETRY_REQUEUES", "1" if slurm else "")] if retry else [])],
        [("OBC_TIME_LIMIT_SIGNAL", slurm.signal_name if job.requeues_at_time_limit else ""),
         *([("OBC_MAX_RESTARTS", slurm.max_restarts)] if job.requeues_at_time_limit else [])],
        [("OBC_NODE_STEPS", " ".join(job.node_steps)),
         *([("OBC_MASTER_PORT", slurm.rendezvous_port),
            ("OBC_GPUS_PER_NODE", slurm.gpus_per_node),
            ("OBC_TORCHRUN_STEP", slurm.torchrun_step or ""),
            ("OBC_TORCHRUN_PROGRAM_STEP", slurm.torchrun_program_step or "")]
           if job.node_steps else [])],
        runtime,
    ]
    return [group for group in groups if group]


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
