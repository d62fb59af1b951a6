"""health: (docs/preflight.md): a check that requeues the job needs Slurm and a bound on its
restarts; and each node runs its check from a copy of job.sh, which enroot's nodes do not."""

from __future__ import annotations

from collections.abc import Iterator

from .common import Problem, get


def check(data: dict, kind: object) -> Iterator[Problem]:
    if not isinstance(data.get("health"), dict):
        return
    slurm = data.get("slurm")
    if get(data, "health", "on_failure") == "requeue":
        if not isinstance(slurm, dict):
            yield Problem(("health", "on_failure"), "requeue needs Slurm: only a Slurm job "
                          "can exclude a node and be requeued", "add slurm:, or write stop")
        elif "max_restarts" not in slurm:
            yield Problem(("health", "on_failure"), "requeue needs slurm.max_restarts, the "
                          "most times the job requeues itself", "add slurm.max_restarts: 2")
    nodes = get(data, "slurm", "nodes")
    if kind == "enroot" and isinstance(nodes, int) and nodes > 1:
        yield Problem(("health",), "each node runs its health check from a copy of job.sh, "
                      "and on several nodes an enroot job's srun starts the containers "
                      "instead", at_key=True, hint="run the job with apptainer or natively, "
                      "or on one node")
