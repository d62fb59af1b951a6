"""The trainers obc knows, one record each: what a job needs to know of a trainer to run it,
resume it and say what it does (README, "Trainers"). normalise reads the run file's
`trainer.<name>` by them; the rules, the renderers and the plan read the same facts here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .defaults import (
    DEFAULT_AXOLOTL_VERSION,
    DEFAULT_OUTPUT_DIR,
    DEFAULT_TRAINER_OUTPUT_DIR,
    DEFAULT_TRL_VERSION,
)

# Hugging Face's libraries ping the Hub (huggingface_hub's send_telemetry) unless this is set.
HF_NO_TELEMETRY = (("HF_HUB_DISABLE_TELEMETRY", "1"),)
# A resumed run continues its W&B run (the job sets WANDB_RUN_ID, which needs the run dir).
WANDB_RESUME = (("WANDB_RESUME", "allow"),)


@dataclass(frozen=True, slots=True)
class TrainerKind:
    """One trainer: its key under `trainer:`, its name for people, the file its config is
    written to in the run dir, the steps it may add (in order), where it writes checkpoints
    when its config does not say, the option that resumes train from one, what the job sets
    in the environment so that it sends no telemetry, the release its config is checked
    against by default, and whether it saves a checkpoint when asked (checkpoint.on_signal)."""

    name: str
    title: str
    config_name: str
    step_names: tuple[str, ...]
    output_dir: str
    resume_flag: str
    no_telemetry: tuple[tuple[str, str], ...]
    version: str
    checkpoints_on_signal: bool

    @property
    def env(self) -> tuple[tuple[str, str], ...]:
        """What a job of this trainer sets in its environment: no telemetry, and W&B resumed."""
        return (*self.no_telemetry, *WANDB_RESUME)


AXOLOTL = TrainerKind(
    "axolotl", "Axolotl", "axolotl.yaml", ("preprocess", "train", "merge"), DEFAULT_OUTPUT_DIR,
    "--resume-from-checkpoint",
    # With telemetry on and no network, `axolotl train` would not exit.
    (("AXOLOTL_DO_NOT_TRACK", "1"),), DEFAULT_AXOLOTL_VERSION, checkpoints_on_signal=True)
TRL = TrainerKind(
    "trl", "TRL", "trl.yaml", ("train", "merge"), DEFAULT_TRAINER_OUTPUT_DIR,
    "--resume_from_checkpoint",
    HF_NO_TELEMETRY, DEFAULT_TRL_VERSION, checkpoints_on_signal=False)
TRAINER_KINDS = {kind.name: kind for kind in (AXOLOTL, TRL)}


def trainer_kind(data: dict[str, Any]) -> TrainerKind | None:
    """The trainer a valid run file names, if any."""
    trainer = data.get("trainer")
    if not isinstance(trainer, dict) or len(trainer) != 1:
        return None
    return TRAINER_KINDS.get(next(iter(trainer)))


# Every trainer a run file can name under `trainer:` (the schema's keys): the records above,
# and trainer.torchrun and trainer.llamafactory, which have none yet (normalise/torchrun.py,
# normalise/llamafactory.py hold their facts).
TRAINER_NAMES = ("axolotl", "trl", "torchrun", "llamafactory")


@dataclass(frozen=True, slots=True)
class ConfigSignature:
    """What tells a trainer's own config from the others' (`obc init` reads it): any one of
    `keys` at its top level. Axolotl's are keys of its schema that TRL's lacks, TRL's the
    reverse, LLaMA-Factory's in neither (tests/unit/test_config_signatures.py holds them to
    the schemas, of every release); torchrun runs a script, which has no config to tell."""

    trainer: str
    title: str
    keys: tuple[str, ...]


CONFIG_SIGNATURES = (
    ConfigSignature(AXOLOTL.name, AXOLOTL.title,
                    ("base_model", "micro_batch_size", "num_epochs", "sequence_len")),
    ConfigSignature(TRL.name, TRL.title, ("dataset_name", "dataset_text_field", "use_peft")),
    # LLaMA-Factory 0.9.5's hparams (FinetuningArguments, DataArguments).
    ConfigSignature("llamafactory", "LLaMA-Factory",
                    ("stage", "finetuning_type", "template", "cutoff_len")),
)


def checkpoints_on_signal(data: dict[str, Any]) -> bool:
    """Whether the run file's trainer saves a checkpoint on a stop signal: by its record, or
    a script under torchrun, which has TERM from its launcher (LLaMA-Factory, as
    transformers' Trainer, saves nothing on TERM)."""
    kind = trainer_kind(data)
    if kind is not None:
        return kind.checkpoints_on_signal
    trainer = data.get("trainer")
    return isinstance(trainer, dict) and list(trainer) == ["torchrun"]
