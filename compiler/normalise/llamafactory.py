"""Normalising `trainer.llamafactory`: `llamafactory-cli train` on every node, an optional
`llamafactory-cli export` once, its config written into the run dir, and where train resumes
from. Unproven with the real package (README, "Trainers"): what obc relies on is taken from
LLaMA-Factory 0.9.5's own code and docs, cited where it is used. Part of the normalise stage:
the input is valid, so nothing here reports problems."""

from __future__ import annotations

import posixpath
from typing import Any

from ..model.defaults import DEFAULT_RESUME, DEFAULT_TRAINER_OUTPUT_DIR
from ..model.job import Checkpoints, EmbeddedFile, Step
from ..model.runtimes import Mount
from ..model.trainers import HF_NO_TELEMETRY, WANDB_RESUME
from ..read.load import Path_
from .trainer import TRAIN, dump_config, host_place

FIELD = ("trainer", "llamafactory")
CONFIG_FIELD: Path_ = (*FIELD, "config")
EXPORT_FIELD: Path_ = (*FIELD, "export")
# Where the job writes the configs, in the run dir.
CONFIG_NAME = "llamafactory.yaml"
EXPORT_NAME = "llamafactory-export.yaml"
# llamafactory-cli reads the config, then key=value words that override it (hparams/parser.py,
# read_args: OmegaConf.from_cli); an explicit resume_from_checkpoint wins over its own search
# of output_dir (parser.py, get_train_args: get_last_checkpoint only when it is None).
RESUME_WORD = "resume_from_checkpoint="
# FORCE_TORCHRUN makes llamafactory-cli start torchrun itself, with NNODES, NODE_RANK,
# NPROC_PER_NODE, MASTER_ADDR and MASTER_PORT from the environment (launcher.py; the docs'
# "distributed" page), which obc's rendezvous exports on several nodes. Hugging Face's
# libraries send no telemetry; a resumed run continues its W&B run.
LLAMAFACTORY_ENV = (("FORCE_TORCHRUN", "1"), *HF_NO_TELEMETRY, *WANDB_RESUME)


def config_fields(data: dict[str, Any]) -> list[tuple[Path_, str]]:
    """The configs given as files, with the path each names."""
    return [(path, value) for path in (CONFIG_FIELD, EXPORT_FIELD)
            if isinstance(value := data["trainer"]["llamafactory"].get(path[-1]), str)]


def steps(data: dict[str, Any]) -> tuple[Step, ...]:
    train = Step(TRAIN, ("llamafactory-cli", "train", CONFIG_NAME), "all")
    if "export" not in data["trainer"]["llamafactory"]:
        return (train,)
    return train, Step("export", ("llamafactory-cli", "export", EXPORT_NAME), "first")


def env(data: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """LLAMAFACTORY_ENV, and NPROC_PER_NODE when obc knows the ranks of a node."""
    gpus = data["runtime"].get("gpus")
    ranks = data["trainer"]["llamafactory"].get("nproc_per_node") or \
        data.get("slurm", {}).get("gpus_per_node") or (len(gpus) if isinstance(gpus, list)
                                                        else None)
    return LLAMAFACTORY_ENV + ((("NPROC_PER_NODE", str(ranks)),) if ranks else ())


def files(data: dict[str, Any], attachments: dict[Path_, str]) -> tuple[EmbeddedFile, ...]:
    """The configs as the job writes them: a file as it is, an inline mapping as YAML."""
    given = data["trainer"]["llamafactory"]
    written = []
    for path, name in ((CONFIG_FIELD, CONFIG_NAME), (EXPORT_FIELD, EXPORT_NAME)):
        config = given.get(path[-1])
        if isinstance(config, str):
            written.append(EmbeddedFile(name, attachments[path], config))
        elif config is not None:
            written.append(EmbeddedFile(name, dump_config(config), ".".join(path)))
    return tuple(written)


def checkpoints(data: dict[str, Any], config: dict[str, Any],
                mounts: tuple[Mount, ...] | None) -> Checkpoints | None:
    resume = data["trainer"]["llamafactory"].get("resume", DEFAULT_RESUME)
    output_dir = posixpath.normpath(str(config.get("output_dir", DEFAULT_TRAINER_OUTPUT_DIR)))
    return Checkpoints(TRAIN, output_dir, *host_place(output_dir, mounts), resume,
                       trainer_title="LLaMA-Factory", resume_flag=RESUME_WORD,
                       resume_field="trainer.llamafactory.resume")
