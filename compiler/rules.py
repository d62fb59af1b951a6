"""The rules of a run file that its JSON Schema cannot express.

Each rule reads the raw data defensively (the schema may have failed on the same file, and
every problem is reported at once) and yields `Problem`s; validate.py locates them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .diagnostics import show
from .load import Path_
from .model import CONTAINER_CACHE_DIR, CONTAINER_RUN_DIR, RENDEZVOUS_NAMES

# Linux refuses one argument or environment string of 32 pages (MAX_ARG_STRLEN) at exec.
MAX_ARG_BYTES = 131_071

CONTAINER_KINDS = ("docker", "podman")
CONTAINER_ONLY = ("image", "shm_size", "mounts", "extra_args")
NATIVE_ONLY = ("venv", "env_file")
AXOLOTL_CONFIG_NAME = "axolotl.yaml"

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


# sbatch options a `slurm` field writes, by the field; `extra` must not give them again.
SLURM_FIELDS = {
    "job-name": "job_name", "output": "output", "partition": "partition",
    "account": "account", "qos": "qos", "time": "time", "nodes": "nodes",
    "gpus-per-node": "gpus_per_node", "cpus-per-task": "cpus_per_task", "mem": "mem",
    "constraint": "constraint", "signal": "signal", "requeue": "requeue",
    "no-requeue": "requeue", "open-mode": "requeue",
}
# sbatch options that would break what the script relies on, with the reason.
SLURM_REFUSED = {
    "ntasks": "the script runs one task per node and starts the rest with srun",
    "ntasks-per-node": "the script runs one task per node and starts the rest with srun",
    "export": "the job needs the submitter's environment, secrets included, by name; "
              "put values in env: instead",
    "wrap": "job.sh is the batch script",
}


@dataclass(frozen=True, slots=True)
class Problem:
    """A rule broken at `path` (at its key when `at_key`), with an optional fix; `first` is
    where a name given twice was first given (at its key when `first_at_key`)."""

    path: Path_
    message: str
    hint: str | None = None
    at_key: bool = False
    first: Path_ | None = None
    first_at_key: bool = False


def check(data: Any) -> Iterator[Problem]:
    """Yield every broken rule of a run file's data."""
    if not isinstance(data, dict):
        return  # the schema says what a run file is
    kind = _get(data, "runtime", "kind")
    yield from _trainer_or_steps(data)
    yield from _runtime_options(data, kind)
    yield from _names(data, kind)
    yield from _steps(data)
    yield from _files(data)
    yield from _mounts(data)
    yield from _mounted_paths(data, kind)
    yield from _argument_sizes(data)
    yield from _slurm(data)


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _trainer_or_steps(data: dict) -> Iterator[Problem]:
    if "trainer" in data and "steps" in data:
        yield Problem(("steps",), "give either 'trainer' or 'steps', not both", at_key=True)
    elif "trainer" not in data and "steps" not in data:
        yield Problem((), "missing 'trainer' or 'steps': what should the job run?",
                      "add trainer: {axolotl: {config: axolotl.yaml}}, or a list of steps")


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


def _names(data: dict, kind: Any) -> Iterator[Problem]:
    """Env and secret names: not reserved, and each given once across both."""
    seen: dict[str, Path_] = {}
    for path, name in _declared_names(data):
        reason = _reserved(name, kind, data)
        if reason:
            yield Problem(path, f"{show(name)} cannot be set by a run file: {reason}",
                          at_key=path[0] == "env")
        if name in seen:
            first = seen[name]
            yield Problem(path, f"{show(name)} is already given in {first[0]}",
                          at_key=path[0] == "env", first=first, first_at_key=first[0] == "env")
        seen.setdefault(name, path)


def _declared_names(data: dict) -> Iterator[tuple[Path_, str]]:
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
    if name == "HF_HOME" and (kind in CONTAINER_KINDS or _get(data, "paths", "cache_dir")):
        return "the job sets it to the cache dir; set paths.cache_dir instead"
    gpus = _get(data, "runtime", "gpus")
    if name == "CUDA_VISIBLE_DEVICES" and kind == "native" and gpus not in (None, "all"):
        return "runtime.gpus sets it; change runtime.gpus instead"
    return None


def _steps(data: dict) -> Iterator[Problem]:
    steps = data.get("steps")
    if not isinstance(steps, list):
        return
    seen: dict[str, Path_] = {}
    for i, step in enumerate(steps):
        name, run = _get(step, "name"), _get(step, "run")
        if isinstance(name, str):
            if name in seen:
                yield Problem(("steps", i, "name"), f"step name {show(name)} is already used",
                              first=seen[name])
            seen.setdefault(name, ("steps", i, "name"))
        if isinstance(run, list) and run and isinstance(run[0], str):
            yield from _program(("steps", i, "run", 0), run[0], data.get("files"))


