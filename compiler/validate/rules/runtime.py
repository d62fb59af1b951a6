"""The runtime: options only for the runtimes they apply to, and the folders a container
mounts."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any

from ...core.diagnostics import show
from ...model.runtimes import CONTAINER_CACHE_DIR, CONTAINER_RUN_DIR
from ...read.load import Path_
from .common import Problem, get

ENGINE_KINDS = ("docker", "podman")
CONTAINER_KINDS = (*ENGINE_KINDS, "apptainer", "enroot")
KINDS = (*CONTAINER_KINDS, "native")
# The runtimes each option applies to.
OPTION_KINDS = {
    "image": CONTAINER_KINDS,
    "mounts": CONTAINER_KINDS,
    "shm_size": ENGINE_KINDS,
    "extra_args": ENGINE_KINDS,
    "user": ENGINE_KINDS,
    "image_sha256": ("apptainer", "enroot"),
    "cleanenv": ("apptainer",),
    "contain": ("apptainer",),
    "enroot_version": ("enroot",),
    "venv": ("native",),
    "env_file": ("native",),
}
# What splits a mount: docker and podman's -v, apptainer's --bind and pyxis's
# --container-mounts all split it on ':' and ','.
MOUNT_SEPARATORS = ":,"
# pyxis writes each mount into a shell script for enroot, between double quotes, where these
# would be read as shell (`$` is refused in any path but as ${NAME}).
ENROOT_QUOTED = '"`\\'
SPLITTER = {"docker": "docker", "podman": "podman", "apptainer": "apptainer", "enroot": "pyxis"}


def check(data: dict, kind: Any) -> Iterator[Problem]:
    yield from _runtime_options(data, kind)
    yield from _mounts(data, kind)
    yield from _mounted_paths(data, kind)
    if kind == "enroot" and "slurm" not in data:
        yield Problem(("runtime", "kind"), "enroot runs each step with srun, which pyxis gives "
                      "the container options: the job needs a slurm block",
                      "add slurm: {} (and its resources), and submit job.sh with sbatch")
    if isinstance(get(data, "slurm", "nodes"), int) and get(data, "slurm", "nodes") > 1:
        yield from _multi_node(data)


def kinds_phrase(kinds: tuple[str, ...]) -> str:
    """`runtime.kind native`, `docker and podman`, `docker, podman and enroot`."""
    if len(kinds) == 1:
        return f"runtime.kind {kinds[0]}"
    return ", ".join(kinds[:-1]) + " and " + kinds[-1]


def _multi_node(data: dict) -> Iterator[Problem]:
    """What obc sets for a job on several nodes, a run file cannot set again."""
    extra = get(data, "runtime", "extra_args")
    for i, arg in enumerate(extra if isinstance(extra, list) else ()):
        if isinstance(arg, str) and arg.split("=")[0] in ("--network", "--net"):
            yield Problem(("runtime", "extra_args", i), "a job on several nodes uses the "
                          "hosts' network (--network=host), which the rendezvous needs")
    args = get(data, "trainer", "axolotl", "args")
    for i, arg in enumerate(args if isinstance(args, list) else ()):
        if arg == "--launcher" or (isinstance(arg, str) and arg.startswith("--launcher=")):
            yield Problem(("trainer", "axolotl", "args", i), "a job on several nodes launches "
                          "train with torchrun across them; obc gives --launcher itself")


def _runtime_options(data: dict, kind: Any) -> Iterator[Problem]:
    runtime = data.get("runtime")
    if not isinstance(runtime, dict) or kind not in KINDS:
        return
    for key, kinds in OPTION_KINDS.items():
        if key in runtime and kind not in kinds:
            yield Problem(("runtime", key), f"only applies to {kinds_phrase(kinds)}, not to "
                          f"{kind}", at_key=True)


_MOUNTS: Path_ = ("runtime", "mounts")


def _mounts(data: dict, kind: Any) -> Iterator[Problem]:
    mounts = get(data, "runtime", "mounts")
    if not isinstance(mounts, list):
        return
    for i, mount in enumerate(mounts):
        target = get(mount, "target")
        # The engine cleans a target ('/workspace//run/.' is /workspace/run) before it mounts.
        clean = "/" + posixpath.normpath(target).lstrip("/") if isinstance(target, str) else None
        if clean in (CONTAINER_RUN_DIR, CONTAINER_CACHE_DIR, "/"):
            yield Problem(("runtime", "mounts", i, "target"),
                          f"{show(target)} is taken by the job's own mounts")
        if kind == "enroot":
            for end in ("source", "target"):
                yield from _quoted((*_MOUNTS, i, end), get(mount, end))


def _mounted_paths(data: dict, kind: Any) -> Iterator[Problem]:
    """The run and cache dirs are mounted with the same syntax."""
    if kind not in CONTAINER_KINDS:
        return
    for key in ("run_dir", "cache_dir"):
        path = get(data, "paths", key)
        if isinstance(path, str) and any(c in path for c in MOUNT_SEPARATORS):
            yield Problem(("paths", key), f"{show(path)}: a {kind} job mounts this folder, and "
                          f"{SPLITTER[kind]} splits a mount on ':' and ','",
                          "choose a path without them")
        elif kind == "enroot":
            yield from _quoted(("paths", key), path)


def _quoted(path: Path_, value: Any) -> Iterator[Problem]:
    """A path that pyxis would write into enroot's shell script with shell syntax in it."""
    if isinstance(value, str) and any(c in value for c in ENROOT_QUOTED):
        yield Problem(path, f"{show(value)}: pyxis writes each mount into a shell script for "
                      "enroot, between double quotes, where '\"', '`' and '\\' are shell",
                      "choose a path without them")
