"""The bill of materials of a job: what an admin approves when they approve its script.

Images and their digests, the privileges its containers get, the GPU-hours it asks for
(gpu_hours.py) and its #SBATCH lines, what it mounts and may write, its environment and
secret names, where it is expected to connect, the exact commands, the files it embeds, how it
stops, resumes and retries. Built from the normalised job alone; bill_fields.py says which row
shows each of its fields. Also the bill of a sweep's sweep.sh. `obc plan` reports them.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Literal

from ..core import shell
from ..model.gpu_hours import Compute, compute, compute_of
from ..model.job import Checkpoints, Job, OnSignal, Retry, Stage, SweepRun, stage_job
from ..model.launcher import Launcher
from ..model.notify import Notify
from ..model.runtimes import (
    CONTAINER_CACHE_DIR,
    CONTAINER_RUN_DIR,
    INVOKER,
    Container,
    Gpus,
    Mount,
    is_image_file,
    registry_host,
)
from ..model.slurm import Slurm
from ..model.trainers import AXOLOTL, TRAINER_KINDS, TRL, TrainerKind
from ..read.axolotl import ConfigError, read_config
from ..render.meaning import snake_case
from ..render.provenance import sha256
from ..render.summary import health_lines
from ..render.sweep import Sweep

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
# Run file engine options (passed whole: compiler/model/engine_args.py) that leave a container
# without a network.
NO_NETWORK = ("--network=none",)
WANDB_OFF_VALUES = ("offline", "disabled")
# What a program is given that only a program reporting to W&B needs.
WANDB_SETTINGS = ("WANDB_PROJECT", "WANDB_API_KEY", "WANDB_ENTITY")


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
class BillFile:
    """An embedded file the script writes into the run dir: its size and sha256, and the
    settings obc adds to it (the trainer's config), as `dotted.key: value`."""

    path: str
    origin: str
    bytes: int
    sha256: str
    obc_adds: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class SlurmBill:
    """The #SBATCH lines as the script carries them (slurm.extra last), and what else of the
    slurm block the script acts on."""

    directives: tuple[str, ...]
    max_restarts: int | None
    requeues_itself: bool
    # A job on several nodes: the port its rendezvous listens on, the step torchrun starts,
    # and the step that is torchrun, given the rendezvous (TRL's train).
    rendezvous_port: int | None
    torchrun_step: str | None
    torchrun_program_step: str | None = None


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
class BillStage:
    """One stage of a job on Slurm (slurm.stages): its steps, the GPUs they see, its #SBATCH
    lines and its GPU-hours."""

    name: str
    commands: tuple[Command, ...]
    gpus: str
    slurm: SlurmBill | None
    compute: Compute


@dataclass(frozen=True, slots=True)
class Bill:
    """What a job.sh does, as a reviewer approves it. Each field of the normalised job is
    shown by one of these (bill_fields.BILLED says which), or is named in
    bill_fields.NOT_REVIEWABLE with the reason."""

    job: str
    run_file: str
    runtime: str
    # A native job's: the venv whose bin/ comes first on PATH, the file it sources.
    venv: str | None
    env_file: str | None
    images: tuple[Image, ...]
    privileges: tuple[Privilege, ...]
    # The GPUs the steps see (runtime.gpus), and what Slurm allocates.
    gpus: str
    compute: Compute
    slurm: SlurmBill | None
    mounts: tuple[BillMount, ...]
    writable: tuple[str, ...]
    # The run dir may be in a folder the team shares (paths.shared).
    shared: bool
    env: tuple[tuple[str, str], ...]
    secrets: tuple[tuple[str, bool], ...]
    egress: tuple[Egress, ...]
    commands: tuple[Command, ...]
    files: tuple[BillFile, ...]
    checkpoints: Checkpoints | None
    stop_timeout: int
    on_signal: OnSignal | None
    retry: Retry | None
    # A sweep's run: its labels and what its patches changed.
    sweep: SweepRun | None
    # trainer.torchrun: what launches the script, across the nodes too.
    launcher: Launcher | None = None
    # health: what each node checks before the first step, and what a failure does.
    health: tuple[str, ...] = ()
    # On Slurm, the stages its steps run in, each a job of its own; and which of them this
    # script is (None: the whole job), with the job it is a stage of.
    stages: tuple[BillStage, ...] = ()
    stage: tuple[str, str] | None = None
    notify: Notify | None = None


@dataclass(frozen=True, slots=True)
class SweepBill:
    """What a sweep.sh does: run (or submit) its runs' job.sh files, each only if its sha256
    is the one compiled, as one job array of these #SBATCH lines, or each with its own."""

    sweep: str
    run_file: str
    runs: tuple[tuple[str, str], ...]
    submission: str
    max_parallel: int | None
    slurm: SlurmBill | None
    # Of the job array, per run (each run's own bill counts its restarts).
    compute: Compute | None


def bill_of(job: Job | Sweep) -> Bill | SweepBill:
    """Return the bill of materials of `job`, or of a sweep's own sweep.sh."""
    if isinstance(job, Sweep):
        return _sweep_bill(job)
    container, images = job.container, _images(job)
    native = job.native
    return Bill(
        job=job.id,
        run_file=job.source_file,
        runtime=_runtime(job),
        venv=native.venv if native else None,
        env_file=native.env_file if native else None,
        images=images,
        privileges=_privileges(job, container),
        gpus=_gpus(job.gpus),
        compute=compute(job),
        slurm=_slurm(job.slurm),
        mounts=_mounts(job),
        writable=_writable(job),
        shared=job.shared,
        env=job.env,
        secrets=tuple((secret.name, secret.required) for secret in job.secrets),
        egress=_egress(job, images),
        commands=_commands(job),
        files=tuple(BillFile(file.path, file.origin, len(file.content.encode()),
                             sha256(file.content.encode()), file.obc_adds)
                    for file in job.files),
        checkpoints=job.checkpoints,
        stop_timeout=job.stop_timeout,
        on_signal=job.on_signal,
        retry=job.retry,
        sweep=job.sweep,
        launcher=job.launcher,
        health=tuple(health_lines(job)),
        stages=tuple(_stage(job, stage) for stage in job.stages),
        stage=(job.stage.run, job.stage.name) if job.stage else None,
        notify=job.notify,
    )


def _stage(job: Job, stage: Stage) -> BillStage:
    as_job = stage_job(job, stage)
    return BillStage(stage.name, _commands(as_job), _gpus(stage.gpus), _slurm(stage.slurm),
                     compute(as_job))


def _commands(job: Job) -> tuple[Command, ...]:
    return tuple(Command(step.name, step.argv, shell.join_words(step.argv),
                         _where(job, step.name)) for step in job.steps)


def _gpus(gpus: Gpus) -> str:
    return gpus if isinstance(gpus, str) else ", ".join(gpus)


def _runtime(job: Job) -> str:
    if job.container is not None:
        return job.container.engine
    if job.enroot is not None:
        return f"enroot {job.enroot.enroot_version}"
    return snake_case(type(job.runtime).__name__)


def _slurm(slurm: Slurm | None) -> SlurmBill | None:
    if slurm is None:
        return None
    several = slurm.multi_node
    return SlurmBill(slurm.directives, slurm.max_restarts, slurm.requeues_itself,
                     slurm.rendezvous_port if several else None,
                     slurm.torchrun_step if several else None,
                     slurm.torchrun_program_step if several else None)


def _sweep_bill(sweep: Sweep) -> SweepBill:
    array = sweep.submission == "array"
    return SweepBill(sweep.id, sweep.source_file,
                     tuple((run.id, run.checksum) for run in sweep.runs), sweep.submission,
                     sweep.max_parallel,
                     SlurmBill(sweep.directives, None, False, None, None) if array else None,
                     compute_of(sweep.directives) if array else None)


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
              _options(container.added_options(job.gpus))),
            *(Privilege(option, "an engine option of the run file", "run file")
              for option in container.extra_args))