def _program(path: Path_, program: str, files: Any) -> Iterator[Problem]:
    if isinstance(files, dict) and program.removeprefix("./") in files:
        # Embedded files are written as plain text, without the execute bit, and only after
        # the preflight that checks each program exists.
        yield Problem(path, f"{show(program)} is an embedded file, which cannot be run directly",
                      f"run it with its interpreter: [sh, {program.removeprefix('./')}]")
    elif not program:
        yield Problem(path, "the program name is empty")
    elif "=" in program:
        # `env` and shells both read a first word with '=' as an assignment.
        yield Problem(path, f"a program name cannot contain '=': {show(program)}",
                      "put variables in env:, not in the command")
    elif "\n" in program:
        yield Problem(path, "a program name cannot contain a newline")


def _files(data: dict) -> Iterator[Problem]:
    files = data.get("files")
    if not isinstance(files, dict):
        return
    for name in files:
        problem = _file_name_problem(name)
        if not problem and name == AXOLOTL_CONFIG_NAME and "trainer" in data:
            problem = "is where the trainer's config goes"
        if problem:
            yield Problem(("files", name), f"{show(name)} {problem}", at_key=True)


def _file_name_problem(name: str) -> str | None:
    segments = name.split("/")
    if name.startswith("/"):
        return "must be relative to the run dir"
    if ".." in segments:
        return "must stay inside the run dir: no '..'"
    if "" in segments or "." in segments:
        return "must name a file: no empty or '.' parts, no trailing '/'"
    if "\n" in name:
        return "must not contain a newline"
    return None


def _mounts(data: dict) -> Iterator[Problem]:
    mounts = _get(data, "runtime", "mounts")
    if not isinstance(mounts, list):
        return
    for i, mount in enumerate(mounts):
        target = _get(mount, "target")
        if isinstance(target, str) and target.rstrip("/") in (CONTAINER_RUN_DIR,
                                                              CONTAINER_CACHE_DIR, ""):
            yield Problem(("runtime", "mounts", i, "target"),
                          f"{show(target)} is taken by the job's own mounts")


def _mounted_paths(data: dict, kind: Any) -> Iterator[Problem]:
    """The run and cache dirs are mounted with `-v DIR:TARGET`, which the engine splits."""
    if kind not in CONTAINER_KINDS:
        return
    for key in ("run_dir", "cache_dir"):
        path = _get(data, "paths", key)
        if isinstance(path, str) and (":" in path or "," in path):
            yield Problem(("paths", key), f"{show(path)}: a {kind} job mounts this folder, and "
                          f"{kind} splits a mount on ':' and ','", "choose a path without them")


def _argument_sizes(data: dict) -> Iterator[Problem]:
    for path, text in _arguments(data):
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_ARG_BYTES:
            yield Problem(path, f"is {size:,} bytes; Linux refuses an argument or variable "
                          f"longer than {MAX_ARG_BYTES:,} bytes",
                          "put large content in a file (files:) and pass its path")


def _arguments(data: dict) -> Iterator[tuple[Path_, str]]:
    """Yield each string that becomes one argument or environment string of a process."""
    env = data.get("env")
    if isinstance(env, dict):
        for name, value in env.items():
            yield ("env", name), f"{name}={value}"
    steps = data.get("steps")
    for i, step in enumerate(steps if isinstance(steps, list) else ()):
        run = _get(step, "run")
        for j, arg in enumerate(run if isinstance(run, list) else ()):
            if isinstance(arg, str):
                yield ("steps", i, "run", j), arg
    extra = _get(data, "runtime", "extra_args")
    for i, arg in enumerate(extra if isinstance(extra, list) else ()):
        if isinstance(arg, str):
            yield ("runtime", "extra_args", i), arg


def _slurm(data: dict) -> Iterator[Problem]:
    slurm = data.get("slurm")
    if not isinstance(slurm, dict):
        return
    nodes, gpus = slurm.get("nodes"), slurm.get("gpus_per_node")
    multi_node = isinstance(nodes, int) and nodes > 1
    if multi_node and "gpus_per_node" not in slurm:
        yield Problem(("slurm", "nodes"), "a job on several nodes needs gpus_per_node: "
                      "each node starts that many training processes", at_key=True)
    runtime_gpus = _get(data, "runtime", "gpus")
    if gpus is not None and runtime_gpus not in (None, "all"):
        yield Problem(("runtime", "gpus"), "Slurm picks the GPUs when slurm.gpus_per_node is "
                      "set; leave runtime.gpus at all (the default)", at_key=True)
    extra = slurm.get("extra")
    for i, option in enumerate(extra if isinstance(extra, list) else ()):
        if isinstance(option, str):
            yield from _slurm_option(("slurm", "extra", i), option)
    if multi_node:
        for path, name in _declared_names(data):
            if name in RENDEZVOUS_NAMES:
                yield Problem(path, f"'{name}' cannot be set by a run file: a job on several "
                              "nodes sets it for every step", at_key=path[0] == "env")


def _slurm_option(path: Path_, option: str) -> Iterator[Problem]:
    name = option[2:].partition("=")[0]
    if name in SLURM_FIELDS:
        yield Problem(path, f"--{name} is set by slurm.{SLURM_FIELDS[name]}; use that field")
    elif name in SLURM_REFUSED:
        yield Problem(path, f"--{name} cannot be given: {SLURM_REFUSED[name]}")
