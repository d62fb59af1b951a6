"""The states of a job's run record (.obc/status.json) as the status tables name them, in
`obc status` and `sweep.sh --status` alike (docs/resume.md, "Run records")."""

from __future__ import annotations

# The record's states the tables name otherwise; the others (running, failed, stopped,
# requeued, and killed as --status judges it) keep their names.
DONE = "done"
STATE_NAMES = {"succeeded": DONE}
# A job out of restarts at the time limit fails with this exit code (templates/lib/requeue.sh,
# obc_at_time_limit): it gave up.
GAVE_UP_EXIT_CODE = 5
GAVE_UP = "gave up"
# A run dir with no record: the job has not run there.
NOT_STARTED = "not started"


def state_name(state: str | None, exit_code: object) -> str | None:
    """The table's name of a record's state and exit code."""
    if state == "failed" and exit_code == GAVE_UP_EXIT_CODE:
        return GAVE_UP
    return STATE_NAMES.get(state, state) if state is not None else None
