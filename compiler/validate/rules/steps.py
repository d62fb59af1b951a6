"""What the job runs and writes: steps, their programs and arguments, and embedded files."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...core.diagnostics import show
from ...model.engine_args import passed_words
from ...model.trainers import TRAINER_NAMES, trainer_kind
from ...read.load import Path_
from .common import Problem, get

# Linux refuses one argument or environment string of 32 pages (MAX_ARG_STRLEN) at exec.
MAX_ARG_BYTES = 131_071


def check(data: dict) -> Iterator[Problem]:
    yield from _trainer_or_steps(data)
    yield from _one_trainer(data)
    yield from _steps(data)
    yield from _files(data)
    yield from _argument_sizes(data)


def _trainer_or_steps(data: dict) -> Iterator[Problem]:
    if "trainer" not in data and "steps" not in data:
        yield Problem((), "missing 'trainer' or 'steps': what should the job run?",
                      "add trainer: {axolotl: {config: axolotl.yaml}}, or a list of steps")


def _one_trainer(data: dict) -> Iterator[Problem]:
    trainer = data.get("trainer")
    if isinstance(trainer, dict):
        named = [name for name in trainer if name in TRAINER_NAMES]
        for name in named[1:]:
            yield Problem(("trainer", name), f"a job has one trainer (one of "
                          f"{', '.join(TRAINER_NAMES)}), and this one names {len(named)}",
                          "keep one; run another's work as steps", at_key=True)


def _steps(data: dict) -> Iterator[Problem]:
    steps = data.get("steps")
    if not isinstance(steps, list):
        return
    seen: dict[str, Path_] = {}
    kind = trainer_kind(data)
    trainer, by = (kind.step_names, f"trainer.{kind.name}") if kind else ((), "")
    for i, step in enumerate(steps):
        name, run = get(step, "name"), get(step, "run")
        if isinstance(name, str):
            if name in trainer:
                yield Problem(("steps", i, "name"), f"step name {show(name)} is taken by "
                              f"{by}, whose steps come first",
                              "name it after what it does, such as evaluate")
            elif name in seen:
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
        kind = trainer_kind(data)
        if not problem and kind is not None and name == kind.config_name:
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
            text = get(value, "value") if isinstance(value, dict) else value
            yield ("env", name), f"{name}={text}"
    for trainer in TRAINER_NAMES:
        args = get(data, "trainer", trainer, "args")
        for i, arg in enumerate(args if isinstance(args, list) else ()):
            if isinstance(arg, str):
                yield ("trainer", trainer, "args", i), arg
    steps = data.get("steps")
    for i, step in enumerate(steps if isinstance(steps, list) else ()):
        run = get(step, "run")
        for j, arg in enumerate(run if isinstance(run, list) else ()):
            if isinstance(arg, str):
                yield ("steps", i, "run", j), arg
    yield from passed_engine_options(data)


def passed_engine_options(data: dict) -> Iterator[tuple[Path_, str]]:
    """Yield each word the job passes for the run file's engine options (each whole: `-it`
    is passed as --interactive --tty), which is what Linux's limits apply to."""
    kind, extra = get(data, "runtime", "kind"), get(data, "runtime", "extra_args")
    for i, arg in enumerate(extra if isinstance(extra, list) else ()):
        for word in passed_words(kind, arg) if isinstance(arg, str) else ():
            yield ("runtime", "extra_args", i), word
