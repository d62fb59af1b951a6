"""What the machine that runs the job can hold: the embedded files' names, which the job
creates in the run dir, and the arguments and environment of each step's program. Caught
here, they are an error at the field rather than a failed job.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...core.diagnostics import show
from ...model.trainers import trainer_kind
from ...read.load import Path_
from .common import Problem, get
from .steps import passed_engine_options

# Linux's NAME_MAX, less room for the temporary name the job writes a file through beside it.
MAX_NAME_BYTES = 255 - 16
# Linux's PATH_MAX is 4,096 bytes for the whole path; a quarter is left for the run dir.
MAX_FILE_PATH_BYTES = 3072
# Linux allows a program's arguments and environment together a quarter of the stack limit,
# 2 MiB under the usual 8 MiB. A run file may use an eighth of that, so that the inherited
# environment (Slurm's and the modules' variables), the engine's own options and the
# container's variables fit in the rest.
MAX_STEP_EXEC_BYTES = 256 * 1024
# What exec counts for each string besides its bytes: its NUL and its pointer.
_EXEC_OVERHEAD = 1 + 8


def check(data: dict) -> Iterator[Problem]:
    yield from _file_names(data)
    yield from _step_sizes(data)


def _file_names(data: dict) -> Iterator[Problem]:
    files = data.get("files")
    if not isinstance(files, dict):
        return
    taken: dict[str, Path_] = {name: ("files", name) for name in files}
    kind = trainer_kind(data)
    if kind is not None and kind.config_name is not None:
        taken[kind.config_name] = ("trainer", kind.name, "config")
    for name in files:
        problem = _name_size_problem(name) or _folder_problem(name, taken)
        if problem:
            message, first = problem
            yield Problem(("files", name), f"{show(name)} {message}", at_key=True, first=first,
                          first_at_key=first is not None and first[0] == "files")


def _name_size_problem(name: str) -> tuple[str, None] | None:
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > MAX_FILE_PATH_BYTES:
        return f"is {size:,} bytes; a file's path in the run dir has at most " \
               f"{MAX_FILE_PATH_BYTES:,}", None
    longest = max(name.split("/"), key=lambda part: len(part.encode("utf-8", "surrogatepass")))
    part_size = len(longest.encode("utf-8", "surrogatepass"))
    if part_size > MAX_NAME_BYTES:
        return f"has a part of {part_size:,} bytes; a file or folder name has at most " \
               f"{MAX_NAME_BYTES} (Linux allows 255, and the job needs room for a " \
               "temporary name)", None
    return None


def _folder_problem(name: str, taken: dict[str, Path_]) -> tuple[str, Path_] | None:
    """A file `a/b` needs a folder `a`, which another embedded file must then not be."""
    parts = name.split("/")
    for end in range(1, len(parts)):
        folder = "/".join(parts[:end])
        if folder in taken:
            return f"needs a folder {show(folder)}, which is a file here too", taken[folder]
    return None


def _step_sizes(data: dict) -> Iterator[Problem]:
    shared = sum(_exec_size(text) for text in _shared_strings(data))
    if shared > MAX_STEP_EXEC_BYTES:
        where = ("env",) if "env" in data else ("runtime", "extra_args")
        yield Problem(where, f"every step gets {shared:,} bytes of environment and engine "
                      f"options from the run file; at most {MAX_STEP_EXEC_BYTES:,} fit safely",
                      _SIZE_HINT, at_key=True)
        return
    steps = data.get("steps")
    for i, step in enumerate(steps if isinstance(steps, list) else ()):
        run = get(step, "run")
        size = shared + sum(_exec_size(arg) for arg in (run if isinstance(run, list) else ())
                            if isinstance(arg, str))
        if size > MAX_STEP_EXEC_BYTES:
            yield Problem(("steps", i, "run"), f"this step gets {size:,} bytes of arguments, "
                          "environment and engine options from the run file; at most "
                          f"{MAX_STEP_EXEC_BYTES:,} fit safely", _SIZE_HINT)


_SIZE_HINT = ("Linux refuses to start a program whose arguments and environment pass a "
              "quarter of the stack limit (usually 2 MiB); put large content in a file "
              "(files:) and pass its path")


def _exec_size(text: Any) -> int:
    return len(str(text).encode("utf-8", "surrogatepass")) + _EXEC_OVERHEAD


def _shared_strings(data: dict) -> Iterator[str]:
    """The strings every step's process (or its engine command) gets: env and engine options."""
    env = data.get("env")
    for name, value in env.items() if isinstance(env, dict) else ():
        yield f"{name}={value}"
    yield from (word for _, word in passed_engine_options(data))
