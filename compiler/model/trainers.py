"""The trainers obc knows, one record each: what a job needs to know of a trainer to run it,
resume it and say what it does (docs/trainers.md). normalise reads the run file's
`trainer.<name>` by them; the rules, the renderers and the plan read the same facts here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .defaults import (
    DEFAULT_AXOLOTL_VERSION,
    DEFAULT_LLAMAFACTORY_VERSION,
    DEFAULT_OUTPUT_DIR,
    DEFAULT_TORCHRUN_OUTPUT_DIR,
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
    written to in the run dir (None: it has no config), the steps it may add (in order), where
    it writes checkpoints when its config does not say, the option that resumes train from one
    (None: the run file names it), what the job sets in the environment so that it sends no
    telemetry, the release its config is checked against by default (None: no schema),
    whether it saves a checkpoint when asked (checkpoint.on_signal) and the key of its config
    that obc turns on for it to save one on TERM (None: asked otherwise), and whether obc's
    default image (Axolotl's: torch, torchrun, accelerate) runs it; its configs besides the
    training one (a key under trainer.<name>, and the file it is written to in the run dir),
    what the job sets for it to start its own launcher, and the variable that tells that
    launcher the ranks of a node; and whether it refuses a config with a key given twice
    (else it keeps the last one, as PyYAML does)."""

    name: str
    title: str
    config_name: str | None
    step_names: tuple[str, ...]
    output_dir: str
    resume_flag: str | None
    no_telemetry: tuple[tuple[str, str], ...]
    version: str | None
    checkpoints_on_signal: bool
    term_checkpoint_key: str | None = None
    in_default_image: bool = False
    more_configs: tuple[tuple[str, str], ...] = ()
    launch_env: tuple[tuple[str, str], ...] = ()
    ranks_env: str | None = None
    refuses_duplicate_keys: bool = False

    @property
    def config_field(self) -> tuple[str, ...] | None:
        """The run file's field of its config, a file's name or a mapping, which a sweep may
        patch (trainer.NAME.config); None for a trainer without one."""
        return None if self.config_name is None else ("trainer", self.name, "config")

    @property
    def output_dir_field(self) -> tuple[str, ...]:
        """The run file's field that says where train writes its checkpoints: its config's
        output_dir, or for a trainer without a config its own (trainer.torchrun.output_dir)."""
        return (*(self.config_field or ("trainer", self.name)), "output_dir")

    @property
    def env(self) -> tuple[tuple[str, str], ...]:
        """What a job of this trainer sets in its environment: its launcher's switch, no
        telemetry, and W&B resumed."""
        return (*self.launch_env, *self.no_telemetry, *WANDB_RESUME)


AXOLOTL = TrainerKind(
    "axolotl", "Axolotl", "axolotl.yaml", ("preprocess", "train", "merge"), DEFAULT_OUTPUT_DIR,
    "--resume-from-checkpoint",
    # With telemetry on and no network, `axolotl train` would not exit.
    (("AXOLOTL_DO_NOT_TRACK", "1"),), DEFAULT_AXOLOTL_VERSION, checkpoints_on_signal=True,
    in_default_image=True)
# transformers' Trainer saves a checkpoint at its next step after a TERM with
# enable_jit_checkpoint (trainer_jit_checkpoint.py; the tests' 5.6 and 5.17 have it). `trl
# sft` on one process trains in a child of accelerate's simple launcher, in the step's
# process group, which has TERM from the job itself: the launcher ends at once, and the job
# waits for the rest of the group; on several, torchrun passes TERM on.
TRANSFORMERS_TERM_CHECKPOINT = "enable_jit_checkpoint"
TRL = TrainerKind(
    "trl", "TRL", "trl.yaml", ("train", "merge"), DEFAULT_TRAINER_OUTPUT_DIR,
    "--resume_from_checkpoint",
    HF_NO_TELEMETRY, DEFAULT_TRL_VERSION, checkpoints_on_signal=True,
    term_checkpoint_key=TRANSFORMERS_TERM_CHECKPOINT)
