"""Where each stage of a job stands (slurm.stages, docs/stages.md), from its one run dir: the
last run's record, if that run was the stage's (its own script's, or the job's job.sh at one
of the stage's steps) for the training inputs of the scripts on disk, else `.obc/done/STEP`
of each of its steps (templates/lib/finished.sh), as the stage's script judges that a step
finished for its inputs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model.records import DONE, NOT_STARTED, state_name
from .jobs import Watched, WatchedStage


@dataclass(frozen=True, slots=True)
class StageState:
    """One stage as the table shows it: its name, the id its script's records name it by,
    its state as the table names states, and the step its last run was at."""

    name: str
    job: str
    state: str | None
    step: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "job": self.job, "state": self.state, "step": self.step}


def stage_states(watched: Watched, record: dict[str, Any] | None) -> tuple[StageState, ...]:
    """Each stage of `watched` as its run dir says, `record` its last run's (None: none)."""
    finished = [watched.run_dir is not None and _finished(watched.run_dir, stage)
                for stage in watched.stages]
    at = _stage_at(watched, record, finished)
    return tuple(_state(stage, finished[n], record if n == at else None)
                 for n, stage in enumerate(watched.stages))


def _state(stage: WatchedStage, finished: bool, last: dict[str, Any] | None) -> StageState:
    """A stage's state: that of `last`, the last run if it was the stage's; else done or
    not started by its steps' records."""
    if last is not None:
        return StageState(stage.name, stage.job, state_name(last.get("state"),
                                                            last.get("exit_code")),
                          last.get("step"))
    return StageState(stage.name, stage.job, DONE if finished else NOT_STARTED)


def _stage_at(watched: Watched, record: dict[str, Any] | None,
              finished: list[bool]) -> int | None:
    """Which stage the last run was: a stage's script by its job id; the job's job.sh by
    its step, or, stopped before any step, the first stage not finished (where it would
    have started). None if it was none, or a run for other inputs."""
    if record is None or record.get("inputs") != watched.inputs:
        return None
    jobs = [stage.job for stage in watched.stages]
    if record.get("job") in jobs:
        return jobs.index(record["job"])
    if record.get("job") != watched.job:
        return None
    step = record.get("step")
    if step is None:
        return None if record.get("state") == "succeeded" or all(finished) \
            else finished.index(False)
    return next((n for n, stage in enumerate(watched.stages)
                 if any(name == step for name, _ in stage.steps)), None)


def _finished(run_dir: Path, stage: WatchedStage) -> bool:
    """Whether every step of `stage` finished for the inputs of its script (obc_finished)."""
    return all(inputs is not None and _done_record(run_dir, step) == inputs
               for step, inputs in stage.steps)


def _done_record(run_dir: Path, step: str) -> str | None:
    try:  # as $(cat) reads it: trailing newlines dropped
        return (run_dir / ".obc" / "done" / step).read_text(encoding="utf-8").rstrip("\n")
    except (OSError, UnicodeError):
        return None
