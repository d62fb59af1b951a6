"""The GPU-hours a job asks for (bill.py): what Slurm allocates for the #SBATCH lines the
script carries, the run file's extras included, else the GPUs runtime.gpus names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .job import Job
from .slurm import allocation, time_limit_seconds


@dataclass(frozen=True, slots=True)
class Compute:
    """GPUs × time limit × jobs × runs: what Slurm allocates (its #SBATCH lines, the run
    file's extras included), else the GPUs runtime.gpus names; None where it is left open.
    A job that requeues itself at the time limit runs up to 1 + slurm.max_restarts times."""

    # GPUs of one job (one array task) in all, and per node where they are asked that way.
    gpus: int | Literal["all"]
    gpus_per_node: int | None
    nodes: int
    # The #SBATCH line that asks for the GPUs, where it is not slurm.gpus_per_node's.
    asked_by: str
    hours: float | None
    # An array's tasks, each a job of its own (None: a spec not read here); its --array line.
    tasks: int | None
    array: str | None
    runs: int
    gpu_hours: float | None

    def gpus_text(self) -> str:
        """The GPUs, and the line that asks for them: `4 GPUs × 2 nodes`."""
        if self.gpus == "all":
            gpus = f"all GPUs of {_count(self.nodes, 'node')}"
        elif self.gpus_per_node is not None:
            gpus = f"{_count(self.gpus_per_node, 'GPU')} × {_count(self.nodes, 'node')}"
        else:
            gpus = _count(self.gpus, "GPU")
        return gpus + (f" ({self.asked_by})" if self.asked_by else "")

    def text(self) -> str:
        gpus = self.gpus_text()
        hours = "no time limit" if self.hours is None else f"{self.hours:g} h"
        count = "all" if self.tasks is None else self.tasks
        tasks = "" if self.array is None else f" × {count} array tasks (--array={self.array})"
        runs = f" × {self.runs} runs (slurm.max_restarts {self.runs - 1})" if self.runs > 1 else ""
        total = "unbounded" if self.gpu_hours is None else f"{self.gpu_hours:g} GPU-hours"
        return f"{gpus} × {hours}{tasks}{runs} = {total}"


def compute(job: Job) -> Compute:
    """Return the GPUs, nodes and time limit the job asks for, and their product: what its
    #SBATCH lines allocate, else (no Slurm) the GPUs runtime.gpus names, for no time limit."""
    if job.slurm is not None:
        return compute_of(job.slurm.directives, 1 + (job.slurm.max_restarts or 0))
    gpus: int | Literal["all"] = \
        0 if job.gpus == "none" else "all" if job.gpus == "all" else len(job.gpus)
    return Compute(gpus, gpus if isinstance(gpus, int) else None, 1, "", None, 1, None, 1,
                   0 if gpus == 0 else None)


def compute_of(directives: tuple[str, ...], runs: int = 1) -> Compute:
    """Return the GPU-hours of a job of these #SBATCH lines, run up to `runs` times."""
    allocated = allocation(directives)
    gpus, nodes = allocated.gpus, allocated.nodes
    per_node = gpus // nodes if allocated.per_node and isinstance(gpus, int) and nodes else None
    hours = time_limit_hours(allocated.time) if allocated.time else None
    total = None
    if isinstance(gpus, int) and allocated.tasks is not None and (hours is not None or not gpus):
        total = round(gpus * (hours or 0) * allocated.tasks * runs, 4)
    asked_by = "" if allocated.gpus_by.startswith("--gpus-per-node=") else allocated.gpus_by
    return Compute(gpus, per_node, nodes, asked_by, hours, allocated.tasks, allocated.array,
                   runs, total)


def time_limit_hours(time: str) -> float | None:
    """Return a Slurm time limit in hours; None for UNLIMITED or INFINITE."""
    seconds = time_limit_seconds(time)
    return None if seconds is None else round(seconds / 3600, 4)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
