"""Env and secret names: each given once across both, and none the job or its shell needs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ...core.diagnostics import show
from ...read.load import Path_
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


# Names of credentials, by the words of the name: HF_TOKEN, WANDB_API_KEY, AWS_SECRET_*,
# DB_PASSWORD; not TOKENIZERS_PARALLELISM or MAX_TOKENS.
_CREDENTIAL_WORDS = {"TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "CREDENTIAL",
                     "CREDENTIALS", "APIKEY", "PASSPHRASE"}
_CREDENTIAL_SUFFIXES = ("_KEY", "_PAT")
# Values that are credentials whatever their name: Hugging Face, OpenAI-style, GitHub, AWS
# access keys, Slack, GitLab.
_CREDENTIAL_VALUE = re.compile(
    r"hf_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{30,}|AKIA[A-Z0-9]{16}|xox[baprs]-[A-Za-z0-9-]{10,}"
    r"|glpat-[A-Za-z0-9_-]{20,}")


def check(data: dict, kind: Any) -> Iterator[Problem]:
    yield from _unique_and_free(data, kind)
    yield from _credentials(data)


def _unique_and_free(data: dict, kind: Any) -> Iterator[Problem]:
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
    if kind == "enroot" and (name == "HOME" or name.startswith(_ENROOT_SETTINGS)):
        return _ENROOT_READS
    containers, native = kind in CONTAINER_KINDS, kind == "native"
    # The runtimes where obc sets CUDA_VISIBLE_DEVICES from runtime.gpus.
    sets_gpus = kind in ("native", "apptainer", "enroot")
    gpus = get(data, "runtime", "gpus")
    reserved = {
        "HF_HOME": (containers or get(data, "paths", "cache_dir"),
                    "the job sets it to the cache dir; set paths.cache_dir instead"),
        "HOME": (containers and get(data, "runtime", "user") in (None, "invoker"),
                 "the job sets it to a folder in the run dir that the steps' user can write"),
        "PATH": (native, "the job sets it from runtime.venv and the PATH it starts with; use "
                 "runtime.venv, or set PATH in runtime.env_file"),
        "VIRTUAL_ENV": (native, "the job sets it from runtime.venv"),
        "CUDA_VISIBLE_DEVICES": (sets_gpus and gpus not in (None, "all"),
                                 "runtime.gpus sets it; change runtime.gpus instead"),
        # apptainer reads APPTAINERENV_PREPEND_PATH and _APPEND_PATH as changes to PATH.
        **dict.fromkeys(("PREPEND_PATH", "APPEND_PATH"), (
            kind == "apptainer", "apptainer reads it as a change to PATH, not as a variable; "
            "set PATH instead")),
    }
    applies, reason = reserved.get(name, (False, ""))
    return reason if applies else None


# pyxis runs enroot on the node with the job's environment: enroot finds its configuration,
# credentials and containers under HOME, and pyxis and enroot take settings from these.
_ENROOT_SETTINGS = ("PYXIS_", "ENROOT_")
_ENROOT_READS = ("pyxis and enroot read it on the node, where it would change how the "
                 "container is made (HOME: where enroot keeps its configuration and data)")


def _credentials(data: dict) -> Iterator[Problem]:
    """A credential's value under env: would be in the committed script and on the engine's
    command line; secrets: passes it by name from the environment the job runs in."""
    env = data.get("env")
    for name, value in env.items() if isinstance(env, dict) else ():
        if isinstance(value, dict):
            continue  # {value: ..., secret: false}: the run file says it is not a secret
        by_name = looks_like_credential(name)
        if by_name:
            why = f"{show(name)} looks like the name of a credential"
        elif isinstance(value, str) and credential_value(value):
            why = "this value looks like an access token"
        else:
            continue
        yield Problem(("env", name), f"{why}; its value would be written into the script",
                      f"move it to secrets: [{name}] and set it where the job runs; if it is "
                      f"not secret, write {name}: {{value: ..., secret: false}}",
                      at_key=by_name)


def credential_value(value: str) -> bool:
    """Whether `value` holds what looks like an access token, whatever its name."""
    return bool(_CREDENTIAL_VALUE.search(value))


def looks_like_credential(name: str) -> bool:
    upper = name.upper()
    return bool(_CREDENTIAL_WORDS & set(upper.split("_"))) or upper.endswith(
        _CREDENTIAL_SUFFIXES)
