"""A job's submit script: OUT/<id>/submit.sh, which submits the scripts of its stages
(OUT/<id>-<stage>/job.sh, normalise/stages.py) to Slurm in order, each after the one before
it succeeded (docs/stages.md).

Built from the stages' compiled scripts: submit.sh holds the sha256 of each, and submits
nothing if one is not the script obc compiled.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ..model.gpu_hours import compute
from ..model.job import Job, stage_id, stage_job
from ..read.load import Mark
from .summary import SUBMIT_SCRIPT, labelled_lines

USAGE = "submit.sh [--dry-run] | --help"
# What each stage's script is given: the Slurm job ids of the stages before it.
STAGE_JOB_IDS = "OBC_STAGE_JOB_IDS"
EXIT_CODES = (
    "0 submitted, 1 sbatch failed (the stages before it were submitted), 2 usage,",
    "3 a stage's job.sh is not the one obc compiled (nothing is submitted)",
)


@dataclass(frozen=True, slots=True)
class SubmittedStage:
    """One stage as submit.sh knows it: its name, its script's folder under OUT and sha256,
    its steps, and what it asks Slurm for (its GPU-hours)."""

    name: str
    folder: str
    checksum: str
    steps: tuple[str, ...]
    compute: str


@dataclass(frozen=True, slots=True)
class Submit:
    """What submit.sh is made of: the job, the obc that wrote it, and its stages in order.
    Its plan record says it whole: `obc verify` renders it again from that."""

    run: str
    source_file: str
    obc_version: str
    stages: tuple[SubmittedStage, ...]


@dataclass(frozen=True, slots=True)
class SubmitFile:
    """submit.sh: where it goes under OUT, its text, and its run file (as diagnostics name
    it) with the place of its id. It does what its stages' scripts say: `obc plan` shows
    their bills, and the job's, which lists the stages."""

    submit: Submit
    text: str
    file: str
    id_mark: Mark
    mode: int
    job = None
    judgement = None

    @property
    def relative_path(self) -> str:
        return f"{self.submit.run}/{SUBMIT_SCRIPT}"

    @property
    def source_file(self) -> str:
        return self.submit.source_file

    @property
    def folder(self) -> str:
        return self.submit.run


def build_submit(job: Job, texts: list[str]) -> Submit:
    """The submit script of `job`, whose stages (Job.stages) compiled to these scripts."""
    return Submit(job.id, job.source_file, job.obc_version, tuple(
        SubmittedStage(stage.name, stage_id(job.id, stage.name),
                       hashlib.sha256(text.encode()).hexdigest(),
                       tuple(step.name for step in stage.steps),
                       compute(stage_job(job, stage)).text())
        for stage, text in zip(job.stages, texts, strict=True)))


def help_lines(submit: Submit) -> list[str]:
    """What submit.sh --help prints, and its header says."""
    return labelled_lines([
        ("submit", [f"the stages of job {submit.run}, each a Slurm job of its own, in order: "
                    "each starts", "only once the one before it succeeded "
                    "(--dependency=afterok); a stage that fails", "cancels the ones after "
                    "it (--kill-on-invalid-dep=yes)"]),
        ("stages", [line for n, stage in enumerate(submit.stages, 1) for line in (
            f"{n}. {stage.name}: ../{stage.folder}/job.sh  (steps {', '.join(stage.steps)})",
            f"   {stage.compute}")]),
        ("job ids", ["printed as `STAGE ID`, one stage a line; each stage's script gets "
                     f"{STAGE_JOB_IDS},", "the ids of the stages before it, separated by ':'"]),
        ("whole job", [f"../{submit.run}/job.sh runs every stage's steps in one job (sbatch "
                       "it, or run it", "without Slurm)"]),
        ("checks", ["a stage's job.sh is submitted only if it is the one obc compiled "
                    "(its sha256)"]),
        ("exit codes", list(EXIT_CODES)),
        ("usage", [USAGE]),
    ])
