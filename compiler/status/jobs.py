"""Which jobs `obc status PATH…` shows, and where each keeps its run dir and checkpoints:
read from the plan record at the end of each job.sh (and a sweep's sweep.sh, for its runs),
as the script itself would find them on this machine.
Enters: paths (out/ folders, job.sh or sweep.sh scripts or their folders, run dirs).
Leaves: one Watched per job, in the order given, each once."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.diagnostics import ObcError
from ..core.shell import expanded_path
from ..model.job import SweepRun
from ..render.meaning import read_record

JOB, SWEEP = "job.sh", "sweep.sh"


@dataclass(frozen=True, slots=True)
class Watched:
    """A job to show: its id (of a run dir named as such: its path), its run dir on this
    machine, and where train writes its checkpoint-N folders (None: it has no trainer, or
    it is not known); `problem` says why a run dir is not known (a variable is not set).
    A run of a sweep has its place in it: the sweep's id, and which run it is
    (`lr=1e-4 seed=2`, as its header says)."""

    job: str
    run_dir: Path | None
    checkpoints: Path | None = None
    problem: str | None = None
    sweep: str | None = None
    which: str | None = None


def find_jobs(paths: list[Path], run_dir_root: Path | None,
              environ: Mapping[str, str] = os.environ) -> list[Watched]:
    """The jobs `paths` name, each once: a job.sh, a sweep.sh (its runs), a folder holding
    either, a folder of such folders (out/), or a run dir itself. `run_dir_root` DIR puts
    every job's run dir at DIR/<job id>, as `job.sh --run-dir DIR/<job id>` does."""
    scripts = list(dict.fromkeys(script for path in paths for script in _scripts(path)))
    return [_watched(script, run_dir_root, environ) for script in scripts]


def _scripts(path: Path) -> Iterator[Path]:
    """The job.sh scripts `path` stands for (a run dir stands for itself)."""
    if path.is_file():
        yield from (_runs(path) if "runs" in _record(path) else [path])
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


def _record(script: Path) -> dict[str, Any]:
    try:
        record = read_record(script.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ObcError(f"{script}: cannot be read: {error}") from error
    if record is None:
        raise ObcError(f"{script}: not a script of obc's (it has no plan record to read)")
    return record


def _watched(script: Path, run_dir_root: Path | None, environ: Mapping[str, str]) -> Watched:
    if script.is_dir():  # a run dir named as such, its job by it: its checkpoints unknown
        return Watched(str(script), script)
    record = _record(script)
    job, default = record.get("id"), record.get("run_dir")
    if not isinstance(job, str) or not isinstance(default, str):
        raise ObcError(f"{script}: not a job.sh of obc's (its record names no id and run dir)")
    place = _place(record.get("sweep"))
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
