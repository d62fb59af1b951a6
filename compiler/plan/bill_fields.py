"""Which row of the bill (bill.py) shows each field of the normalised job, and which fields it
does not show, with the reason: the bill is exhaustive by this list.

Fields are named by their path through the model's dataclasses (`runtime.venv`, `steps.argv`:
a runtime's fields are those of all its variants, a collection's those of its items), as
`model_fields` walks them. tests/unit/test_bill_fields.py fails if a field is in neither list, and
checks that a change to any field in BILLED changes the bill (or nothing the script does).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator

from ..model.job import Job

SBATCH = "sbatch"
BILLED: dict[str, str] = {
    "id": "job",
    "source_file": "run file",
    "runtime": "runtime",
    "runtime.engine": "runtime",
    "runtime.enroot_version": "runtime",
    "runtime.venv": "venv",
    "runtime.env_file": "env file",
    "runtime.image": "images",
    "runtime.image_sha256": "images",
    "runtime.user": "privileges",
    "runtime.shm_size": "privileges",
    "runtime.host_network": "privileges",
    "runtime.extra_args": "privileges",
    "runtime.cleanenv": "privileges",
    "runtime.contain": "privileges",
    "runtime.mounts.source": "mounts",
    "runtime.mounts.target": "mounts",
    "runtime.mounts.readonly": "mounts",
    "gpus": "gpus",
    "run_dir": "writable",
    "cache_dir": "writable",
    "shared": "writable",
    "steps.name": "commands",
    "steps.argv": "commands",
    "steps.nodes": "commands",
    "files.path": "files",
    "files.content": "files",
    "files.origin": "files",
    "files.obc_adds": "files",
    "env": "env",
    "secrets.name": "secrets",
    "secrets.required": "secrets",
    "stop_timeout": "stop",
    **{f"slurm.{name}": SBATCH for name in (
        "job_name", "output", "signal", "requeue", "nodes", "gpus_per_node", "cpus_per_task",
        "partition", "account", "qos", "time", "mem", "constraint", "extra",
        "rendezvous_port", "max_restarts", "requeues_itself", "torchrun_step",
        "torchrun_program_step")},
    **{f"checkpoints.{name}": "checkpoints" for name in (
        "step", "output_dir", "host_base", "host_rest", "resume", "prepared_dir",
        "trainer_title", "resume_flag", "resume_field")},
    **{f"launcher.{name}": "commands" for name in (
        "step", "kind", "nproc_per_node", "script", "args")},
    "on_signal.grace": "stop",
    "on_signal.trigger": "stop",
    "retry.exit_codes": "retry",
    "retry.max": "retry",
    **{f"health.{name}": "health" for name in ("gpus", "timeout", "requeue")},
    **{f"notify.{name}": "notify" for name in ("events", "command", "url", "url_secret")},
    **{f"sweep.{name}": "sweep" for name in (
        "sweep", "labels", "name", "changes", "config_file")},
    **{f"stages.{name}": "stages" for name in (
        "name", "steps.name", "steps.argv", "steps.nodes", "gpus",
        *(f"slurm.{field}" for field in (
            "job_name", "output", "signal", "requeue", "nodes", "gpus_per_node",
            "cpus_per_task", "partition", "account", "qos", "time", "mem", "constraint",
            "extra", "rendezvous_port", "max_restarts", "requeues_itself", "torchrun_step",
            "torchrun_program_step")))},
    "stage.run": "stages",
    "stage.name": "stages",
}
NOT_REVIEWABLE: dict[str, str] = {
    "description": "words for people: the script only prints them (its header, --help)",
    "obc_version": "the obc that wrote the script: what it makes the script do is in the "
                   "other rows",
    "inputs": "a hash of the inputs whose effects the other rows show; the header names it, "
              "and it changes with a comment in the run file",
}


def model_fields(cls: type = Job, prefix: str = "") -> Iterator[str]:
    """Yield the path of every field of `cls`, and of the dataclasses its fields hold: a
    field that holds one of several (a runtime) is a field too, a collection is its items'."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        path = prefix + field.name
        held = list(_dataclasses_in(hints[field.name]))
        if not held or len(held) > 1:
            yield path
        seen = set()
        for inner in held:
            for found in model_fields(inner, path + "."):
                if found not in seen:
                    seen.add(found)
                    yield found


def _dataclasses_in(hint: object) -> Iterator[type]:
    """The dataclasses a type hint holds: `X | None`, `A | B`, `tuple[X, ...]`."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        yield hint
    elif typing.get_origin(hint) in (typing.Union, types.UnionType, tuple):
        for arg in typing.get_args(hint):
            yield from _dataclasses_in(arg)


def unaccounted_fields(cls: type = Job) -> list[str]:
    """The fields of `cls` that neither BILLED nor NOT_REVIEWABLE names."""
    return [path for path in model_fields(cls)
            if path not in BILLED and path not in NOT_REVIEWABLE]
