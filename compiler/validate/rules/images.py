"""`runtime.image`: the forms each runtime reads. docker and podman take a registry's image;
apptainer a SIF file or `docker://NAME@sha256:...`; enroot a squashfs file or a registry's
image, with a digest only from enroot 4 on."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import Any, NamedTuple

from ...core.diagnostics import show
from ...core.resources import run_schema
from ...model.runtimes import ENROOT_DIGESTS, is_image_file
from ...model.trainers import trainer_kind
from .common import Problem, get

_IMAGE = ("runtime", "image")
_FILE_KIND = {"apptainer": "a SIF", "enroot": "a squashfs"}
DOCKER_SCHEME = "docker://"


class Reference(NamedTuple):
    """A registry's image in docker's grammar, in its parts: NAME[:TAG][@DIGEST]."""

    name: str
    tag: str | None
    digest: str | None


def parse_reference(image: str) -> Reference:
    """Split an image the schema has accepted (a registry's port is not a tag)."""
    rest, at, digest = image.partition("@")
    head, slash, last = rest.rpartition("/")
    last, colon, tag = last.partition(":")
    return Reference(head + slash + last, tag if colon else None, digest if at else None)


def check(data: dict, kind: Any) -> Iterator[Problem]:
    runtime = get(data, "runtime")
    if not isinstance(runtime, dict):
        return
    image = runtime.get("image")
    if kind in _FILE_KIND and "image" not in runtime:
        yield Problem(_IMAGE, f"an {kind} job needs an "
                      f"image: the path of {_FILE_KIND[kind]} file, or a registry's image",
                      "clusters keep images on shared storage; give its path")
    trainer = trainer_kind(data)
    if kind in ("docker", "podman") and "image" not in runtime and trainer is not None and \
            not trainer.in_default_image:
        yield Problem(("runtime",), f"a {trainer.title} job in docker or podman needs an "
                      "image: obc's default image is Axolotl's",
                      f"give runtime.image: an image with {trainer.title} installed")
    if not isinstance(image, str) or not _image_pattern().fullmatch(image):
        return  # the schema says what an image is
    if "image_sha256" in runtime and not is_image_file(image):
        yield Problem(("runtime", "image_sha256"), "only applies to an image file: a "
                      "registry's image is pinned by its digest", at_key=True)
    if kind in ("docker", "podman"):
        yield from _engine_image(image, kind)
    elif kind == "apptainer" and not is_image_file(image):
        yield from _apptainer_image(image)
    elif kind == "enroot" and not is_image_file(image):
        yield from _enroot_image(image, runtime.get("enroot_version"))


@cache
def _image_pattern() -> re.Pattern[str]:
    return re.compile(run_schema()["properties"]["runtime"]["properties"]["image"]["pattern"],
                      re.ASCII)


def _engine_image(image: str, kind: str) -> Iterator[Problem]:
    if is_image_file(image):
        yield Problem(_IMAGE, f"{show(image)}: {kind} takes a registry's image, not a file",
                      "use runtime.kind apptainer for a SIF file, or enroot for a squashfs")
    elif image.startswith(DOCKER_SCHEME):
        yield Problem(_IMAGE, f"{show(image)}: {kind} takes the image without {DOCKER_SCHEME}",
                      f"write {image.removeprefix(DOCKER_SCHEME)}")


def _apptainer_image(image: str) -> Iterator[Problem]:
    """apptainer pulls `docker://NAME@sha256:...`, and refuses a tag beside the digest."""
    name, tag, digest = parse_reference(image.removeprefix(DOCKER_SCHEME))
    pinned = f"{DOCKER_SCHEME}{name}@{digest}"
    if not image.startswith(DOCKER_SCHEME):
        yield Problem(_IMAGE, f"{show(image)}: apptainer takes a registry's image as "
                      f"{DOCKER_SCHEME}NAME@sha256:<digest>",
                      f"write {pinned}" if digest else "pin it by digest, or give a SIF file")
    elif digest is None:
        yield Problem(_IMAGE, f"{show(image)}: pin the image by its digest, "
                      f"{DOCKER_SCHEME}NAME@sha256:<digest>",
                      "or pull it once into a SIF file on shared storage (apptainer pull) "
                      "and give its path")
    elif tag is not None:
        yield Problem(_IMAGE, f"{show(image)}: apptainer refuses a tag beside a digest",
                      f"write {pinned}")


def _enroot_image(image: str, version: Any) -> Iterator[Problem]:
    """enroot 3 reads no digest; enroot 4 a sha256 one."""
    if image.startswith(DOCKER_SCHEME):
        yield Problem(_IMAGE, f"{show(image)}: write the image without {DOCKER_SCHEME}; obc "
                      "writes it as pyxis takes it", f"write {image.removeprefix(DOCKER_SCHEME)}")
        return
    digest = parse_reference(image).digest
    if digest is None:
        return
    if not isinstance(version, int) or version < ENROOT_DIGESTS:
        yield Problem(_IMAGE, f"{show(image)}: enroot 3 takes no digest",
                      "import the image once into a squashfs file on shared storage (enroot "
                      "import -o FILE.sqsh docker://REGISTRY#IMAGE:TAG) and give its path, or "
                      "set runtime.enroot_version: 4 if the cluster has enroot 4")
    elif not digest.startswith("sha256:"):
        yield Problem(_IMAGE, f"{show(image)}: enroot takes sha256 digests only")