# A user's own script, launched by torchrun or accelerate (model/launcher.py): no config, and
# resumed with the flag the run file names (trainer.torchrun.resume.flag). Its own telemetry
# is its business; Hugging Face's libraries it may use send none. It has TERM from its
# launcher, and saves in the grace the job gives it.
TORCHRUN = TrainerKind(
    "torchrun", "the script", None, ("train",), DEFAULT_TORCHRUN_OUTPUT_DIR, None,
    HF_NO_TELEMETRY, None, checkpoints_on_signal=True, in_default_image=True)
# llamafactory-cli reads the config, then key=value words that override it (hparams/parser.py,
# read_args: OmegaConf.from_cli); an explicit resume_from_checkpoint wins over its own search
# of output_dir (parser.py, get_train_args: get_last_checkpoint only when it is None). With
# FORCE_TORCHRUN, `llamafactory-cli train` starts torchrun itself with NNODES, NODE_RANK,
# NPROC_PER_NODE, MASTER_ADDR and MASTER_PORT from the environment (launcher.py), which
# obc's rendezvous exports on several nodes; without it, a CPU gets no ranks at all. Its
# torchrun, in the step's process group, passes the job's TERM on to its ranks, which save
# (transformers' enable_jit_checkpoint); llamafactory-cli itself ends at once.
LLAMAFACTORY = TrainerKind(
    "llamafactory", "LLaMA-Factory", "llamafactory.yaml", ("train", "export"),
    DEFAULT_TRAINER_OUTPUT_DIR, "resume_from_checkpoint=",
    HF_NO_TELEMETRY, DEFAULT_LLAMAFACTORY_VERSION, checkpoints_on_signal=True,
    term_checkpoint_key=TRANSFORMERS_TERM_CHECKPOINT,
    more_configs=(("export", "llamafactory-export.yaml"),),
    launch_env=(("FORCE_TORCHRUN", "1"),), ranks_env="NPROC_PER_NODE",
    # OmegaConf.load, which reads the config, refuses a duplicate key (omegaconf/_utils.py).
    refuses_duplicate_keys=True)
TRAINER_KINDS = {kind.name: kind for kind in (AXOLOTL, TRL, TORCHRUN, LLAMAFACTORY)}


def trainer_kind(data: Any) -> TrainerKind | None:
    """The trainer a valid run file names, if any."""
    trainer = data.get("trainer") if isinstance(data, dict) else None
    if not isinstance(trainer, dict) or len(trainer) != 1:
        return None
    return TRAINER_KINDS.get(next(iter(trainer)))


def config_field(data: Any) -> tuple[str, ...] | None:
    """The field of the run file's trainer config (trainer.NAME.config), if its trainer has
    one."""
    kind = trainer_kind(data)
    return None if kind is None else kind.config_field


# Every trainer a run file can name under `trainer:` (the schema's keys).
TRAINER_NAMES = tuple(TRAINER_KINDS)


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
    ConfigSignature(LLAMAFACTORY.name, LLAMAFACTORY.title,
                    ("stage", "finetuning_type", "template", "cutoff_len")),
)


def checkpoints_on_signal(data: dict[str, Any]) -> bool:
    """Whether the run file's trainer saves a checkpoint on a stop signal, by its record: one
    that saves on TERM (TRL, LLaMA-Factory) only in a native job, where the job's TERM goes to
    the step's whole process group (a container's init, and apptainer, pass it to the
    trainer's launcher alone, which ends at once without passing it on)."""
    kind = trainer_kind(data)
    return kind is not None and kind.checkpoints_on_signal and \
        (kind.term_checkpoint_key is None or signal_reaches_the_group(data))


def signal_reaches_the_group(data: dict[str, Any]) -> bool:
    """Whether a stop signal reaches every process of a step: a native job's."""
    runtime = data.get("runtime")
    return isinstance(runtime, dict) and runtime.get("kind") == "native"
