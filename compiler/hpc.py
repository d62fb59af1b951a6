"""The runtimes of shared GPU clusters, where docker and podman are rarely allowed: Apptainer
(or Singularity), and enroot through Slurm's pyxis plugin. Part of the model (model.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .model import Mount

__all__ = ["DOCKER_HUB", "Apptainer", "Enroot", "is_image_file"]


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
    cleanenv: bool = True
    contain: bool = True


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
    enroot_version: int = 3

    @property
    def pyxis_image(self) -> str:
        """The image as pyxis hands it to enroot: `REGISTRY#IMAGE[:TAG][@DIGEST]`, the
        registry left out for Docker Hub (enroot 3 cannot be told it otherwise)."""
        if self.image_is_file:
            return self.image
        first, slash, rest = self.image.partition("/")
        if slash and ("." in first or ":" in first or first == "localhost"):
            return rest if first in DOCKER_HUB else f"{first}#{rest}"
        return self.image
