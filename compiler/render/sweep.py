"""A sweep's own files: OUT/<sweep id>/sweep.sh, which lists, runs and submits the runs, and
OUT/<sweep id>/runs.tsv, which tabulates them (docs/sweeps.md).

Both are built from the runs' compiled jobs and scripts: sweep.sh holds the sha256 of each
job.sh, and submits the runs as one Slurm job array when they share their #SBATCH lines.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from ..model.defaults import DEFAULT_SLURM_OUTPUT
from ..model.job import Job
from ..read.load import Mark
from ..sweep.expand import Expansion
from ..validate.policy_rules import Judgement
from .summary import GENERATED_PREFIX, labelled_lines

SWEEP_SCRIPT, RUNS_TABLE = "sweep.sh", "runs.tsv"
# A task's log: the array's job id and the task's index (%j would be each task's own id).
ARRAY_OUTPUT = "%x-%A_%a.out"
USAGE = ("sweep.sh --list | --status [RUN...] | [--dry-run] --run [--parallel N] [RUN...] | "
         "[--dry-run] --submit [RUN...] [-- SBATCH_OPTION...] | --help")
EXIT_CODES = (
    "0 done, 1 a run or sbatch failed, 2 usage, 3 a job.sh is not the one obc compiled",
    "(nothing is started then), 128+N stopped by signal N",
)

Submission = Literal["array", "each", "none"]


@dataclass(frozen=True, slots=True)
class SweepEntry:
    """One run as sweep.sh knows it: its array index, id, label on each axis ('' for a named
    run) and the sha256 of its job.sh."""

    index: int
    id: str
    labels: tuple[str, ...]
    checksum: str


@dataclass(frozen=True, slots=True)
class Sweep:
    """What sweep.sh and runs.tsv are made of. `submission` says how --submit submits: one
    job array with `directives` (the runs share their #SBATCH lines), each run with its own
    sbatch, or not at all (`unsubmittable` runs have no slurm block)."""

    id: str
    source_file: str
    obc_version: str
    axes: tuple[str, ...]
    runs: tuple[SweepEntry, ...]
    combinations: int
    excluded: int
    max_parallel: int | None
    submission: Submission
    directives: tuple[str, ...]
    unsubmittable: tuple[str, ...]

    @property
    def table(self) -> str:
        """The runs, tab-separated after the column names (runs.tsv and --list)."""
        rows = [("index", "id", *self.axes)]
        rows += [(str(run.index), run.id, *run.labels) for run in self.runs]
        return "".join("\t".join(row) + "\n" for row in rows)

    @property
    def throttle(self) -> str:
        return _throttle(self.max_parallel)

    @property
    def at_once(self) -> int | None:
        """How many runs Slurm may run at once: max_parallel of one job array; None (all)
        for runs submitted each on its own, which it cannot hold back."""
        return self.max_parallel if self.submission == "array" else None


@dataclass(frozen=True, slots=True)
class SweepFile:
    """sweep.sh or runs.tsv: where it goes under OUT, its text and mode, and its run file
    (as diagnostics name it) with the place of its id; for sweep.sh, the site policy's
    verdicts on the sweep as a whole, which `obc plan` shows."""

    sweep: Sweep
    name: str
    text: str
    mode: int
    file: str
    id_mark: Mark
    judgement: Judgement | None = None

    @property
    def job(self) -> Sweep | None:
        """What `obc plan` reviews of it: sweep.sh does what its sweep says; runs.tsv, a
        table, does nothing."""
        return self.sweep if self.name == SWEEP_SCRIPT else None

    @property
    def relative_path(self) -> str:
        return f"{self.sweep.id}/{self.name}"

    @property
    def source_file(self) -> str:
        return self.sweep.source_file

    @property
    def folder(self) -> str:
        return self.sweep.id


def build_sweep(expansion: Expansion, jobs: list[Job], texts: list[str]) -> Sweep:
    """The sweep of `expansion`, whose runs compiled to `jobs` and their scripts `texts`."""
    runs = tuple(
        SweepEntry(index, job.id, tuple(dict(job.sweep.labels).get(axis, "")
                                        for axis in expansion.axes),
                   hashlib.sha256(text.encode()).hexdigest())
        for index, (job, text) in enumerate(zip(jobs, texts, strict=True)))
    unsubmittable = tuple(job.id for job in jobs if job.slurm is None)
    directives = _array_directives(expansion, jobs) if not unsubmittable else None
    submission: Submission = "none" if unsubmittable else \
        "array" if directives is not None else "each"
    return Sweep(expansion.id, jobs[0].source_file, jobs[0].obc_version, expansion.axes,
                 runs, expansion.combinations, expansion.excluded, expansion.max_parallel,
                 submission, directives or (), unsubmittable)


def throttled(expansion: Expansion, jobs: list[Job]) -> bool:
    """Whether max_parallel applies to these runs: sweep.sh submits them as one job array."""
    return expansion.max_parallel is not None and all(job.slurm for job in jobs) and \
        _array_directives(expansion, jobs) is not None


def _array_directives(expansion: Expansion, jobs: list[Job]) -> tuple[str, ...] | None:
    """The #SBATCH lines of the job array: the runs' own, which must be the same but for the
    job name (each run's id, by default); None when they differ (Slurm gives every task of
    an array the same options)."""
    names, others = set(), set()
    for job in jobs:
        assert job.slurm is not None
        names.add(job.slurm.job_name)
        others.add(tuple(d for d in job.slurm.directives if not d.startswith("--job-name=")))
    if len(others) != 1:
        return None
    name = names.pop() if len(names) == 1 else expansion.id
    shared = [f"--output={ARRAY_OUTPUT}" if d == f"--output={DEFAULT_SLURM_OUTPUT}" else d
              for d in others.pop()]
    count = len(jobs)
    return (f"--job-name={name}", *shared,
            f"--array=0-{count - 1}{_throttle(expansion.max_parallel)}")


def _throttle(max_parallel: int | None) -> str:
    """What limits a job array to `max_parallel` tasks at once: %N after its indexes."""
    return f"%{max_parallel}" if max_parallel else ""


def help_lines(sweep: Sweep) -> list[str]:
    """The summary at the top of sweep.sh, which --help prints too."""
    named = sum(1 for run in sweep.runs if not any(run.labels))
    made = [f"{len(sweep.runs) - named} of the {sweep.combinations} combinations of the axes "
            f"({sweep.excluded} excluded)"] if sweep.axes else []
    made += [f"{named} named run{'s' if named > 1 else ''}"] if named else []
    rows = [
        ("sweep", [f"{sweep.id}: {len(sweep.runs)} runs: {', and '.join(made)}"]),
        ("obc", [sweep.obc_version]),
        ("axes", [f"{axis}: {', '.join(_labels(sweep, i))}" for i, axis in
                  enumerate(sweep.axes)]),
        ("runs", [f"../<run id>/job.sh each, started only if unchanged (sha256); "
                  f"--list or {RUNS_TABLE} lists them, --status with their states"]),
        ("submit", _submission(sweep)),
        ("exit codes", list(EXIT_CODES)),
        ("usage", [USAGE]),
    ]
    return labelled_lines(rows)


def _labels(sweep: Sweep, axis: int) -> list[str]:
    return list(dict.fromkeys(run.labels[axis] for run in sweep.runs if run.labels[axis]))


def _submission(sweep: Sweep) -> list[str]:
    if sweep.submission == "array":
        throttle = f", {sweep.max_parallel} at a time" if sweep.max_parallel else ""
        return [f"--submit: one job array of {len(sweep.runs)} tasks{throttle}; each task "
                "runs its run's job.sh"]
    if sweep.submission == "each":
        throttle = "; max_parallel applies to a job array only" if sweep.max_parallel else ""
        return ["--submit: each run with its own sbatch (their #SBATCH lines differ, and "
                f"the tasks of a job array share theirs){throttle}"]
    return [f"--submit cannot: {', '.join(sweep.unsubmittable[:3])}"
            + (f" and {len(sweep.unsubmittable) - 3} more" if len(sweep.unsubmittable) > 3
               else "") + " have no slurm block"]


def runs_table(sweep: Sweep) -> str:
    """The text of runs.tsv: two comment lines (the second marks it as obc's), then the
    table."""
    return (f"# The runs of sweep {sweep.id}: the Slurm array index, the id, the label on "
            "each axis; tab-separated.\n"
            f"# {GENERATED_PREFIX}{sweep.source_file}. DO NOT EDIT.\n" + sweep.table)
