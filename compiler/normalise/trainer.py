"""Normalising a trainer with a config (`trainer.axolotl`, `trainer.trl`,
`trainer.llamafactory`): its steps, the configs written into the run dir, its environment,
where train resumes from and how it checkpoints on a stop signal (the parts of a trainer
normalise.py asks each trainer's module for: attachment_fields, steps, files, env,
checkpoints, signal_checkpoint, launcher). Part of the normalise stage: the input is valid,
so nothing here reports problems (axolotl.config_problems has reported them)."""

from __future__ import annotations

import functools
import io
import json
import posixpath
from typing import Any

from ruamel.yaml import YAML

from ..model.defaults import (
    DEFAULT_CHECK_INTERVAL,
    DEFAULT_GRACE,
    DEFAULT_MERGE,
    DEFAULT_ON_SIGNAL,
    DEFAULT_PREPARED_DIR,
    DEFAULT_PREPROCESS,
    DEFAULT_RESUME,
)
from ..model.job import Checkpoints, EmbeddedFile, OnSignal, Resume, Step
from ..model.launcher import Launcher
from ..model.runtimes import Mount, host_folder
from ..model.trainers import (
    AXOLOTL,
    LLAMAFACTORY,
    TRL,
    TrainerKind,
    checkpoints_on_signal,
    trainer_kind,
)
from ..read.axolotl import AXOLOTL_CONFIG_NAME, TRIGGER_FILE
from ..read.load import Path_

# Step name and Axolotl command, in the order they run.
AXOLOTL_STEPS = (("preprocess", "preprocess"), ("train", "train"), ("merge", "merge-lora"))
TRAIN = "train"
# TRL's merge: PEFT's merge_and_unload of the adapter in output_dir (argv[1]), saved with its
# tokenizer into argv[2]. One line, shown whole in the script and its header.
TRL_MERGE = ("import sys; from peft import AutoPeftModelForCausalLM; "
             "from transformers import AutoTokenizer; adapter, merged = sys.argv[1:]; "
             "AutoPeftModelForCausalLM.from_pretrained(adapter).merge_and_unload()"
             ".save_pretrained(merged); "
             "AutoTokenizer.from_pretrained(adapter).save_pretrained(merged)")


def kind_of(data: dict[str, Any]) -> TrainerKind:
    """The trainer of a run file that has one."""
    kind = trainer_kind(data)
    assert kind is not None  # validated
    return kind


def resume_policy(data: dict[str, Any]) -> Resume:
    kind = kind_of(data)
    return data["trainer"][kind.name].get("resume", DEFAULT_RESUME)


def steps(data: dict[str, Any], config: dict[str, Any], *, multi_node: bool) -> tuple[Step, ...]:
    """The steps the run file's trainer adds (`config` is its config as data)."""
    kind = kind_of(data)
    if kind is AXOLOTL:
        return axolotl_steps(data["trainer"]["axolotl"])
    if kind is LLAMAFACTORY:
        return llamafactory_steps(data["trainer"]["llamafactory"])
    return trl_steps(data["trainer"]["trl"], _output_dir(config, kind), multi_node=multi_node)


def llamafactory_steps(factory: dict[str, Any]) -> tuple[Step, ...]:
    """llamafactory-cli train on every node (it starts torchrun itself); with an export
    config, llamafactory-cli export once."""
    names = dict(LLAMAFACTORY.more_configs)
    return tuple(Step(name, ("llamafactory-cli", name, config), "all" if name == TRAIN
                      else "first")
                 for name, config in ((TRAIN, LLAMAFACTORY.config_name),
                                      ("export", names["export"]))
                 if name == TRAIN or name in factory)


def trl_steps(trl: dict[str, Any], output_dir: str, *, multi_node: bool) -> tuple[Step, ...]:
    """trl sft, on every node (on several, as the module torchrun starts: the library's part
    slurm adds the rendezvous); then, with merge, PEFT's merge into <output_dir>/merged."""
    sft = ("torchrun", "-m", "trl.scripts.sft") if multi_node else ("trl", "sft")
    steps = [Step(TRAIN, (*sft, "--config", TRL.config_name, *trl.get("args", ())), "all")]
    if trl.get("merge", DEFAULT_MERGE):
        steps.append(Step("merge", ("python3", "-c", TRL_MERGE, output_dir,
                                    posixpath.join(output_dir, "merged")), "first"))
    return tuple(steps)


def axolotl_steps(axolotl: dict[str, Any]) -> tuple[Step, ...]:
    enabled = {"preprocess": axolotl.get("preprocess", DEFAULT_PREPROCESS), TRAIN: True,
               "merge": axolotl.get("merge", DEFAULT_MERGE)}
    extra = {TRAIN: tuple(axolotl.get("args", ()))}
    return tuple(Step(name, ("axolotl", command, AXOLOTL_CONFIG_NAME, *extra.get(name, ())),
                      "all" if name == TRAIN else "first")
                 for name, command in AXOLOTL_STEPS if enabled[name])


