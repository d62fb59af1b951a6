"""The rules of slurm.stages (docs/stages.md) that need the job's steps as normalise made
them (a trainer's steps depend on its options): each stage names a step of the job, one that
can run alone on one node, and the job's other steps follow one another. Located at the
stage's key in the run file."""

from __future__ import annotations

from ..core.diagnostics import Diagnostic, did_you_mean, show
from ..model.job import Job
from ..read.load import Source

STAGES = ("slurm", "stages")


def problems(source: Source, job: Job) -> list[Diagnostic]:
    """Every broken rule of the job's slurm.stages."""
    given = (source.data.get("slurm") or {}).get("stages") or {}
    names = [step.name for step in job.steps]
    found = []
    for name in given:
        at = (*STAGES, name)
        if name not in names:
            found.append(source.problem(at, f"this job has no step {show(name)}"
                                        f"{did_you_mean(name, names)}",
                                        f"its steps are {', '.join(names)}", key=True))
        elif name in job.node_steps:
            found.append(source.problem(at, f"step {show(name)} runs on every node of this "
                                        f"job's {job.slurm.nodes} nodes, and a stage of its own "
                                        "runs on one", "leave it in the job's own stage",
                                        key=True))
    others = [i for i, name in enumerate(names) if name not in given]
    if others and others[-1] - others[0] + 1 != len(others):
        split = next(names[i] for i in range(others[0], others[-1]) if names[i] in given)
        found.append(source.problem((*STAGES, split), f"stage {show(split)} splits the job's "
                                    f"other steps ({', '.join(names[i] for i in others)}), "
                                    "which run as one stage, in one allocation",
                                    "give the steps after it a stage of their own too, "
                                    "or no stage to this one", key=True))
    return found


def sweep_problems(source: Source) -> list[Diagnostic]:
    """A run of a sweep is submitted by its sweep.sh, as one job: it has no stages."""
    if "stages" not in (source.data.get("slurm") or {}):
        return []
    return [source.problem(STAGES, "a sweep's runs cannot have stages: sweep.sh submits each "
                           "run as one job", "remove slurm.stages, or the matrix", key=True)]
