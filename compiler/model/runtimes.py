"""The runtimes a job's steps run in: one variant of the model (job.py) each, rendered by a
template partial of the same name. Docker and podman (Container) and the machine itself with
an optional venv (Native); and those of shared GPU clusters, where docker and podman are
rarely allowed: Apptainer (or Singularity), and enroot through Slurm's pyxis plugin."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from .defaults import (
    DEFAULT_CLEANENV,
    DEFAULT_CONTAIN,
    DEFAULT_ENROOT_VERSION,
    DEFAULT_READONLY,
    DEFAULT_USER,
)

__all__ = [
    "CONTAINER_CACHE_DIR", "CONTAINER_HOME", "CONTAINER_RUN_DIR", "DOCKER_HUB", "INVOKER",
    "DIGEST", "ROOT", "Apptainer", "Container", "Enroot", "Gpus", "Mount", "Native", "host_folder",
    "is_image_file", "registry_host",
]

CONTAINER_RUN_DIR = "/workspace/run"
CONTAINER_CACHE_DIR = "/workspace/hf-cache"
# A container that does not run as root gets a HOME it can write, inside the run dir.
CONTAINER_HOME = f"{CONTAINER_RUN_DIR}/.obc/home"


@dataclass(frozen=True, slots=True)
class Mount:
    """An extra bind mount into the container."""

    source: str
    target: str
    readonly: bool


def mounts_of(runtime: dict[str, Any]) -> tuple[Mount, ...]:
    """The extra mounts of a run file's runtime block (read-only only when it says so)."""
    return tuple(Mount(m["source"], m["target"], m.get("readonly", DEFAULT_READONLY))
                 for m in runtime.get("mounts", ()))


def host_folder(path: str, mounts: Iterable[Mount]) -> tuple[str | None, str] | None:
    """Map an absolute path in the container, normalised first (/workspace/run/../x is not in
    the run dir), to the machine's folder it is in (None for the run dir, else a mount's
    source) and the rest of the path; None if no folder the container mounts holds it."""
    path = posixpath.normpath(path)
    for target, source in ((CONTAINER_RUN_DIR, None),
                           *((m.target.rstrip("/"), m.source) for m in mounts)):
        if target and (path == target or path.startswith(target + "/")):
            return source, posixpath.relpath(path, target)
    return None


# The GPUs a job's steps see: all, none, or these ids.
Gpus = Literal["all", "none"] | tuple[str, ...]

# Who a container's steps run as: the user who starts the job (its uid and gid), root, or
# an explicit "uid:gid".
User = str
INVOKER, ROOT = "invoker", "root"


@dataclass(frozen=True, slots=True)
class Container:
    """Steps run with `engine run`, one container per step."""

    engine: Literal["docker", "podman"]
    image: str
    shm_size: str | None
    mounts: tuple[Mount, ...]
    # The run file's engine options, each a whole option in one word (engine_args.py): the
    # script passes these, and its header and the bill show them.
    extra_args: tuple[str, ...]
    user: User = DEFAULT_USER
    # A job on several nodes shares the hosts' network: the rendezvous and NCCL need the
    # nodes' own addresses.
    host_network: bool = False

    @property
    def host_ipc(self) -> bool:
        """Whether the container shares the host's IPC namespace (and so its /dev/shm): the
        default, which NCCL and data loaders want; a `shm_size` asks for a private /dev/shm of
        that size instead (podman refuses the two together, docker ignores the size)."""
        return self.shm_size is None

    @property
    def as_root(self) -> bool:
        """Whether the steps run as the image's root: no --user at all."""
        return self.user == ROOT

    @property
    def as_invoker(self) -> bool:
        """Whether the steps run as the user who starts the job, with a HOME in the run dir."""
        return self.user == INVOKER

    @property
    def keeps_invoker_id(self) -> bool:
        """Whether the steps run as the invoker through podman's `--userns=keep-id` (rootless
        podman maps the user to root in the container), not `--user UID:GID`."""
        return self.as_invoker and self.engine == "podman"

    @property
    def run_dir_relabel(self) -> str:
        """What podman adds to the run dir's volume so that SELinux lets this container alone
        use it (`:Z`); docker adds nothing."""
        return ":Z" if self.engine == "podman" else ""

    @property
    def cache_relabel(self) -> str:
        """What podman adds to the cache's volume, which containers share (`:z`)."""
        return ":z" if self.engine == "podman" else ""

    def added_options(self, gpus: Gpus) -> list[str]:
        """The engine options obc adds to every container of a job with `gpus`, besides the
        user, volumes and environment (what the summary and the bill show)."""
        added = ["--init", *self.gpu_args(gpus)]
        added += ["--ipc=host"] if self.host_ipc else ["--shm-size", self.shm_size or ""]
        return added + (["--network=host"] if self.host_network else [])

    def gpu_args(self, gpus: Gpus) -> tuple[str, ...]:
        """The engine options that give the container `gpus`: docker's --gpus, podman's CDI
        devices (with SELinux labels off, which the devices need)."""
        if self.engine == "docker":
            if gpus == "none":
                return ()
            device = "all" if gpus == "all" else '"device=' + ",".join(gpus) + '"'
            return ("--gpus", device, "--ulimit", "memlock=-1", "--ulimit", "stack=67108864")
        label = ("--security-opt=label=disable",)
        if gpus == "none":
            return label
        ids = ("all",) if gpus == "all" else gpus
        devices = tuple(arg for i in ids for arg in ("--device", f"nvidia.com/gpu={i}"))
        return (*devices, *label, "--ulimit", "host")

    @property
    def runs_as_root(self) -> bool:
        """Whether the steps run as root, named or as uid 0 in any spelling (`0`, `00:00`,
        `0:1000`): what a reviewer must be told, whatever the run file wrote."""
        uid = self.user.partition(":")[0]
        return self.as_root or uid.isdigit() and int(uid) == 0


