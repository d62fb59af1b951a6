"""Which jobs `obc status PATH…` shows, and where each keeps its run dir and checkpoints:
read from the plan record at the end of each job.sh (and a sweep's sweep.sh, for its runs),
as the script itself would find them on this machine. A stage's script stands for its job
(its record's `stage`), whose stages each script's record lists (docs/stages.md).
Enters: paths (out/ folders, job.sh, sweep.sh or submit.sh scripts or their folders, run
dirs).
Leaves: one Watched per job, in the order given, each once."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.diagnostics import ObcError
from ..core.shell import expanded_path
from ..model.job import SweepRun, finished_inputs, stage_id, training_names
from ..render.library import read_training_inputs
from ..render.meaning import NotWhole, read_back, read_record
from ..render.stages import Submit

JOB, SWEEP = "job.sh", "sweep.sh"


@dataclass(frozen=True, slots=True)
class WatchedStage:
    """A stage of a job (slurm.stages): its name, the id its script's records name it by
    (<job>-<stage>), and its steps, each with what its `.obc/done/STEP` names once it
    finished for the inputs of the scripts on disk (None: not known)."""

    name: str
    job: str
    steps: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True, slots=True)
class Watched:
    """A job to show: its id (of a run dir named as such: its path), its run dir on this
    machine, and where train writes its checkpoint-N folders (None: it has no trainer, or
    it is not known); `problem` says why a run dir is not known (a variable is not set).
    A run of a sweep has its place in it: the sweep's id, and which run it is
    (`lr=1e-4 seed=2`, as its header says). `inputs` are the training inputs of its
    script (None: not known); a job with stages lists them, in order."""

    job: str
    run_dir: Path | None
    checkpoints: Path | None = None
    problem: str | None = None
    sweep: str | None = None
    which: str | None = None
    inputs: str | None = None
    stages: tuple[WatchedStage, ...] = ()


def find_jobs(paths: list[Path], run_dir_root: Path | None,
              environ: Mapping[str, str] = os.environ) -> list[Watched]:
    """The jobs `paths` name, each once: a job.sh, a sweep.sh (its runs), a folder holding
    either, a folder of such folders (out/), or a run dir itself. `run_dir_root` DIR puts
    every job's run dir at DIR/<job id>, as `job.sh --run-dir DIR/<job id>` does."""
    scripts = dict.fromkeys(script for path in paths for script in _scripts(path))
    # The job's job.sh and each stage's script stand for the one job.
    return list(dict.fromkeys(_watched(script, run_dir_root, environ) for script in scripts))


def _scripts(path: Path) -> Iterator[Path]:
    """The job.sh scripts `path` stands for (a run dir stands for itself; a submit.sh, for
    the job.sh beside it, whose stages it submits)."""
    if path.is_file() and "runs" in (record := _record(path)):
        yield from _runs(path)
    elif path.is_file():
        yield path.parent / JOB if _is_submit(record) else path
    elif (path / SWEEP).is_file():
        yield from _runs(path / SWEEP)
    elif (path / JOB).is_file() or (path / ".obc").is_dir():
        yield path / JOB if (path / JOB).is_file() else path
    elif path.is_dir():
        folders = [folder for folder in sorted(path.iterdir())
                   if (folder / SWEEP).is_file() or (folder / JOB).is_file()]
        if not folders:
            raise ObcError(f"{path}: holds no job.sh or sweep.sh, and is no run dir")
        for folder in folders:
            yield from _scripts(folder)
    else:
        raise ObcError(f"{path}: no such file or folder")


def _runs(sweep: Path) -> list[Path]:
    """The job.sh of each run of a sweep, beside its folder in OUT, in the sweep's order."""
    runs = _record(sweep).get("runs")
    if not isinstance(runs, dict):
        raise ObcError(f"{sweep}: not a sweep.sh of obc's (its record lists no runs)")
    return [sweep.parent.parent / run / JOB for run in runs]


def _is_submit(record: dict[str, Any]) -> bool:
    try:
        read_back(record, Submit)
    except NotWhole:
        return False
    return True


def _record(script: Path) -> dict[str, Any]:
    return _read(script)[1]


def _read(script: Path) -> tuple[str, dict[str, Any]]:
    """The text of `script`, and its plan record."""
    try:
        text = script.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ObcError(f"{script}: cannot be read: {error}") from error
    record = read_record(text)
    if record is None:
        raise ObcError(f"{script}: not a script of obc's (it has no plan record to read)")
    return text, record


def _watched(script: Path, run_dir_root: Path | None, environ: Mapping[str, str]) -> Watched:
    if script.is_dir():  # a run dir named as such, its job by it: its checkpoints unknown
        return Watched(str(script), script)
    text, record = _read(script)
    job, default = record.get("id"), record.get("run_dir")
    if not isinstance(job, str) or not isinstance(default, str):
        raise ObcError(f"{script}: not a job.sh of obc's (its record names no id and run dir)")
    if record.get("stage"):  # a stage's script: its job's run dir is the run dir
        job = record["stage"]["run"]
    inputs = read_training_inputs(text)
    place = {**_place(record.get("sweep")), "inputs": inputs,
             "stages": _stages(job, record, inputs)}
    try:
        run_dir = run_dir_root / job if run_dir_root else _path(default, environ)
        return Watched(job, run_dir, _checkpoints(record.get("checkpoints"), run_dir, environ),
                       **place)
    except KeyError as unset:
        return Watched(job, None, problem=f"${{{unset.args[0]}}} is not set: give "
                                            "--run-dir-root, or set it as the job would have it",
                       **place)


def _place(sweep: dict[str, Any] | None) -> dict[str, str]:
    """The sweep a job's record says it is a run of, and which run, as its header says."""
    if not sweep:
        return {}
    # A named run has no labels: its record holds an empty list.
    run = SweepRun(sweep["sweep"], tuple(dict(sweep["labels"] or {}).items()), sweep["name"], ())
    return {"sweep": run.sweep, "which": run.which}


def _stages(job: str, record: dict[str, Any], inputs: str | None) -> tuple[WatchedStage, ...]:
    """The stages of `job` as a script's record lists them (the job's job.sh's, or a
    stage's), each step with what it finishes for, the script's training `inputs` given:
    the steps up to train for them, each after it for them and its own command too
    (Job.step_inputs)."""
    stages = record.get("stages") or {}
    if not stages:
        return ()
    steps = {name: fields for stage in stages.values() for name, fields in stage["steps"].items()}
    checkpoints = record.get("checkpoints") or {}
    training = training_names(list(steps), checkpoints.get("step"))

    def finished(step: str) -> str | None:
        argv = None if step in training else steps[step]["argv"]
        return inputs and finished_inputs(inputs, argv)

    return tuple(WatchedStage(name, stage_id(job, name),
                              tuple((step, finished(step)) for step in stage["steps"]))
                 for name, stage in stages.items())


def _checkpoints(checkpoints: dict[str, Any] | None, run_dir: Path,
                 environ: Mapping[str, str]) -> Path | None:
    """output_dir on this machine, as the script finds it: host_rest under host_base, else
    under the run dir (compiler/model/job.py Checkpoints)."""
    if not checkpoints:
        return None
    base = checkpoints.get("host_base")
    return (run_dir if base is None else _path(base, environ)) / checkpoints["host_rest"]


def _path(path: str, environ: Mapping[str, str]) -> Path:
    """A path of the record, expanded as the job's shell would; relative to where the job
    is started, as the script takes it (here: the current directory)."""
    return Path(os.path.abspath(expanded_path(path, environ)))
