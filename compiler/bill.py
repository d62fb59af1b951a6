"""The bill of materials of a job: what an admin approves when they approve its script.

Images and their digests, the privileges its containers get, the GPU-hours it asks for, what
it mounts and may write, its environment and secret names, where it is expected to connect,
and the exact commands. Built from the normalised job alone; `obc plan` reports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from . import shell
from .axolotl import ConfigError, read_config
from .meaning import snake_case
from .model import Job
from .rules import AXOLOTL_CONFIG_NAME
from .runtimes import (
    CONTAINER_CACHE_DIR,
    CONTAINER_RUN_DIR,
    INVOKER,
    Container,
    Mount,
    is_image_file,
    registry_host,
)
from .summary import added_options

# What each engine option obc adds gives the container; {} is the option's value.
OPTION_MEANINGS = {
    "--init": "a tiny init is PID 1: it passes signals on and reaps zombies",
    "--ipc=host": "the host's IPC namespace, and so its /dev/shm",
    "--shm-size": "a private /dev/shm of {}",
    "--gpus": "GPU access: {}",
    "--device": "the device {}",
    "--security-opt=label=disable": "no SELinux separation: the container may use its "
                                    "mounts whatever their labels",
    "--network=host": "the host's network: no network isolation",
    "--ulimit memlock=-1": "no limit on locked memory",
    "--ulimit stack=67108864": "a 64 MiB stack",
    "--ulimit host": "the host's resource limits",
    "--cleanenv": "nothing of the job's environment but what obc passes by name",
    "--contain": "no home, /tmp or /dev of the host (but the GPUs)",
    "--no-eval": "values passed as they are, never evaluated as shell",
    "--nv": "the host's NVIDIA driver libraries and GPU devices",
    "--no-container-mount-home": "the user's home is not mounted",
}
HF_OFFLINE_VALUES = ("1", "ON", "YES", "TRUE")
# Run file engine options (passed whole: compiler/engine_args.py) that leave a container
# without a network.
NO_NETWORK = ("--network=none",)
WANDB_OFF_VALUES = ("offline", "disabled")


@dataclass(frozen=True, slots=True)
class Image:
    reference: str
    digest: str | None
    registry: str


@dataclass(frozen=True, slots=True)
class Privilege:
    option: str
    meaning: str
    added_by: Literal["obc", "run file"] = "obc"


@dataclass(frozen=True, slots=True)
class Compute:
    """GPUs per node × nodes × time limit × runs (a job that requeues itself at the time limit
    runs up to 1 + slurm.max_restarts times); None where the run file leaves it open."""

    gpus_per_node: int | Literal["all"]
    nodes: int
    hours: float | None
    runs: int
    gpu_hours: float | None

    def text(self) -> str:
        gpus = "all GPUs" if self.gpus_per_node == "all" else _count(self.gpus_per_node, "GPU")
        hours = "no time limit" if self.hours is None else f"{self.hours:g} h"
        runs = f" × {self.runs} runs (slurm.max_restarts {self.runs - 1})" if self.runs > 1 else ""
        total = "unbounded" if self.gpu_hours is None else f"{self.gpu_hours:g} GPU-hours"
        return f"{gpus} × {_count(self.nodes, 'node')} × {hours}{runs} = {total}"


@dataclass(frozen=True, slots=True)
class BillMount:
    source: str
    target: str
    mode: Literal["rw", "ro"]


@dataclass(frozen=True, slots=True)
class Egress:
    host: str
    purpose: str
    # The env setting that turns it off, where there is one.
    off_switch: str | None = None


@dataclass(frozen=True, slots=True)
class Command:
    step: str
    argv: tuple[str, ...]
    # As the header shows it: each word shell-quoted.
    command: str
    # On a job of several nodes: every node, or the first.
    where: str = ""


@dataclass(frozen=True, slots=True)
class Bill:
    run_file: str
    runtime: str
    images: tuple[Image, ...]
    privileges: tuple[Privilege, ...]
    compute: Compute
    mounts: tuple[BillMount, ...]
    writable: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    secrets: tuple[tuple[str, bool], ...]
    egress: tuple[Egress, ...]
    commands: tuple[Command, ...]


def bill_of(job: Job) -> Bill:
    """Return the bill of materials of `job`."""
    container, images = job.container, _images(job)
    return Bill(
        run_file=job.source_file,
        runtime=container.engine if container else snake_case(type(job.runtime).__name__),
        images=images,
        privileges=_privileges(job, container),
        compute=compute(job),
        mounts=_mounts(job),
        writable=_writable(job),
        env=job.env,
        secrets=tuple((secret.name, secret.required) for secret in job.secrets),
        egress=_egress(job, images),
        commands=tuple(Command(step.name, step.argv, shell.join_words(step.argv),
                               _where(job, step.name)) for step in job.steps),
    )


def _images(job: Job) -> tuple[Image, ...]:
    """The image the job's runtime names, if it names one (a native job does not)."""
    reference = getattr(job.runtime, "image", None)
    return () if reference is None else (
        _image(reference, getattr(job.runtime, "image_sha256", None)),)


