"""The runtime: options only for the runtime they apply to, and the folders a container
mounts."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any

from ..diagnostics import show
from ..model import CONTAINER_CACHE_DIR, CONTAINER_RUN_DIR
from .common import Problem, get

CONTAINER_KINDS = ("docker", "podman")
CONTAINER_ONLY = ("image", "shm_size", "mounts", "extra_args", "user")
NATIVE_ONLY = ("venv", "env_file")


def check(data: dict, kind: Any) -> Iterator[Problem]:
    yield from _runtime_options(data, kind)
    yield from _mounts(data)
    yield from _mounted_paths(data, kind)
    if isinstance(get(data, "slurm", "nodes"), int) and get(data, "slurm", "nodes") > 1:
        yield from _multi_node(data)


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
    if not isinstance(runtime, dict) or kind not in (*CONTAINER_KINDS, "native"):
        return
    misplaced = NATIVE_ONLY if kind in CONTAINER_KINDS else CONTAINER_ONLY
    applies = "runtime.kind native" if kind in CONTAINER_KINDS else "docker and podman"
    for key in misplaced:
        if key in runtime:
            yield Problem(("runtime", key), f"only applies to {applies}, not to {kind}",
                          at_key=True)


def _mounts(data: dict) -> Iterator[Problem]:
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


def _mounted_paths(data: dict, kind: Any) -> Iterator[Problem]:
    """The run and cache dirs are mounted with `-v DIR:TARGET`, which the engine splits."""
    if kind not in CONTAINER_KINDS:
        return
    for key in ("run_dir", "cache_dir"):
        path = get(data, "paths", key)
        if isinstance(path, str) and (":" in path or "," in path):
            yield Problem(("paths", key), f"{show(path)}: a {kind} job mounts this folder, and "
                          f"{kind} splits a mount on ':' and ','", "choose a path without them")
