"""Stage 3, normalise: valid run-file data (+ the files it names) → a `Job`, defaults applied.

The defaults it applies live in model/defaults.py. The input has passed validation, so the
data has the shape the schema promises; nothing here reports problems.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from ..model.defaults import (
    DEFAULT_CACHE_DIR,
    DEFAULT_CLEANENV,
    DEFAULT_CONTAIN,
    DEFAULT_ENROOT_VERSION,
    DEFAULT_GPUS,
    DEFAULT_HEALTH_ON_FAILURE,
    DEFAULT_HEALTH_TIMEOUT,
    DEFAULT_IMAGE,
    DEFAULT_RENDEZVOUS_PORT,
    DEFAULT_REQUEUE,
    DEFAULT_RUN_DIR,
    DEFAULT_SECRET_REQUIRED,
    DEFAULT_SHARED,
    DEFAULT_SLURM_NODES,
    DEFAULT_SLURM_OUTPUT,
    DEFAULT_STOP_TIMEOUT,
    DEFAULT_USER,
)
from ..model.engine_args import normal_words
from ..model.job import (
    EmbeddedFile,
    Health,
    Job,
    OnSignal,
    Retry,
    Secret,
    Step,
    SweepRun,
    expected_gpus,
)
from ..model.launcher import SHUTDOWN_TIMEOUT
from ..model.notify import EVENTS, Notify
from ..model.runtimes import (
    ENROOT_DIGESTS,
    Apptainer,
    Container,
    Enroot,
    Gpus,
    Native,
    mounts_of,
)
from ..model.slurm import Slurm, default_signal
from ..model.trainers import AXOLOTL, TRL, config_field, trainer_kind
from ..read.axolotl import read_config
from ..read.load import Path_
from . import torchrun, trainer
from .stages import stages

# A trainer sends no telemetry, and a resumed run continues its W&B run (model/trainers.py).
NO_TELEMETRY = AXOLOTL.no_telemetry
# Each trainer's part of the job, by its record's name (model/trainers.py): a module with
# attachment_fields, steps, files, checkpoints, signal_checkpoint and launcher, each given
# the trainer's config as data (None for a trainer without one).
TRAINER_PARTS: dict[str, ModuleType] = {
    "axolotl": trainer, "trl": trainer, "llamafactory": trainer, "torchrun": torchrun}
# Slurm: the log in the directory sbatch runs in (an #SBATCH line cannot say $HOME, and the
# run dir may not exist before the job creates it).
WANDB_GROUP = "WANDB_RUN_GROUP"


def attachment_fields(data: dict[str, Any]) -> list[tuple[Path_, str]]:
    """Return the fields that name files to embed, with the path each names."""
    part = _trainer_part(data)
    fields = [] if part is None else part.attachment_fields(data)
    fields += [(("files", name), source) for name, source in data.get("files", {}).items()]
    return fields


def normalise(  # noqa: PLR0913 -- a sweep's run is optional, and given by name
        source_file: str, data: dict[str, Any], attachments: dict[Path_, str],
        digests: Mapping[str, str], obc_version: str, *, sweep: SweepRun | None = None) -> Job:
    """Return the job a valid run file describes; `attachments` holds the files it names,
    `digests` the image lock (tag → digest, from obc.lock), `sweep` its place in a sweep."""
    runtime = data["runtime"]
    kind = runtime["kind"]
    job_id = data["id"]
    paths = data.get("paths", {})
    cache_default = None if kind == "native" else DEFAULT_CACHE_DIR
    slurm = _slurm(data["slurm"], job_id, data, "retry" in data) \
        if "slurm" in data else None
    multi_node = slurm is not None and slurm.multi_node
    runtime_model = _runtime(runtime, digests, multi_node=multi_node)
    config = _trainer_config(data, attachments)
    mounts = None if kind == "native" else runtime_model.mounts
    part = _trainer_part(data)
    gpus = _gpus(runtime.get("gpus", DEFAULT_GPUS))
    steps = _steps(data, part, config, multi_node=multi_node)
    stop_timeout = runtime.get("stop_timeout", DEFAULT_STOP_TIMEOUT)
    on_signal = None if part is None else part.signal_checkpoint(data, config)
    return Job(
        id=job_id,
        source_file=source_file,
        obc_version=obc_version,
        description=data.get("description"),
        runtime=runtime_model,
        gpus=gpus,
        run_dir=paths.get("run_dir", DEFAULT_RUN_DIR.format(id=job_id)),
        cache_dir=paths.get("cache_dir", cache_default),
        shared=paths.get("shared", DEFAULT_SHARED),
        steps=steps,
        files=_files(data, attachments, sweep, part, config),
        env=_env(data, sweep, _launcher_env(on_signal, stop_timeout)),
        secrets=tuple(_secret(item) for item in data.get("secrets", ())),
        stop_timeout=stop_timeout,
        slurm=slurm,
        checkpoints=None if part is None else part.checkpoints(data, config, mounts),
        on_signal=on_signal,
        retry=_retry(data.get("retry")),
        sweep=sweep,
        launcher=None if part is None else part.launcher(data),
        health=_health(data.get("health"), slurm, gpus),
        stages=stages(data["slurm"]["stages"], steps, slurm, gpus)
        if slurm is not None and "stages" in data["slurm"] else (),
        notify=_notify(data.get("notify")),
    )


def _trainer_part(data: dict[str, Any]) -> ModuleType | None:
    """The module that makes the run file's trainer part of the job, if it names one with a
    record."""
    kind = trainer_kind(data)
    return None if kind is None else TRAINER_PARTS[kind.name]


def _trainer_config(data: dict[str, Any], attachments: dict[Path_, str]) -> \
        dict[str, Any] | None:
    """The trainer's config as data (Axolotl's, TRL's, LLaMA-Factory's): what a config file
    holds, or the inline mapping; None for a trainer without one."""
    field = config_field(data)
    if field is None:
        return None
    config = data["trainer"][field[1]]["config"]
    return read_config(attachments[field]) if isinstance(config, str) else config


def _retry(retry: dict[str, Any] | None) -> Retry | None:
    if retry is None:
        return None
    return Retry(tuple(retry.get("on_exit_codes", ())), retry["max"])


def _notify(notify: dict[str, Any] | None) -> Notify | None:
    if notify is None:
        return None
    url = notify.get("url")
    events = tuple(event for event in EVENTS if event in notify["on"])
    if isinstance(url, dict):
        return Notify(events, url_secret=url["secret"])
    return Notify(events, tuple(notify.get("command", ())), url)


def _health(health: dict[str, Any] | None, slurm: Slurm | None, gpus: Gpus) -> Health | None:
    """The health check, expecting the GPUs the job asked for."""
    if health is None:
        return None
    return Health(expected_gpus(slurm, gpus), health.get("timeout", DEFAULT_HEALTH_TIMEOUT),
                  health.get("on_failure", DEFAULT_HEALTH_ON_FAILURE) == "requeue")


def _runtime(runtime: dict[str, Any], digests: Mapping[str, str], *,
             multi_node: bool) -> Container | Native | Apptainer | Enroot:
    kind = runtime["kind"]
    if kind == "native":
        return Native(venv=runtime.get("venv"), env_file=runtime.get("env_file"))
    mounts = mounts_of(runtime)
    if kind == "apptainer":
        return Apptainer(image=runtime["image"], image_sha256=runtime.get("image_sha256"),
                         mounts=mounts, cleanenv=runtime.get("cleanenv", DEFAULT_CLEANENV),
                         contain=runtime.get("contain", DEFAULT_CONTAIN))
    if kind == "enroot":
        version = runtime.get("enroot_version", DEFAULT_ENROOT_VERSION)
        image = runtime["image"]
        return Enroot(image=_locked(image, digests) if version >= ENROOT_DIGESTS else image,
                      image_sha256=runtime.get("image_sha256"), mounts=mounts,
                      enroot_version=version)
    return Container(
        engine=kind,
        image=_locked(runtime.get("image", DEFAULT_IMAGE), digests),
        shm_size=runtime.get("shm_size"),
        mounts=mounts,
        extra_args=normal_words(kind, runtime.get("extra_args", ())),
        user=str(runtime.get("user", DEFAULT_USER)),
        host_network=multi_node,
    )


def _locked(image: str, digests: Mapping[str, str]) -> str:
    """A locked tag keeps its name for the reader and gains the digest the engine pulls."""
    return f"{image}@{digests[image]}" if image in digests else image


def _gpus(gpus: str | list[int | str]) -> str | tuple[str, ...]:
    return gpus if isinstance(gpus, str) else tuple(str(device) for device in gpus)


def _steps(data: dict[str, Any], part: ModuleType | None, config: dict[str, Any] | None, *,
           multi_node: bool) -> tuple[Step, ...]:
    """The trainer's steps, then the explicit ones; only train runs on every node unless a
    step says otherwise."""
    first = part.steps(data, config, multi_node=multi_node) if part is not None else ()
    return first + tuple(
        Step(step["name"], tuple(step["run"]),
             step.get("nodes", "all" if step["name"] == "train" else "first"))
        for step in data.get("steps", ()))


def _slurm(slurm: dict[str, Any], job_id: str, data: dict[str, Any], retry: bool) -> Slurm:
    time = slurm.get("time")
    kind = trainer_kind(data)
    return Slurm(
        job_name=slurm.get("job_name", job_id),
        output=slurm.get("output", DEFAULT_SLURM_OUTPUT),
        signal=slurm.get("signal", default_signal(slurm)),
        requeue=slurm.get("requeue", DEFAULT_REQUEUE),
        nodes=slurm.get("nodes", DEFAULT_SLURM_NODES),
        gpus_per_node=slurm.get("gpus_per_node"),
        cpus_per_task=slurm.get("cpus_per_task"),
        partition=slurm.get("partition"),
        account=slurm.get("account"),
        qos=slurm.get("qos"),
        time=None if time is None else str(time),
        mem=slurm.get("mem"),
        constraint=slurm.get("constraint"),
        rendezvous_port=slurm.get("rendezvous_port", DEFAULT_RENDEZVOUS_PORT),
        extra=tuple(slurm.get("extra", ())),
        max_restarts=slurm.get("max_restarts"),
        requeues_itself="max_restarts" in slurm or retry,
        # Axolotl's train is launched across the nodes by torchrun (a script's, by its launcher:
        # the job's launcher); TRL's train is torchrun itself.
        torchrun_step=trainer.TRAIN if kind is AXOLOTL else None,
        torchrun_program_step=trainer.TRAIN if kind is TRL else None,
    )


def _files(data: dict[str, Any], attachments: dict[Path_, str], sweep: SweepRun | None,
           part: ModuleType | None, config: dict[str, Any] | None) -> tuple[EmbeddedFile, ...]:
    files = [] if part is None else list(part.files(data, attachments, config))
    if sweep is not None and sweep.config_file is not None:  # the trainer's config, patched
        files = [dataclasses.replace(file, origin=f"{sweep.config_file}, patched")
                 if file.path == trainer.kind_of(data).config_name else file for file in files]
    for name, source in data.get("files", {}).items():
        files.append(EmbeddedFile(name, attachments[("files", name)], source))
    return tuple(files)


def _env(data: dict[str, Any], sweep: SweepRun | None,
         launcher_env: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    env = {name: str(value["value"] if isinstance(value, dict) else value)
           for name, value in data.get("env", {}).items()}
    part = _trainer_part(data)
    defaults = part.env(data) if part is not None else \
        NO_TELEMETRY if any(_runs_axolotl(step) for step in data.get("steps", ())) else ()
    defaults += launcher_env
    secrets = {_secret(item).name for item in data.get("secrets", ())}
    if sweep is not None and WANDB_GROUP not in secrets:
        # The runs of a sweep are one group in W&B (docs/sweeps.md).
        defaults += ((WANDB_GROUP, sweep.sweep),)
    return tuple((name, value) for name, value in defaults if name not in env) + tuple(
        env.items())


def _launcher_env(on_signal: OnSignal | None, stop_timeout: int) -> tuple[tuple[str, str], ...]:
    """What torch's elastic launcher (torchrun; accelerate's and llamafactory-cli's, which
    start it) is told when train saves on TERM itself: to wait for its ranks as long as the
    job does (the stop timeout and the grace) before it kills them, where it would wait 30 s
    (TORCH_ELASTIC_SHUTDOWN_TIMEOUT, torch/distributed/launcher/api.py)."""
    if on_signal is None or on_signal.trigger:
        return ()
    return ((SHUTDOWN_TIMEOUT, str(stop_timeout + on_signal.grace)),)


def _runs_axolotl(step: dict[str, Any]) -> bool:
    return step["run"][0].rpartition("/")[2] == "axolotl"


def _secret(item: str | dict[str, Any]) -> Secret:
    if isinstance(item, str):
        return Secret(item, required=True)
    return Secret(item["name"], required=item.get("required", DEFAULT_SECRET_REQUIRED))