def _image(reference: str, file_sha256: str | None = None) -> Image:
    if is_image_file(reference):
        return Image(reference, file_sha256 and f"sha256:{file_sha256}", "a file")
    name, _, digest = reference.removeprefix("docker://").partition("@")
    return Image(reference, digest or None, registry_host(name) or "docker.io")


def _privileges(job: Job, container: Container | None) -> tuple[Privilege, ...]:
    if job.native is not None:
        return (Privilege("", "steps run on the machine as the user who starts the job, with "
                              "all of that user's access (no container)"),)
    if job.apptainer is not None or job.enroot is not None:
        options = job.apptainer_args or job.enroot_args
        return (Privilege("", "steps run as the user who starts the job"),
                *(Privilege(option, _meaning(option)) for option in options
                  if option in OPTION_MEANINGS))
    if container is None:  # a runtime this report does not know yet: the header says more
        return (Privilege("", "see the runtime lines of the script's header"),)
    return (_user(container),
            *(Privilege(option, _meaning(option)) for option in
              _options(added_options(job, container))),
            *(Privilege(option, "an engine option of the run file", "run file")
              for option in container.extra_args))


def _user(container: Container) -> Privilege:
    if container.as_root:
        return Privilege("", "steps run as root in the container")
    if container.user != INVOKER:
        return Privilege(f"--user {container.user}", f"steps run as {container.user}")
    if container.engine == "podman":
        return Privilege("--userns=keep-id", "steps run as the user who starts the job "
                                             "(rootless podman)")
    return Privilege('--user "$(id -u):$(id -g)"', "steps run as the user who starts the job")


def _options(words: list[str]) -> list[str]:
    """Group engine options with their values: `--ulimit memlock=-1` is one option."""
    options: list[str] = []
    for word in words:
        if options and not word.startswith("-") and options[-1].startswith("--") \
                and "=" not in options[-1] and " " not in options[-1]:
            options[-1] += f" {word}"
        else:
            options.append(word)
    return options


def _meaning(option: str) -> str:
    if option in OPTION_MEANINGS:
        return OPTION_MEANINGS[option]
    name, _, value = option.partition(" ")
    return OPTION_MEANINGS.get(name, "").format(value)


def compute(job: Job) -> Compute:
    """Return the GPUs, nodes and time limit the job asks for, and their product."""
    slurm = job.slurm
    gpus: int | Literal["all"]
    if slurm is not None and slurm.gpus_per_node is not None:
        gpus = slurm.gpus_per_node
    else:
        gpus = 0 if job.gpus == "none" else "all" if job.gpus == "all" else len(job.gpus)
    nodes = slurm.nodes if slurm is not None else 1
    hours = time_limit_hours(slurm.time) if slurm is not None and slurm.time else None
    runs = 1 + (slurm.max_restarts or 0) if slurm is not None else 1
    known = isinstance(gpus, int) and (hours is not None or gpus == 0)
    return Compute(gpus, nodes, hours, runs,
                   round(gpus * nodes * (hours or 0) * runs, 4) if known else None)


