"""A job's stages on Slurm (slurm.stages, docs/stages.md): the job's steps → its stages, and
each stage → a job of its own, whose script OUT/<run>-<stage>/job.sh runs that stage's steps
in the job's run dir.

A step the run file names runs alone, on one node, with the job's slurm block as amended by
its stage's fields; the job's other steps run together in one stage, named after its first
step, with the job's own resources. Each stage's Slurm job is named <job name>-<stage>.
The steps' identity (the training inputs) is the whole job's in every stage's script, so
that each finds the work of the stages before it as done.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..model.job import Job, Stage, Step, stage_job
from ..model.runtimes import Gpus
from ..model.slurm import Slurm


def stages(given: dict[str, dict[str, Any]], steps: tuple[Step, ...], slurm: Slurm,
           gpus: Gpus) -> tuple[Stage, ...]:
    """The stages of a job of `steps` whose run file gives these slurm.stages, in step order.
    A name that is no step of the job makes no stage (validate/stage_rules.py says so)."""
    others = tuple(step for step in steps if step.name not in given)
    found = []
    for step in steps:
        if step.name in given:
            found.append(_own_stage(step, given[step.name], slurm, gpus))
        elif step is others[0]:
            found.append(Stage(step.name, others, _named(slurm, step.name), gpus))
    return tuple(found)


def _own_stage(step: Step, fields: dict[str, Any], slurm: Slurm, gpus: Gpus) -> Stage:
    """The stage of a step the run file names: the job's slurm block with the stage's own
    fields, on one node, named after the job and the step."""
    amended = dataclasses.replace(
        _named(slurm, step.name), nodes=1,
        **{name: str(value) if name == "time" else value for name, value in fields.items()})
    return Stage(step.name, (step,), amended, "none" if amended.gpus_per_node == 0 else gpus)


def _named(slurm: Slurm, stage: str) -> Slurm:
    """A stage's Slurm job is named after the job's and the stage (and so is its log)."""
    return dataclasses.replace(slurm, job_name=f"{slurm.job_name}-{stage}")


def stage_jobs(job: Job) -> tuple[Job, ...]:
    """One job for each stage of `job`: its steps and resources, in the job's run dir."""
    return tuple(stage_job(job, stage) for stage in job.stages)
