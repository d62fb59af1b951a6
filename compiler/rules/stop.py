"""How a job ends when it is told to stop: the signal Slurm sends before the time limit must
reach the script and be one it stops on, early enough for the step's stop timeout."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..diagnostics import show
from ..model import DEFAULT_SLURM_SIGNAL, DEFAULT_STOP_TIMEOUT
from .common import Problem, get

# The signals job.sh traps, and so can stop its step on.
TRAPPED = ("TERM", "INT", "HUP", "USR1", "USR2")
_SIGNAL = re.compile(r"(?P<to>[RB]{1,2}:)?(?:SIG)?(?P<name>[A-Z0-9]+)(?:@(?P<lead>[0-9]+))?")
SLURM_DEFAULT_LEAD = 60


def check(data: dict) -> Iterator[Problem]:
    signal = get(data, "slurm", "signal")
    if not isinstance(signal, str):
        signal = None if get(data, "slurm") is None else DEFAULT_SLURM_SIGNAL
    if signal is None:
        return
    match = _SIGNAL.fullmatch(signal)
    if match is None:
        return  # the schema's pattern reports it
    yield from _reaches_the_script(match, signal)
    yield from _early_enough(data, match)


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
    timeout = get(data, "runtime", "stop_timeout")
    timeout = timeout if isinstance(timeout, int) else DEFAULT_STOP_TIMEOUT
    if timeout >= lead:
        at_timeout = isinstance(get(data, "runtime", "stop_timeout"), int)
        yield Problem(("runtime", "stop_timeout") if at_timeout else ("slurm", "signal"),
                      f"a step may take {timeout} s to stop, but Slurm signals only {lead} s "
                      "before the time limit, when it kills the job",
                      "give the signal more lead (slurm.signal: B:TERM@300) or the step less "
                      "time (runtime.stop_timeout)")
