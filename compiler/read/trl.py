"""What obc knows of a `trl sft` config beyond its schema: which of its values name files
that TRL will look for in the run dir (it runs there, as Axolotl does: read/axolotl.py reads
both configs alike), and what the run file's trainer.trl asks of it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..core.diagnostics import Diagnostic
from ..core.resources import trainer_schema, trainer_schema_versions
from ..model.trainers import TRL
from .axolotl import ConfigPlace, PathKeys

# TRL's config names files by these keys (ScriptArguments, ModelConfig, SFTConfig; `datasets`
# is DatasetMixtureConfig's list, each item a `load_dataset` call); a model, a dataset and a
# chat template may be a hub id instead.
TRL_PATHS = PathKeys(files=("deepspeed", "config_file"),
                     files_or_hub=("model_name_or_path", "dataset_name", "chat_template_path"),
                     dataset_lists=("datasets",), dataset_keys=("path", "data_dir",
                                                                "data_files"))


def trl_problems(where: ConfigPlace) -> Iterator[Diagnostic]:
    """What the run file's trainer.trl asks that its config cannot give: a merge needs the
    LoRA adapter that use_peft makes (without it train saves a whole model, nothing to
    merge); on several nodes, torchrun starts train and reads none of accelerate launch's
    options."""
    trl: dict[str, Any] = where.source.data["trainer"]["trl"]
    nodes = where.source.data.get("slurm", {}).get("nodes", 1)
    for key in _launch_options(trl.get("version", TRL.version)) if nodes > 1 else ():
        if key in where.config:
            yield where.problem((key,), "trl sft passes it to accelerate launch, but on "
                                "several nodes obc starts train with torchrun, which does "
                                "not read it", "remove it: obc gives torchrun the nodes, "
                                "GPUs per node and rendezvous (docs/trainers.md)",
                                key=True)
    if trl.get("merge") and str(where.config.get("use_peft", False)).lower() not in \
            ("true", "yes", "t", "y", "1"):
        yield where.source.problem(("trainer", "trl", "merge"), "merges a LoRA adapter, "
                                   "which train makes only with use_peft: true in the config",
                                   "set use_peft: true in the config, or remove merge")


def _launch_options(version: str) -> list[str]:
    """The config keys TRL `version` passes to accelerate launch (none for a release obc has
    no schema of, which trainer_config reports)."""
    if version not in trainer_schema_versions(TRL.name):
        return []
    return trainer_schema(TRL.name, version)["$defs"]["launch_options"]["enum"]
