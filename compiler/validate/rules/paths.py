"""Paths on the machine that runs the job: `~/` and `${NAME}` are expanded there, by the
script; any other `$` would be taken literally, which is never what was meant."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ...core.diagnostics import show
from ...model.runtimes import is_image_file
from ...read.load import Path_
from .common import Problem, get
from .names import declared_names

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_BARE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def check(data: dict) -> Iterator[Problem]:
    secrets = {name for path, name in declared_names(data) if path[0] == "secrets"}
    for path, value in _path_fields(data):
        yield from _variables(path, value, secrets)


def _path_fields(data: dict) -> Iterator[tuple[Path_, str]]:
    for keys in (("paths", "run_dir"), ("paths", "cache_dir"), ("runtime", "venv"),
                 ("runtime", "env_file")):
        value = get(data, *keys)
        if isinstance(value, str):
            yield keys, value
    image = get(data, "runtime", "image")
    if isinstance(image, str) and is_image_file(image):
        yield ("runtime", "image"), image
    mounts = get(data, "runtime", "mounts")
    for i, mount in enumerate(mounts if isinstance(mounts, list) else ()):
        source = get(mount, "source")
        if isinstance(source, str):
            yield ("runtime", "mounts", i, "source"), source


def _variables(path: Path_, value: str, secrets: set[str]) -> Iterator[Problem]:
    for name in _VARIABLE.findall(value):
        if name.upper().startswith("OBC_"):
            yield Problem(path, f"${{{name}}}: names starting with OBC_ belong to the job "
                          "script")
        elif name in secrets:
            yield Problem(path, f"${{{name}}} is a secret: its value would show in paths, "
                          "logs and the engine's command line")
    rest = _VARIABLE.sub("", value)
    if "$" in rest:
        bare = _BARE.search(rest)
        hint = (f"write ${{{bare.group(1)}}}: the job expands ${{NAME}} where it runs"
                if bare else "a path can use ${NAME}, expanded where the job runs; no other $")
        yield Problem(path, f"{show(value)}: '$' is only for ${{NAME}}", hint)