def _user(container: Container) -> Privilege:
    if container.as_root:
        return Privilege("", "steps run as root in the container")
    if container.runs_as_root:
        return Privilege(f"--user {container.user}",
                         f"steps run as root in the container (uid 0: {container.user})")
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
    notify = job.notify
    if notify is not None and notify.posts:
        # The script POSTs, where the job runs: the steps' network does not matter.
        found.append(Egress(notify.host, f"notify: POSTs the events {', '.join(notify.events)}"
                            " (job, step, exit code, run dir, the last lines of a failed "
                            "step's log)"))
    container = job.container
    if container is not None and set(container.extra_args) & set(NO_NETWORK):
        return tuple(found)  # the steps have no network; only the engine pulls
    configs = _trainer_configs(job)  # parsed once for both questions below
    if env.get("HF_HUB_OFFLINE", "").upper() not in HF_OFFLINE_VALUES:
        found.append(Egress("huggingface.co", "Hugging Face Hub: the models, datasets and "
                            "tokenizers the steps name", "HF_HUB_OFFLINE=1"))
    if env.get("WANDB_MODE", "") not in WANDB_OFF_VALUES and _reports_to_wandb(job, configs):
        found.append(Egress("api.wandb.ai", "Weights & Biases: the steps' metrics and logs",
                            "WANDB_MODE=offline"))
    push = _hub_push(configs)
    if push is not None:
        found.append(push)
    return tuple(found)