def attachment_fields(data: dict[str, Any]) -> list[tuple[Path_, str]]:
    """The trainer's configs given as files (its training config, and any other its record
    names), with the path each names."""
    kind = kind_of(data)
    given = data["trainer"][kind.name]
    return [(("trainer", kind.name, key), given[key])
            for key in ("config", *(key for key, _ in kind.more_configs))
            if isinstance(given.get(key), str)]


def files(data: dict[str, Any], attachments: dict[Path_, str],
          config: dict[str, Any]) -> tuple[EmbeddedFile, ...]:
    """The trainer's configs, as the job writes them into the run dir: its training config,
    then the others its record names (a file as it is, an inline mapping as YAML)."""
    kind = kind_of(data)
    given = data["trainer"][kind.name]
    return (config_file(data, attachments.get(("trainer", kind.name, "config")), config),
            *(EmbeddedFile(name, attachments[("trainer", kind.name, key)], given[key])
              if isinstance(given[key], str) else
              EmbeddedFile(name, dump_config(given[key]), f"trainer.{kind.name}.{key}")
              for key, name in kind.more_configs if key in given))


def env(data: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """What the job sets for the trainer (its record's env) and, when obc knows the ranks of
    a node and the trainer's launcher reads them, how many: trainer.<name>.nproc_per_node,
    else slurm.gpus_per_node, else the GPUs runtime.gpus lists."""
    kind = kind_of(data)
    gpus = data["runtime"].get("gpus")
    ranks = data["trainer"][kind.name].get("nproc_per_node") or \
        data.get("slurm", {}).get("gpus_per_node") or \
        (len(gpus) if isinstance(gpus, list) else None)
    return kind.env + (((kind.ranks_env, str(ranks)),) if kind.ranks_env and ranks else ())


def launcher(data: dict[str, Any]) -> Launcher | None:
    """Axolotl, TRL and LLaMA-Factory start their own ranks (torchrun is in train's command,
    or started by the trainer itself): no launcher of obc's."""
    return None


def config_file(data: dict[str, Any], text: str | None, parsed: dict[str, Any]) -> EmbeddedFile:
    """The trainer's config as the job writes it into the run dir: a config file as it is
    (`text`), an inline config as YAML that the trainer reads back to the same values; with
    checkpoint on_signal, and no setting of the user's own for it (in `parsed`, the config as
    data), the settings that turn it on."""
    kind = kind_of(data)
    config = data["trainer"][kind.name]["config"]
    body = text if isinstance(config, str) and text is not None else dump_config(config)
    origin = config if isinstance(config, str) else f"trainer.{kind.name}.config"
    adds = _signal_settings(data, kind, parsed)
    if not adds:
        return EmbeddedFile(kind.config_name, body, origin)
    return EmbeddedFile(kind.config_name, _with_settings(body, adds, kind), origin, adds)


def _signal_settings(data: dict[str, Any], kind: TrainerKind,
                     parsed: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """What obc adds to the config for checkpoint.on_signal: the trainer's switch for a
    checkpoint on TERM, or Axolotl's dynamic_checkpoint, on; nothing when the config sets
    it itself."""
    key = kind.term_checkpoint_key or "dynamic_checkpoint"
    if not on_signal(data) or key in parsed:
        return ()
    if kind.term_checkpoint_key:
        return ((key, "true"),)
    interval = data.get("checkpoint", {}).get("check_interval", DEFAULT_CHECK_INTERVAL)
    return (("dynamic_checkpoint.enabled", "true"),
            ("dynamic_checkpoint.check_interval", str(interval)))


def _with_settings(body: str, settings: tuple[tuple[str, str], ...], kind: TrainerKind) -> str:
    """The config with `settings` (`key`, or all of one block, `block.key`) added at its
    end."""
    ending = "" if body.endswith("\n") or not body else "\n"
    block, dot, _ = settings[0][0].partition(".")
    lines = [f"{block}:\n", *(f"  {key.partition('.')[2]}: {value}\n" for key, value in settings)] \
        if dot else [f"{key}: {value}\n" for key, value in settings]
    why = ("# passes TERM on to train, and transformers' Trainer saves a checkpoint at its\n"
           "# next step, before it stops.\n") if kind.term_checkpoint_key else \
        (f"# creates {TRIGGER_FILE} in output_dir and waits for the checkpoint\n"
         "# Axolotl then saves, before it stops train.\n")
    return (f"{body}{ending}\n"
            "# Added by obc (checkpoint.on_signal): when the job is told to stop, job.sh\n"
            + why + "".join(lines))


def on_signal(data: dict[str, Any]) -> bool:
    """Whether train is asked for a checkpoint on a stop signal: by a trainer that saves one
    (model/trainers.py, checkpoints_on_signal), unless the run file says no."""
    return checkpoints_on_signal(data) and \
        data.get("checkpoint", {}).get("on_signal", DEFAULT_ON_SIGNAL)


def signal_checkpoint(data: dict[str, Any], config: dict[str, Any]) -> OnSignal | None:
    """Axolotl is asked by its trigger file; a trainer that saves on TERM has it with the
    step's process group, and the grace to save."""
    if not on_signal(data):
        return None
    grace = data.get("checkpoint", {}).get("grace", DEFAULT_GRACE)
    if kind_of(data).term_checkpoint_key:
        return OnSignal(grace, None)
    ours = config.get("dynamic_checkpoint") or {}
    return OnSignal(grace, str(ours.get("trigger_file_path") or TRIGGER_FILE))


def checkpoints(data: dict[str, Any], config: dict[str, Any],
                mounts: tuple[Mount, ...] | None) -> Checkpoints | None:
    """Where train's checkpoints are: on the machine, and as Axolotl sees them (in a
    container, `mounts` map its paths to the machine's; None for a native job)."""
    resume = resume_policy(data)
    if resume == "never" and not on_signal(data):
        return None
    kind = kind_of(data)
    output_dir = posixpath.normpath(_output_dir(config, kind))
    return Checkpoints(TRAIN, output_dir, *host_place(output_dir, mounts), resume,
                       trainer_title=kind.title, resume_flag=kind.resume_flag,
                       resume_field=f"trainer.{kind.name}.resume",
                       prepared_dir=_prepared_dir(config) if kind is AXOLOTL else None)


def _output_dir(config: dict[str, Any], kind: TrainerKind) -> str:
    """Where train writes its checkpoints, as the trainer sees it."""
    return str(config.get("output_dir", kind.output_dir))


def host_place(output_dir: str, mounts: tuple[Mount, ...] | None) -> tuple[str | None, str]:
    """Where the script finds train's output_dir (normalised): (None, its path in the run dir)
    when relative, else (a folder on the machine, the rest of the way); `mounts` map a
    container's paths to the machine's (None for a native job)."""
    if not output_dir.startswith("/"):
        return None, output_dir
    if mounts is None:
        return output_dir, "."
    mapped = host_folder(output_dir, mounts)
    if mapped is None:  # the rules report it before the job is built
        raise ValueError(f"{output_dir} is in no folder the container mounts")
    return mapped


def _prepared_dir(config: dict[str, Any]) -> str | None:
    """Axolotl's prepared dataset as a path in the run dir, if it is one (a folder elsewhere
    is left alone when the job starts over: Axolotl names its parts by their inputs)."""
    path = config.get("dataset_prepared_path") or DEFAULT_PREPARED_DIR
    path = posixpath.normpath(str(path))
    return None if path.startswith(("/", "..")) or path == "." else path


def dump_config(config: dict[str, Any]) -> str:
    """Return an inline Axolotl config as YAML that Axolotl reads back to the same values."""
    # ruamel's emitter takes milliseconds, and the runs of a batch often share a config: each
    # is dumped once, named by its JSON (which tells 1, 1.0 and true apart, and keeps order).
    return _dumped(json.dumps(config))


# A few dozen configs: the memory of one batch stays flat however many runs share them.
@functools.lru_cache(maxsize=64)
def _dumped(config_json: str) -> str:
    config = json.loads(config_json)
    # Axolotl reads its config with PyYAML, which speaks YAML 1.1: written as 1.1, strings
    # such as 'yes' or 'on' come out quoted and floats keep the dot PyYAML needs (2.0e-05).
    text = _dump(config, allow_unicode=True)
    # Some characters (NEL, U+2028) are line breaks to YAML 1.1 even inside quotes; escaping
    # every non-ASCII character keeps them exact. A dump in ASCII has none of them, and would
    # be dumped the same way again: reading it back (a millisecond a job) could change nothing.
    if not text.isascii() and _load_1_1(text) != config:
        text = _dump(config, allow_unicode=False)
    return text


def _dump(config: dict[str, Any], *, allow_unicode: bool) -> str:
    yaml = YAML(typ="safe", pure=True)
    yaml.version = (1, 1)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False
    yaml.allow_unicode = allow_unicode
    yaml.width = 4096
    stream = io.StringIO()
    yaml.dump(config, stream)
    return stream.getvalue()


def _load_1_1(text: str) -> Any:
    return YAML(typ="safe", pure=True).load(text)
