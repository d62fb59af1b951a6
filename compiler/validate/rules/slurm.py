"""The `slurm` block: what a multi-node job needs, and `extra` options that sbatch would read
against what the fields say or what the script relies on, or not as written (an option that
takes a value without one). Which of the rest a job may give is the site policy's to say
(policy_rules.py; without one, obc's allow-list)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ...core.diagnostics import did_you_mean
from ...model.slurm import RENDEZVOUS_NAMES
from ...read.load import Path_
from .common import Problem, get
from .names import declared_names
from .sbatch_options import (
    SBATCH_22_05_OPTIONS,
    SBATCH_ALIASES,
    SBATCH_OPTIONS,
    arity_problem,
    sbatch_matches,
)

# sbatch options a `slurm` field writes, by the field; `extra` must not give them again.
SLURM_FIELDS = {
    "job-name": "job_name", "output": "output", "partition": "partition",
    "account": "account", "qos": "qos", "time": "time", "nodes": "nodes",
    "gpus-per-node": "gpus_per_node", "cpus-per-task": "cpus_per_task", "mem": "mem",
    "constraint": "constraint", "signal": "signal", "requeue": "requeue",
    "no-requeue": "requeue", "open-mode": "requeue",
}
# sbatch options that would break what the script relies on, with the reason.
_ONE_TASK = "the script runs one task per node and starts the rest with srun"
_ENVIRONMENT = ("the job needs the submitter's environment, secrets included, by name; "
                "put values in env: instead")
SLURM_REFUSED = {
    "ntasks": _ONE_TASK,
    "ntasks-per-node": _ONE_TASK,
    "export": _ENVIRONMENT,
    "export-file": _ENVIRONMENT,
    "wrap": "job.sh is the batch script",
    **dict.fromkeys(("help", "usage", "version", "test-only"),
                    "sbatch job.sh would then not submit the job"),
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
        if isinstance(option, str) and _OPTION_NAME.match(option):  # else the schema says
            yield from _slurm_option(("slurm", "extra", i), option)
    if multi_node:
        for path, name in declared_names(data):
            if name in RENDEZVOUS_NAMES:
                yield Problem(path, f"'{name}' cannot be set by a run file: a job on several "
                              "nodes sets it for every step", at_key=path[0] == "env")


_OPTION_NAME = re.compile(r"--[a-z][a-z0-9-]*(?:=|$)")


def _slurm_option(path: Path_, option: str) -> Iterator[Problem]:
    given = option[2:].partition("=")[0]
    matches = sbatch_matches(given)
    if not matches:
        yield Problem(path, f"sbatch has no option --{given}{did_you_mean(given, SBATCH_OPTIONS)}")
        return
    if len(matches) > 1:
        yield Problem(path, f"--{given} abbreviates several sbatch options (--"
                      + ", --".join(matches) + ")", "write the option in full")
        return
    # An older sbatch can read a newer option as an abbreviation (--extra is --extra-node-info
    # to sbatch 22.05): every reading must be allowed.
    for name in dict.fromkeys([*matches, *sbatch_matches(given, SBATCH_22_05_OPTIONS)]):
        problem = _taken(given, name)
        if problem:
            yield Problem(path, problem)
            return
    if matches != [given]:
        yield Problem(path, f"sbatch reads --{given} as --{matches[0]}",
                      "write the option in full, so that a reader of the script sees it")
    elif problem := arity_problem(given, "=" in option):
        yield Problem(path, problem)


def _taken(given: str, name: str) -> str | None:
    """Why `--given`, read by sbatch as `--name`, cannot be in `extra`, if it cannot."""
    said = f"--{name}" if name == given else f"sbatch reads --{given} as --{name}, which"
    canonical = SBATCH_ALIASES.get(name, name)
    if canonical in SLURM_FIELDS:
        return f"{said} is set by slurm.{SLURM_FIELDS[canonical]}; use that field"
    if canonical in SLURM_REFUSED:
        return f"{said} cannot be given: {SLURM_REFUSED[canonical]}"
    return None
