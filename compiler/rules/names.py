"""Env and secret names: each given once across both, and none the job or its shell needs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..diagnostics import show
from ..load import Path_
from .common import Problem, get
from .runtime import CONTAINER_KINDS

# Names that would change how the job's own shell, or the shells its steps start, behave.
SHELL_NAMES = {
    "IFS": "it changes how every shell splits words",
    "ENV": "shells source the file it names at start",
    "BASH_ENV": "every bash the steps start sources the file it names",
    "CDPATH": "it changes where 'cd' goes",
    "PS4": "it is expanded on every traced line, which can run commands",
    "SHELLOPTS": "it turns on bash options such as xtrace in every bash the steps start",
    "BASHOPTS": "it turns on bash options in every bash the steps start",
}


def check(data: dict, kind: Any) -> Iterator[Problem]:
    """Env and secret names: not reserved, and each given once across both."""
    seen: dict[str, Path_] = {}
    for path, name in declared_names(data):
        reason = _reserved(name, kind, data)
        if reason:
            yield Problem(path, f"{show(name)} cannot be set by a run file: {reason}",
                          at_key=path[0] == "env")
        if name in seen:
            first = seen[name]
            yield Problem(path, f"{show(name)} is already given in {first[0]}",
                          at_key=path[0] == "env", first=first, first_at_key=first[0] == "env")
        seen.setdefault(name, path)


def declared_names(data: dict) -> Iterator[tuple[Path_, str]]:
    """Yield every name the run file gives in env and secrets, with where it gives it."""
    env = data.get("env")
    if isinstance(env, dict):
        for name in env:
            yield ("env", name), name
    secrets = data.get("secrets")
    if isinstance(secrets, list):
        for i, item in enumerate(secrets):
            if isinstance(item, str):
                yield ("secrets", i), item
            elif isinstance(item, dict) and isinstance(item.get("name"), str):
                yield ("secrets", i, "name"), item["name"]


def _reserved(name: str, kind: Any, data: dict) -> str | None:
    if name in SHELL_NAMES:
        return SHELL_NAMES[name]
    if name.upper().startswith("OBC_"):
        return "names starting with OBC_ (in any case) belong to the job script"
    if name == "HF_HOME" and (kind in CONTAINER_KINDS or get(data, "paths", "cache_dir")):
        return "the job sets it to the cache dir; set paths.cache_dir instead"
    gpus = get(data, "runtime", "gpus")
    if name == "CUDA_VISIBLE_DEVICES" and kind == "native" and gpus not in (None, "all"):
        return "runtime.gpus sets it; change runtime.gpus instead"
    return None
