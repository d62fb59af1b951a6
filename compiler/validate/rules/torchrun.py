"""trainer.torchrun: the name the script takes in the run dir is its own, and the output_dir
obc looks for checkpoints in (with resume) is one the job can check and find."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator

from ...core.diagnostics import show
from ...model.runtimes import host_folder, mounts_of
from .common import Problem, get

FIELD = ("trainer", "torchrun")


def check(data: dict) -> Iterator[Problem]:
    torchrun = get(data, *FIELD)
    if not isinstance(torchrun, dict):
        return
    script = torchrun.get("script")
    if isinstance(script, str):
        yield from _script_name(data, script)
    output_dir = torchrun.get("output_dir")
    if isinstance(output_dir, str) and "resume" in torchrun:
        yield from _output_dir(data, output_dir)


def _script_name(data: dict, script: str) -> Iterator[Problem]:
    name = posixpath.basename(script)
    files = data.get("files")
    if isinstance(files, dict) and name in files:
        yield Problem(("files", name), f"{show(name)} is where trainer.torchrun.script goes "
                      "in the run dir", "give the file another name", at_key=True)
    if not name.endswith(".py"):
        yield Problem((*FIELD, "script"), f"{show(script)} is no Python file (*.py), which "
                      "torchrun and accelerate launch run with python")


def _output_dir(data: dict, output_dir: str) -> Iterator[Problem]:
    path = (*FIELD, "output_dir")
    if re.search(r'["\\\x00-\x1f]', output_dir):
        yield Problem(path, "must be a plain path: the job looks for checkpoints in it")
    elif posixpath.normpath(output_dir).split("/")[0] == "..":
        yield Problem(path, f"{show(output_dir)} leaves the run dir, and no check covers "
                      "where it leads", "keep it in the run dir, or make it absolute: the job "
                      "then checks that folder as it checks the run dir")
    elif output_dir.startswith("/") and get(data, "runtime", "kind") != "native" and \
            isinstance(get(data, "runtime"), dict) and \
            host_folder(posixpath.normpath(output_dir), mounts_of(data["runtime"])) is None:
        yield Problem(path, f"{show(output_dir)} is in no folder the container mounts, so "
                      "the job cannot find its checkpoints", "use a path in the run dir "
                      "(relative, or under /workspace/run) or under a mount")
