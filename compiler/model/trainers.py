"""The trainers obc knows, one record each: what a job needs to know of a trainer to run it,
resume it and say what it does (README, "Trainers"). normalise reads the run file's
`trainer.<name>` by them; the rules, the renderers and the plan read the same facts here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .defaults import (
    DEFAULT_AXOLOTL_VERSION,
    DEFAULT_LLAMAFACTORY_VERSION,
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
    against by default, and whether it saves a checkpoint when asked (checkpoint.on_signal);
    its configs besides the training one (a key under trainer.<name>, and the file it is
    written to in the run dir), what the job sets for it to start its own launcher, and the
    variable that tells that launcher the ranks of a node."""

    name: str
    title: str
    config_name: str
    step_names: tuple[str, ...]
    output_dir: str
    resume_flag: str
    no_telemetry: tuple[tuple[str, str], ...]
    version: str
    checkpoints_on_signal: bool
    more_configs: tuple[tuple[str, str], ...] = ()
    launch_env: tuple[tuple[str, str], ...] = ()
    ranks_env: str | None = None

    @property
    def env(self) -> tuple[tuple[str, str], ...]:
        """What a job of this trainer sets in its environment: its launcher's switch, no
        telemetry, and W&B resumed."""
        return (*self.launch_env, *self.no_telemetry, *WANDB_RESUME)


AXOLOTL = TrainerKind(
    "axolotl", "Axolotl", "axolotl.yaml", ("preprocess", "train", "merge"), DEFAULT_OUTPUT_DIR,
    "--resume-from-checkpoint",
    # With telemetry on and no network, `axolotl train` would not exit.
    (("AXOLOTL_DO_NOT_TRACK", "1"),), DEFAULT_AXOLOTL_VERSION, checkpoints_on_signal=True)
TRL = TrainerKind(
    "trl", "TRL", "trl.yaml", ("train", "merge"), DEFAULT_TRAINER_OUTPUT_DIR,
    "--resume_from_checkpoint",
    HF_NO_TELEMETRY, DEFAULT_TRL_VERSION, checkpoints_on_signal=False)
# llamafactory-cli reads the config, then key=value words that override it (hparams/parser.py,
# read_args: OmegaConf.from_cli); an explicit resume_from_checkpoint wins over its own search
# of output_dir (parser.py, get_train_args: get_last_checkpoint only when it is None). With
# FORCE_TORCHRUN, `llamafactory-cli train` starts torchrun itself with NNODES, NODE_RANK,
# NPROC_PER_NODE, MASTER_ADDR and MASTER_PORT from the environment (launcher.py), which
# obc's rendezvous exports on several nodes; without it, a CPU gets no ranks at all.
LLAMAFACTORY = TrainerKind(
    "llamafactory", "LLaMA-Factory", "llamafactory.yaml", ("train", "export"),
    DEFAULT_TRAINER_OUTPUT_DIR, "resume_from_checkpoint=",
    HF_NO_TELEMETRY, DEFAULT_LLAMAFACTORY_VERSION, checkpoints_on_signal=False,
    more_configs=(("export", "llamafactory-export.yaml"),),
    launch_env=(("FORCE_TORCHRUN", "1"),), ranks_env="NPROC_PER_NODE")
TRAINER_KINDS = {kind.name: kind for kind in (AXOLOTL, TRL, LLAMAFACTORY)}


def trainer_kind(data: dict[str, Any]) -> TrainerKind | None:
    """The trainer a valid run file names, if any."""
    trainer = data.get("trainer")
    if not isinstance(trainer, dict) or len(trainer) != 1:
        return None
    return TRAINER_KINDS.get(next(iter(trainer)))


# Every trainer a run file can name under `trainer:` (the schema's keys): the records above,
# and trainer.torchrun, which has none yet (normalise/torchrun.py holds its facts).
TRAINER_NAMES = ("axolotl", "trl", "torchrun", "llamafactory")


def checkpoints_on_signal(data: dict[str, Any]) -> bool:
    """Whether the run file's trainer saves a checkpoint on a stop signal: by its record, or
    a script under torchrun, which has TERM from its launcher (LLaMA-Factory, as
    transformers' Trainer, saves nothing on TERM)."""
    kind = trainer_kind(data)
    if kind is not None:
        return kind.checkpoints_on_signal
    trainer = data.get("trainer")
    return isinstance(trainer, dict) and list(trainer) == ["torchrun"]
