"""`obc status`: the last state of the job in each run dir, judged from the same facts as
`job.sh --status` judges them (templates/lib/records.sh): the record .obc/status.json and,
for a record that says running, whether the run the lock names has gone (docs/resume.md, "Run
records")."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..model.slurm import SLURM_ENDED_STATES

RUNNING, KILLED = '"state": "running"', '"state": "killed"'
# Why a run dir has no state: the job has not run there yet.
NO_RUN = "no run yet"


@dataclass(frozen=True, slots=True)
class RunState:
    """A run dir's last record as `job.sh --status` prints it (the verdict applied), or why
    there is none."""

    run_dir: Path
    line: str | None
    problem: str | None = None

    @property
    def record(self) -> dict | None:
        return None if self.line is None else json.loads(self.line)


class _NoRecord(Exception):
    pass


def read_state(run_dir: Path) -> RunState:
    """The last state of the job in `run_dir`: a record that says running, of a run that
    has gone without a word, says killed."""
    try:
        line = _read_record(run_dir)
        # The record is written before the lock is let go: read again once the run is
        # gone, it is the run's last word.
        if RUNNING in line and _run_gone(run_dir / ".obc" / "lock"):
            line = _read_record(run_dir).replace(RUNNING, KILLED, 1)
    except _NoRecord as problem:
        return RunState(run_dir, None, str(problem))
    return RunState(run_dir, line)


def _read_record(run_dir: Path) -> str:
    path = run_dir / ".obc" / "status.json"
    if not os.path.lexists(path):
        raise _NoRecord(NO_RUN)
    try:
        # As $(cat) reads it: trailing newlines dropped.
        line = path.read_text(encoding="utf-8").rstrip("\n")
    except (OSError, UnicodeError) as error:
        raise _NoRecord(f"cannot read the record {path}") from error
    if line.startswith('{"job": ') and line.endswith("}") and ', "resumed_from": ' in line:
        return line
    raise _NoRecord(f"the record {path} is empty or cut short (a full disk?): no state to show")


def _run_gone(lock: Path) -> bool:
    """As obc_run_gone: the lock is gone; or on its own machine nothing holds its file
    `held` (obc_ended_lock); or on another machine its Slurm job has ended."""
    if not os.path.lexists(lock):
        return True
    try:
        host, _pid, held, *_ = (lock / "owner").read_text().split("\n")[0].split() + ["-"] * 3
    except (OSError, UnicodeError):
        return False
    if host == _this_host():
        return _nothing_holds(lock / "held")
    return held != "-" and _slurm_job_ended(held)


def _this_host() -> str:
    """As obc_host names the machine in a lock: the Slurm node's name, else the host's."""
    return os.environ.get("SLURMD_NODENAME") or os.uname().nodename


def _nothing_holds(held: Path) -> bool:
    try:
        with open(held, "rb") as file:
            fcntl.flock(file, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:  # held by a run (BlockingIOError), or gone
        return False
    return True


def _slurm_job_ended(job_id: str) -> bool:
    """Whether Slurm says the job has ended, or no longer knows it; not when squeue cannot
    say."""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        done = subprocess.run(["squeue", "-h", "-j", job_id, "-t", "all", "-o", "%T"],
                              capture_output=True, text=True, timeout=60, check=False)
        if done.returncode == 0:
            return done.stdout.strip() in SLURM_ENDED_STATES
        return "Invalid job id" in done.stdout + done.stderr
    return False