def _reports_to_wandb(job: Job, configs: dict[TrainerKind, dict]) -> bool:
    """Whether the steps send W&B their metrics. A trainer's config says so: Axolotl's
    wandb_project (which `--wandb-project` on its command line sets too), transformers'
    report_to naming wandb or all (TRL, LLaMA-Factory; its default is none); an environment
    variable alone does not switch either on. A job without a trainer config runs programs
    obc cannot see into: they report when the run file gives them W&B's project or key.
    `configs` are the job's trainer configs (_trainer_configs)."""
    trainer_configs = list(configs.values())
    if not trainer_configs:
        names = {*dict(job.env), *(secret.name for secret in job.secrets)}
        return bool(names & set(WANDB_SETTINGS))
    options = [_named_options(step.argv) for step in job.steps]
    return any(_says_wandb(settings) for settings in (*trainer_configs, *options))


def _says_wandb(settings: dict) -> bool:
    """Whether a trainer's settings (its config, or its command line's options) switch W&B
    on: a wandb_project, or a report_to that names wandb or all."""
    report_to = settings.get("report_to")
    named = report_to if isinstance(report_to, list) else str(report_to).replace(",", " ").split()
    return bool(settings.get("wandb_project")) or bool({"wandb", "all"} & set(map(str, named)))


def _named_options(argv: tuple[str, ...]) -> dict[str, str]:
    """A command line's `--name value` and `--name=value` options by name, `-` read as `_`
    (as the trainers' parsers do): what each may set of its config."""
    options = {}
    for word, after in zip(argv, (*argv[1:], ""), strict=True):
        if word.startswith("--"):
            name, equals, value = word[2:].partition("=")
            options[name.replace("-", "_")] = value if equals else after
    return options


def _hub_push(configs: dict[TrainerKind, dict]) -> Egress | None:
    """Where the job's trainer pushes the model, if its config says so: Axolotl when it names
    a hub_model_id; TRL with push_to_hub, to hub_model_id or the token's user's repository
    named after output_dir (transformers' default). `configs` are the job's trainer configs
    (_trainer_configs)."""
    if AXOLOTL in configs:
        hub = configs[AXOLOTL].get("hub_model_id")
        return None if hub is None else Egress(
            "huggingface.co", f"Axolotl pushes the model to the Hub repository {hub} "
            f"(hub_model_id in {AXOLOTL.config_name})")
    if TRL in configs:
        config = configs[TRL]
        if str(config.get("push_to_hub", False)).lower() not in ("true", "yes", "t", "y", "1"):
            return None
        output_dir = str(config.get("output_dir", TRL.output_dir)).rstrip("/")
        hub = config.get("hub_model_id") or f"<the token's user>/{posixpath.basename(output_dir)}"
        return Egress("huggingface.co", f"TRL pushes the model to the Hub repository {hub} "
                      f"(push_to_hub in {TRL.config_name})")
    return None


def _trainer_configs(job: Job) -> dict[TrainerKind, dict]:
    """The configs of the trainers whose config file the job embeds (where the trainer reads
    it), as data, by trainer; an unreadable one as empty."""
    configs = {}
    for file in job.files:
        kind = next((kind for kind in TRAINER_KINDS.values() if kind.config_name == file.path),
                    None)
        if kind is not None:
            try:
                configs[kind] = read_config(file.content)
            except ConfigError:
                configs[kind] = {}
    return configs


def _where(job: Job, step: str) -> str:
    if job.slurm is None or not job.slurm.multi_node:
        return ""
    return "every node" if step in job.node_steps else "first node"
