"""Normalising `trainer.torchrun`: the user's own script, launched by torchrun or accelerate on
every node as the one step train, resumed (when the run file opts in) with the flag it names,
and given the grace on a stop signal to save (its facts: model/trainers.py's TORCHRUN). Part
of the normalise stage: the input is valid, so nothing here reports problems
(rules/torchrun.py has reported them)."""

from __future__ import annotations

import posixpath
from typing import Any

from ..model.defaults import (
    DEFAULT_GRACE,
    DEFAULT_LAUNCHER,
    DEFAULT_NPROC_PER_NODE,
    DEFAULT_RESUME,
)
from ..model.job import Checkpoints, EmbeddedFile, OnSignal, Step
from ..model.launcher import Launcher
from ..model.runtimes import Mount
from ..model.trainers import TORCHRUN
from ..read.load import Path_
from .trainer import TRAIN, host_place, on_signal

# The run file's field that names the script.
SCRIPT_FIELD = ("trainer", "torchrun", "script")


def script_name(torchrun: dict[str, Any]) -> str:
    """Where the job writes the script: in the run dir, under its own name."""
    return posixpath.basename(torchrun["script"])


def launcher(data: dict[str, Any]) -> Launcher:
    torchrun = data["trainer"]["torchrun"]
    return Launcher(TRAIN, torchrun.get("launcher", DEFAULT_LAUNCHER),
                    torchrun.get("nproc_per_node") or _gpus_of_a_node(data),
                    script_name(torchrun), tuple(torchrun.get("args", ())))


def _gpus_of_a_node(data: dict[str, Any]) -> int:
    """The ranks of a node when the run file does not say: Slurm's GPUs a node, else the
    GPUs runtime.gpus lists, else one."""
    gpus = data["runtime"].get("gpus")
    listed = len(gpus) if isinstance(gpus, list) else None
    return data.get("slurm", {}).get("gpus_per_node") or listed or DEFAULT_NPROC_PER_NODE


def attachment_fields(data: dict[str, Any]) -> list[tuple[Path_, str]]:
    """The script, which the job embeds."""
    return [(SCRIPT_FIELD, data["trainer"]["torchrun"]["script"])]


def steps(data: dict[str, Any], config: None, *, multi_node: bool) -> tuple[Step, ...]:
    """train, the launch on one machine (a script has no config; on several nodes, the
    library's part launcher replaces its launcher's words by the rendezvous)."""
    return (Step(TRAIN, launcher(data).one_node, "all"),)


def files(data: dict[str, Any], attachments: dict[Path_, str],
          config: None) -> tuple[EmbeddedFile, ...]:
    """The script, as the project has it."""
    torchrun = data["trainer"]["torchrun"]
    return (EmbeddedFile(script_name(torchrun), attachments[SCRIPT_FIELD], torchrun["script"]),)


def env(data: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """What the job sets for the script: its record's env."""
    return TORCHRUN.env


def signal_checkpoint(data: dict[str, Any], config: None) -> OnSignal | None:
    """On a stop signal the script saves by itself (it has TERM from its launcher): the job
    gives train the grace to."""
    if not on_signal(data):
        return None
    return OnSignal(data.get("checkpoint", {}).get("grace", DEFAULT_GRACE), None)


def checkpoints(data: dict[str, Any], config: None,
                mounts: tuple[Mount, ...] | None) -> Checkpoints | None:
    """Where the script's checkpoints are, when the run file opts in to resume (else obc
    leaves output_dir to the script)."""
    torchrun = data["trainer"]["torchrun"]
    resume = torchrun.get("resume")
    if resume is None:
        return None
    output_dir = posixpath.normpath(torchrun.get("output_dir", TORCHRUN.output_dir))
    return Checkpoints(TRAIN, output_dir, *host_place(output_dir, mounts),
                       resume.get("from", DEFAULT_RESUME), trainer_title=TORCHRUN.title,
                       resume_flag=resume["flag"],
                       resume_field="trainer.torchrun.resume.from")
