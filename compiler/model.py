"""The normalised job: plain, frozen, typed data with every default applied.

normalise.py builds it from a valid run file; render.py turns it into a script. Anything a
template would otherwise have to work out from several fields is a property here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DEFAULT_IMAGE = (
    "axolotlai/axolotl:0.19.0-py3.12-cu130-2.12.1"
    "@sha256:9de7c7a5b8830480a7d2eb3b6d49759586615f5f8eb1126d5df29f8bd9fa324b"
)
CONTAINER_RUN_DIR = "/workspace/run"
CONTAINER_CACHE_DIR = "/workspace/hf-cache"

Gpus = Literal["all", "none"] | tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Step:
    """One program run in the run dir; `argv[0]` is the program as the run file names it."""

    name: str
    argv: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class EmbeddedFile:
    """A text file the script writes into the run dir; `origin` says where it came from."""

    path: str
    content: str
    origin: str

    @property
    def ends_with_newline(self) -> bool:
        return self.content.endswith("\n")


@dataclass(frozen=True, slots=True)
class Secret:
    """An environment variable passed by name; a required one must be set and not empty."""

    name: str
    required: bool


@dataclass(frozen=True, slots=True)
class Mount:
    """An extra bind mount into the container."""

    source: str
    target: str
    readonly: bool


@dataclass(frozen=True, slots=True)
class Container:
    """Steps run with `engine run`, one container per step."""

    engine: Literal["docker", "podman"]
    image: str
    shm_size: str | None
    mounts: tuple[Mount, ...]
    extra_args: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Native:
    """Steps run on the machine, their programs from `venv/bin/` or from PATH."""

    venv: str | None
    env_file: str | None

    def program(self, name: str) -> str:
        """Return where a step's program is: in the venv unless the name is a path."""
        if self.venv is None or "/" in name:
            return name
        return f"{self.venv.rstrip('/')}/bin/{name}"



# The variables a multi-node job exports to every step (README, "Running on Slurm").
RENDEZVOUS_NAMES = ("MASTER_ADDR", "MASTER_PORT", "NNODES", "NODE_RANK", "GPUS_PER_NODE")


@dataclass(frozen=True, slots=True)
class Slurm:
    """How the script asks Slurm for its resources; None fields are left to the site."""

    job_name: str
    output: str
    signal: str
    requeue: bool
    nodes: int
    gpus_per_node: int | None
    cpus_per_task: int | None
    partition: str | None
    account: str | None
    qos: str | None
    time: str | None
    mem: str | None
    constraint: str | None
    rendezvous_port: int
    extra: tuple[str, ...]
    # With nodes > 1: the steps srun starts on every node (the others run once, here), and
    # the one launched with torchrun across the nodes (Axolotl's train), if any.
    node_steps: tuple[str, ...]
    torchrun_step: str | None

    @property
    def multi_node(self) -> bool:
        return self.nodes > 1

    @property
    def directives(self) -> tuple[str, ...]:
        """The sbatch options, in a fixed order: what the job is, where it runs, what it gets,
        how it ends; then the run file's own extras."""
        options = [("job-name", self.job_name), ("output", self.output),
                   ("partition", self.partition), ("account", self.account),
                   ("qos", self.qos), ("time", self.time), ("nodes", str(self.nodes)),
                   ("ntasks-per-node", "1"),
                   ("gpus-per-node", _optional(self.gpus_per_node)),
                   ("cpus-per-task", _optional(self.cpus_per_task)), ("mem", self.mem),
                   ("constraint", self.constraint), ("signal", self.signal)]
        lines = [f"--{name}={value}" for name, value in options if value is not None]
        # A requeued job appends to its log rather than starting it again.
        lines += ["--requeue", "--open-mode=append"] if self.requeue else ["--no-requeue"]
        return (*lines, *self.extra)


def _optional(number: int | None) -> str | None:
    return None if number is None else str(number)


def lookup(program: str) -> Literal["path", "absolute", "run_dir"]:
    """How the shell finds `program`: on PATH, at an absolute (or ~/) path, or in the run dir."""
    if "/" not in program:
        return "path"
    return "absolute" if program.startswith(("/", "~")) else "run_dir"


@dataclass(frozen=True, slots=True)
class Job:
    """Everything the script needs, defaults applied; paths as written (`~` not expanded)."""

    id: str
    source_file: str
    description: str | None
    runtime: Container | Native
    gpus: Gpus
    run_dir: str
    # None for a native job that sets no cache dir: Hugging Face then uses its own default.
    cache_dir: str | None
    steps: tuple[Step, ...]
    files: tuple[EmbeddedFile, ...]
    env: tuple[tuple[str, str], ...]
    secrets: tuple[Secret, ...]
    slurm: Slurm | None = None

    @property
    def container(self) -> Container | None:
        return self.runtime if isinstance(self.runtime, Container) else None

    @property
    def native(self) -> Native | None:
        return self.runtime if isinstance(self.runtime, Native) else None

    @property
    def programs(self) -> tuple[str, ...]:
        """The distinct programs a native job runs, where it finds them, in step order."""
        if self.native is None:
            return ()
        return tuple(dict.fromkeys(self.native.program(step.argv[0]) for step in self.steps))

    @property
    def container_name(self) -> str:
        return f"overbrainer-{self.id}"

    @property
    def gpu_args(self) -> tuple[str, ...]:
        """The engine options that give the container its GPUs (SPEC §4.3)."""
        if self.container is None:
            return ()
        if self.container.engine == "docker":
            if self.gpus == "none":
                return ()
            device = "all" if self.gpus == "all" else '"device=' + ",".join(self.gpus) + '"'
            return ("--gpus", device, "--ulimit", "memlock=-1", "--ulimit", "stack=67108864")
        label = ("--security-opt=label=disable",)
        if self.gpus == "none":
            return label
        ids = ("all",) if self.gpus == "all" else self.gpus
        devices = tuple(arg for i in ids for arg in ("--device", f"nvidia.com/gpu={i}"))
        return (*devices, *label, "--ulimit", "host")

    @property
    def cuda_visible_devices(self) -> str | None:
        """What a native job sets CUDA_VISIBLE_DEVICES to, or None to leave it alone."""
        if self.gpus == "all":
            return None
        return "" if self.gpus == "none" else ",".join(self.gpus)

    @property
    def slurm_names(self) -> tuple[str, ...]:
        """The variables Slurm or the script set that a container must be given by name: the
        GPUs Slurm picked, and in a multi-node job the rendezvous."""
        if self.slurm is None:
            return ()
        gpus = ("CUDA_VISIBLE_DEVICES",) if self.slurm.gpus_per_node else ()
        return gpus + (RENDEZVOUS_NAMES if self.slurm.multi_node else ())
