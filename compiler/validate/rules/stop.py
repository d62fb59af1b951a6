"""How a job ends when it is told to stop: the signal Slurm sends before the time limit must
reach the script and be one it stops on, early enough for the checkpoint it waits for and
the step's stop timeout, and the time limit must leave room for all three; a job that
requeues itself must be able to tell the time limit."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ...core.diagnostics import show
from ...model.defaults import DEFAULT_GRACE, DEFAULT_STOP_TIMEOUT, SLURM_DEFAULT_LEAD
from ...model.slurm import default_signal, granted_seconds, time_limit_seconds
from ...model.trainers import checkpoints_on_signal, trainer_kind
from .common import Problem, get

# The signals job.sh traps, and so can stop its step on.
TRAPPED = ("TERM", "INT", "HUP", "USR1", "USR2")
_SIGNAL = re.compile(r"(?P<to>[RB]{1,2}:)?(?:SIG)?(?P<name>[A-Z0-9]+)(?:@(?P<lead>[0-9]+))?")


def check(data: dict) -> Iterator[Problem]:
    yield from _checkpoint_needs_a_trainer(data)
    slurm = data.get("slurm")
    if not isinstance(slurm, dict):
        return
    signal = slurm.get("signal")
    match = _SIGNAL.fullmatch(signal if isinstance(signal, str) else default_signal(slurm))
    if match is None:
        return  # the schema's pattern reports it
    yield from _reaches_the_script(match, match.group())
    yield from _early_enough(data, match)
    itself = [key for key in ("max_restarts",) if key in slurm] + \
        [key for key in ("retry",) if key in data]
    if itself and slurm.get("requeue") is False:
        yield Problem(("slurm", "requeue"), f"the job requeues itself ({itself[0]}), which "
                      "Slurm allows only to a job that may be requeued",
                      "remove requeue: false")
    if "max_restarts" in slurm and match["name"] in ("TERM", "INT", "HUP"):
        yield Problem(("slurm", "signal"), f"scancel and preemption send {match['name']} "
                      "too, so a job that requeues itself at the time limit "
                      "(slurm.max_restarts) could not tell them apart",
                      "use a signal only the time limit sends: B:USR1@120")


def _checkpoint_needs_a_trainer(data: dict) -> Iterator[Problem]:
    if "checkpoint" in data and not checkpoints_on_signal(data):
        # A trainer's only when it saves on TERM, and the job is not native.
        kind = trainer_kind(data)
        yield Problem(("checkpoint",), "only applies to a trainer (trainer.axolotl, "
                      "trainer.torchrun; trainer.trl and trainer.llamafactory in a native "
                      "job), whose train checkpoints when asked", at_key=True,
                      hint=None if kind is None else f"{kind.title} saves a checkpoint on "
                      "TERM only in a native job: a container's init passes TERM to its "
                      "launcher alone, which ends without passing it on; docs/trainers.md")


def _reaches_the_script(match: re.Match, signal: str) -> Iterator[Problem]:
    path = ("slurm", "signal")
    if "B" not in (match["to"] or ""):
        yield Problem(path, f"{show(signal)} goes to the job's steps, not to job.sh, which "
                      "then cannot stop its step cleanly", f"write B:{signal.rpartition(':')[2]}")
    if match["name"] not in TRAPPED:
        yield Problem(path, f"job.sh stops its step on {', '.join(TRAPPED)}, not on "
                      f"{match['name']}", "write B:TERM@120 or B:USR1@120")


def _early_enough(data: dict, match: re.Match) -> Iterator[Problem]:
    lead = int(match["lead"]) if match["lead"] else SLURM_DEFAULT_LEAD
    timeout = _integer(get(data, "runtime", "stop_timeout"), DEFAULT_STOP_TIMEOUT)
    grace = _integer(get(data, "checkpoint", "grace"), DEFAULT_GRACE) \
        if checkpoints_on_signal(data) and get(data, "checkpoint", "on_signal") is not False \
        else 0
    waits = f"waits up to {grace} s for a checkpoint, then " if grace else ""
    if timeout + grace >= lead:
        given = [path for path in (("runtime", "stop_timeout"), ("checkpoint", "grace"))
                 if isinstance(get(data, *path), int)]
        yield Problem(given[0] if given else ("slurm", "signal"),
                      f"a stopped job {waits}gives its step {timeout} s to stop, but Slurm "
                      f"signals only {lead} s before the time limit, when it kills the job",
                      "give the signal more lead (slurm.signal: B:TERM@300), or the "
                      "checkpoint (checkpoint.grace) or the step (runtime.stop_timeout) less "
                      "time")
    yield from _time_limit(data, lead + grace + timeout,
                           f"Slurm signals {lead} s before it, and a stopped job then "
                           f"{waits.replace(', then ', ' and ')}{timeout} s for its step")


def _time_limit(data: dict, needed: int, why: str) -> Iterator[Problem]:
    """Every time limit, the job's and each stage's (slurm.stages), must be set (0 is no
    limit to Slurm) and outlast the stop."""
    stages = get(data, "slurm", "stages")
    for path in [("slurm", "time"), *((("slurm", "stages", name, "time") for name in stages)
                                      if isinstance(stages, dict) else ())]:
        yield from _one_time_limit(path, get(data, *path), needed, why)


def _one_time_limit(path: tuple[str, ...], time: object, needed: int, why: str) -> \
        Iterator[Problem]:
    try:
        seconds = time_limit_seconds(str(time)) if isinstance(time, (str, int)) else None
    except ValueError:
        return  # the schema's pattern reports it
    if seconds == 0:
        yield Problem(path, "a time limit of zero is no limit to Slurm",
                      "write UNLIMITED if the job may run without one, else a time such as "
                      "\"04:00:00\"")
    elif seconds is not None and granted_seconds(seconds) <= needed:
        minutes = needed // 60 + 1
        yield Problem(path, f"a time limit of {seconds} s is too short: {why}",
                      f"give the job more than {needed} s (time: {minutes}), or the signal "
                      "less lead")


def _integer(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