def time_limit_hours(time: str) -> float | None:
    """Return a Slurm time limit (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in
    hours; None for UNLIMITED or INFINITE."""
    if not time[0].isdigit():
        return None
    days, _, clock = time.rpartition("-")
    parts = [int(part) for part in clock.split(":")]
    if days:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = [*parts, 0, 0][:3]
        hours += int(days) * 24
    else:  # MM, MM:SS or HH:MM:SS
        hours, minutes, seconds = [0, *parts, 0][:3] if len(parts) < 3 else parts
    return round(hours + minutes / 60 + seconds / 3600, 4)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _runtime_mounts(job: Job) -> tuple[Mount, ...] | None:
    """The run file's mounts of a runtime with containers (any variant that has them)."""
    mounts = getattr(job.runtime, "mounts", None)
    return mounts if isinstance(mounts, tuple) else None


def _mounts(job: Job) -> tuple[BillMount, ...]:
    mounts = _runtime_mounts(job)
    if mounts is None:
        return ()
    own = [BillMount(job.run_dir, CONTAINER_RUN_DIR, "rw")]
    own += [BillMount(job.cache_dir, CONTAINER_CACHE_DIR, "rw")] if job.cache_dir else []
    return (*own, *(BillMount(m.source, m.target, "ro" if m.readonly else "rw")
                    for m in mounts))


def _writable(job: Job) -> tuple[str, ...]:
    if _runtime_mounts(job) is not None:
        return tuple(mount.source for mount in _mounts(job) if mount.mode == "rw")
    paths = (job.run_dir, job.cache_dir or "Hugging Face's default cache")
    if job.native is None:
        return paths
    return (*paths, "anything else the user who starts the job may write")


def _egress(job: Job, images: tuple[Image, ...]) -> tuple[Egress, ...]:
    env = dict(job.env)
    found = [Egress(image.registry, f"pulls the image {image.reference} if the machine lacks "
                    "it") for image in images if not is_image_file(image.reference)]
    container = job.container
    if container is not None and set(container.extra_args) & set(NO_NETWORK):
        return tuple(found)  # the steps have no network; only the engine pulls
    if env.get("HF_HUB_OFFLINE", "").upper() not in HF_OFFLINE_VALUES:
        found.append(Egress("huggingface.co", "Hugging Face Hub: the models, datasets and "
                            "tokenizers the steps name", "HF_HUB_OFFLINE=1"))
    if env.get("WANDB_MODE", "") not in WANDB_OFF_VALUES:
        found.append(Egress("api.wandb.ai", "Weights & Biases: metrics and logs, where the "
                            "steps report there", "WANDB_MODE=offline"))
    hub = _hub_model_id(job)
    if hub is not None:
        found.append(Egress("huggingface.co", f"Axolotl pushes the model to the Hub "
                            f"repository {hub} (hub_model_id in {AXOLOTL_CONFIG_NAME})"))
    return tuple(found)


def _hub_model_id(job: Job) -> str | None:
    """The Hub repository the job's Axolotl config pushes the model to, if it names one."""
    if not any(step.argv[0] == "axolotl" for step in job.steps):
        return None
    for file in job.files:
        if file.path == AXOLOTL_CONFIG_NAME:
            try:
                hub = read_config(file.content).get("hub_model_id")
            except ConfigError:
                return None
            return None if hub is None else str(hub)
    return None


def _where(job: Job, step: str) -> str:
    if job.slurm is None or not job.slurm.multi_node:
        return ""
    return "every node" if step in job.node_steps else "first node"
