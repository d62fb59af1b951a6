"""The `slurm` block: what a multi-node job needs, and `extra` options that sbatch would read
against what the fields say or what the script relies on."""

from __future__ import annotations

from collections.abc import Iterator

from ..load import Path_
from ..model import RENDEZVOUS_NAMES
from .common import Problem, get
from .names import declared_names

# sbatch options a `slurm` field writes, by the field; `extra` must not give them again.
SLURM_FIELDS = {
    "job-name": "job_name", "output": "output", "partition": "partition",
    "account": "account", "qos": "qos", "time": "time", "nodes": "nodes",
    "gpus-per-node": "gpus_per_node", "cpus-per-task": "cpus_per_task", "mem": "mem",
    "constraint": "constraint", "signal": "signal", "requeue": "requeue",
    "no-requeue": "requeue", "open-mode": "requeue",
}
# sbatch options that would break what the script relies on, with the reason.
SLURM_REFUSED = {
    "ntasks": "the script runs one task per node and starts the rest with srun",
    "ntasks-per-node": "the script runs one task per node and starts the rest with srun",
    "export": "the job needs the submitter's environment, secrets included, by name; "
              "put values in env: instead",
    "wrap": "job.sh is the batch script",
}


def check(data: dict) -> Iterator[Problem]:
    slurm = data.get("slurm")
    if not isinstance(slurm, dict):
        return
    nodes, gpus = slurm.get("nodes"), slurm.get("gpus_per_node")
    multi_node = isinstance(nodes, int) and nodes > 1
    if multi_node and "gpus_per_node" not in slurm:
        yield Problem(("slurm", "nodes"), "a job on several nodes needs gpus_per_node: "
                      "each node starts that many training processes", at_key=True)
    runtime_gpus = get(data, "runtime", "gpus")
    if gpus is not None and runtime_gpus not in (None, "all"):
        yield Problem(("runtime", "gpus"), "Slurm picks the GPUs when slurm.gpus_per_node is "
                      "set; leave runtime.gpus at all (the default)", at_key=True)
    extra = slurm.get("extra")
    for i, option in enumerate(extra if isinstance(extra, list) else ()):
        if isinstance(option, str):
            yield from _slurm_option(("slurm", "extra", i), option)
    if multi_node:
        for path, name in declared_names(data):
            if name in RENDEZVOUS_NAMES:
                yield Problem(path, f"'{name}' cannot be set by a run file: a job on several "
                              "nodes sets it for every step", at_key=path[0] == "env")


def _slurm_option(path: Path_, option: str) -> Iterator[Problem]:
    name = option[2:].partition("=")[0]
    if name in SLURM_FIELDS:
        yield Problem(path, f"--{name} is set by slurm.{SLURM_FIELDS[name]}; use that field")
    elif name in SLURM_REFUSED:
        yield Problem(path, f"--{name} cannot be given: {SLURM_REFUSED[name]}")
