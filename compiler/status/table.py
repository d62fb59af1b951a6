"""The status table of `obc status`: one row per job, from its run dir's record (judged as
`job.sh --status` judges it) and what its trainer left in output_dir, and for a job with
stages, where each stands; as text for people, or as one JSON object per job. The clock is
given, so that a row is a function of the files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..core.text import visible
from ..model.records import DONE, NOT_STARTED, state_name
from .jobs import Watched
from .progress import Progress, read_progress
from .run_status import NO_RUN, read_state
from .stages import StageState, stage_states

COLUMNS = ("job", "state", "step", "attempt", "checkpoint", "trained", "loss", "elapsed",
           "slurm job")
# The column of each stage's state, in a table with a job that has stages.
STAGES = "stages"


@dataclass(frozen=True, slots=True)
class Row:
    """One job's line of the table; `record` is what `job.sh --status` prints, `problem` why
    there is no state to show. A job with stages is where its first stage not done stands
    (done when all are); its record is the last run's, whichever stage's it was."""

    watched: Watched
    record: dict[str, Any] | None
    progress: Progress
    elapsed: int | None
    problem: str | None
    stages: tuple[StageState, ...] = ()

    @property
    def state(self) -> str | None:
        if self.record is None and self.problem is not None:
            return None
        if self.stages:
            return next((stage.state for stage in self.stages if stage.state != DONE), DONE)
        if self.record is None:
            return NOT_STARTED
        return state_name(self.record.get("state"), self.record.get("exit_code"))

    @property
    def job(self) -> str:
        return self.watched.job

    def as_json(self) -> dict[str, Any]:
        """The row for `--format json`: the table's values, and the record itself."""
        record = self.record or {}
        run_dir = self.watched.run_dir
        return {"job": self.job, "run_dir": run_dir and str(run_dir), "state": self.state,
                "step": record.get("step"), "attempt": record.get("attempt"),
                "checkpoint": self.progress.checkpoint, "trained_step": self.progress.step,
                "loss": self.progress.loss, "elapsed_seconds": self.elapsed,
                "slurm_job_id": record.get("slurm_job_id"), "record": self.record,
                "problem": self.problem, "stages": [stage.as_json() for stage in self.stages]}

    def cells(self, *, stages: bool = False) -> tuple[str, ...]:
        """The row's cells under `columns`: with the stages column if `stages`."""
        record = self.record or {}
        values = (self.job, self.state or "unknown", record.get("step"), record.get("attempt"),
                  self.progress.checkpoint, self.progress.step, _loss(self.progress.loss),
                  _duration(self.elapsed), record.get("slurm_job_id"))
        if stages:
            values += (", ".join(f"{stage.name} {stage.state or 'unknown'}"
                                 for stage in self.stages) or None,)
        return tuple("-" if value is None else visible(str(value)) for value in values)


def columns(rows: list[Row]) -> tuple[str, ...]:
    """The table's columns: the stages column too if a job has stages."""
    return (*COLUMNS, STAGES) if any(row.stages for row in rows) else COLUMNS


def build_row(watched: Watched, now: datetime) -> Row:
    """The row of `watched` as its files say at the moment `now`."""
    if watched.run_dir is None:  # nor where any stage stands
        unknown = tuple(StageState(stage.name, stage.job, None) for stage in watched.stages)
        return Row(watched, None, Progress(), None, watched.problem, unknown)
    state = read_state(watched.run_dir)
    problem = None if state.problem == NO_RUN else state.problem
    return Row(watched, state.record, read_progress(watched.checkpoints),
               _elapsed(state.record, now), problem, stage_states(watched, state.record))


def format_table(rows: list[Row]) -> str:
    """The rows as a table of aligned columns, then a line for each problem."""
    head = columns(rows)
    lines = [head, *(row.cells(stages=head != COLUMNS) for row in rows)]
    widths = [max(len(line[n]) for line in lines) for n in range(len(head))]
    text = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
            for line in lines]
    text += [visible(f"{row.job}: {row.problem}") for row in rows if row.problem]
    return "\n".join(text) + "\n"


def format_json(rows: list[Row]) -> str:
    return "".join(json.dumps(row.as_json()) + "\n" for row in rows)


def _elapsed(record: dict[str, Any] | None, now: datetime) -> int | None:
    """Seconds from the attempt's start to its end, or to `now` while it runs; None when
    its end was not recorded (a killed run)."""
    if record is None or not record.get("started_at"):
        return None
    end = record.get("ended_at")
    if end is None and record.get("state") != "running":
        return None
    until = _time(end) if end else now
    return int((until - _time(record["started_at"])).total_seconds())


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _duration(seconds: int | None) -> str | None:
    if seconds is None:
        return None
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def _loss(loss: float | None) -> str | None:
    return None if loss is None else f"{loss:.4g}"