@dataclass(frozen=True, slots=True)
class Native:
    """Steps run on the machine, their programs found on PATH with `venv/bin` first."""

    venv: str | None
    env_file: str | None

    @property
    def runs_from_paths(self) -> bool:
        """Whether the job runs code from paths the run file names (the venv, the env file),
        which preflight checks that no other user could change."""
        return bool(self.venv or self.env_file)


def is_image_file(image: str) -> bool:
    """Whether an image is a file on the machine that runs the job (a SIF or squashfs path,
    `~` and `${NAME}` expanded there) rather than a registry's image."""
    return image.startswith(("/", "~", "${"))


class _ImageFile:
    """What apptainer and enroot share: an image that may be a file where the job runs."""

    __slots__ = ()
    image: str

    @property
    def image_is_file(self) -> bool:
        return is_image_file(self.image)


@dataclass(frozen=True, slots=True)
class Apptainer(_ImageFile):
    """Steps run with `apptainer exec` (`singularity exec` where only that is installed),
    one container per step; `image` is a SIF file or `docker://NAME@sha256:...`."""

    image: str
    image_sha256: str | None
    mounts: tuple[Mount, ...]
    # --cleanenv: nothing of the job's environment but what obc passes by name; --contain:
    # no home, /tmp or /dev of the host. Both on by default; a site may need them off.
    cleanenv: bool = DEFAULT_CLEANENV
    contain: bool = DEFAULT_CONTAIN

    def exec_args(self, gpus: Gpus) -> tuple[str, ...]:
        """The options obc gives `apptainer exec` besides binds, home and working dir:
        --no-eval always, so that apptainer passes values as they are."""
        return ((("--cleanenv",) if self.cleanenv else ())
                + (("--contain",) if self.contain else ())
                + ("--no-eval",) + (("--nv",) if gpus != "none" else ()))


# An image's digest, as registries, obc.lock and `NAME@DIGEST` write it.
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def registry_host(name: str) -> str | None:
    """The registry an image name in docker's grammar names before its first `/`
    (`ghcr.io`, `localhost:5000`), or None for Docker Hub's (`ubuntu`, `team/trainer`)."""
    first, slash, _ = name.partition("/")
    return first if slash and ("." in first or ":" in first or first == "localhost") else None


# The first enroot that reads an image's digest.
ENROOT_DIGESTS = 4
# Docker Hub's names, which enroot 3 reaches only without a registry part.
DOCKER_HUB = ("docker.io", "index.docker.io", "registry-1.docker.io")


@dataclass(frozen=True, slots=True)
class Enroot(_ImageFile):
    """Steps run as srun tasks in containers that pyxis makes with enroot; `image` is a
    squashfs file or a registry's image (docker's grammar, as the run file writes it)."""

    image: str
    image_sha256: str | None
    mounts: tuple[Mount, ...]
    # enroot before 4.0 reads REGISTRY#IMAGE:TAG only, without a digest.
    enroot_version: int = DEFAULT_ENROOT_VERSION

    def srun_args(self, names: Iterable[str]) -> tuple[str, ...]:
        """The options obc gives each srun step besides image and mounts: the working dir, no
        home, and every name the job sets (`names`), which the image and enroot's hooks would
        otherwise replace."""
        return (f"--container-workdir={CONTAINER_RUN_DIR}", "--no-container-mount-home",
                "--container-env=" + ",".join(names))

    @property
    def takes_digest(self) -> bool:
        return self.enroot_version >= ENROOT_DIGESTS

    @property
    def pyxis_image(self) -> str:
        """The image as pyxis hands it to enroot: `REGISTRY#IMAGE[:TAG][@DIGEST]`, the
        registry left out for Docker Hub (enroot 3 cannot be told it otherwise)."""
        host = None if self.image_is_file else registry_host(self.image)
        if host is None:
            return self.image
        rest = self.image.partition("/")[2]
        return rest if host in DOCKER_HUB else f"{host}#{rest}"
