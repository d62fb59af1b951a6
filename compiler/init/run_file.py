"""The run file `obc init` writes beside a trainer config (docs/command-line.md, "Your first run
file: obc init"): the trainer its keys name, the fields a job needs and nothing more, and
comments on what a newcomer changes next. Every value is written by ruamel, so it is quoted as
YAML needs; the same config in the same project gives the same bytes."""

from __future__ import annotations

import io
import os
import re
import textwrap
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from ..core.diagnostics import Diagnostic
from ..core.shell import join_words
from ..core.text import visible
from ..model.defaults import DEFAULT_GPUS, DEFAULT_IMAGE, DEFAULT_RUN_DIR
from ..model.trainers import AXOLOTL, CONFIG_SIGNATURES, ConfigSignature
from ..read.axolotl import ConfigError, read_config
from ..read.load import display_name
from ..read.sources import (
    MAX_EMBEDDED_BYTES,
    SourceError,
    decode_text,
    find_project,
    read_inside,
)

RUN_FILE_SUFFIX = ".run.yaml"
# Where docs/editors.md ("Editor support") puts a copy of the schema: the top of the project.
SCHEMA_COPY = "schemas/run.schema.json"
# obc's default image (DEFAULT_IMAGE) carries Axolotl: its run file can run in docker as it
# is; another trainer's runs natively until an image with that trainer is named.
IMAGE_TRAINER = AXOLOTL.name
WIDTH = 92
# A run's id (the run file's schema): lower-case letters, digits, '_', '.' and '-'.
_NOT_IN_ID = re.compile(r"[^a-z0-9_.-]+")


@dataclass(frozen=True, slots=True)
class RunFile:
    """A run file to write: where, the title of its trainer, and its text."""

    path: Path
    trainer: str
    text: str


class _Refused(Exception):
    def __init__(self, problem: Diagnostic) -> None:
        super().__init__(problem.message)
        self.problem = problem


def plan_run_files(configs: Sequence[Path]) -> tuple[list[RunFile], list[Diagnostic]]:
    """The run file of each config, and the problems that must stop them all: a config that
    cannot be read or whose trainer cannot be told, and a run file that is there already."""
    run_files: list[RunFile] = []
    problems: list[Diagnostic] = []
    for config in configs:
        try:
            run_files.append(run_file_for(config))
        except _Refused as refused:
            problems.append(refused.problem)
    paths = [os.path.abspath(run_file.path) for run_file in run_files]
    problems += [_problem(run_file.path, "is the run file of two of the configs given")
                 for run_file, path in zip(run_files, paths, strict=True)
                 if paths.count(path) > 1]
    return run_files, problems


def write_run_files(run_files: Sequence[RunFile]) -> None:
    """Write each run file, where no file may be: raise OSError (FileExistsError) rather
    than replace one that appeared since it was planned."""
    for run_file in run_files:
        with open(run_file.path, "x", encoding="utf-8") as stream:
            stream.write(run_file.text)


def run_file_for(config: Path) -> RunFile:
    """The run file beside `config`, named after it; raise _Refused with the problem."""
    path = config.with_name(config.stem + RUN_FILE_SUFFIX)
    if not _is_text(config.name):
        raise _Refused(_problem(config, "has a name that is not UTF-8 text, which a run file "
                                "cannot name", "rename it"))
    if os.path.lexists(path):
        raise _Refused(_problem(path, "exists; obc init never replaces a file",
                                "edit it, or move it away and run obc init again"))
    signature = trainer_of(_read(config), config)
    return RunFile(path, signature.title, render_run_file(config, path, signature))


def _is_text(name: str) -> bool:
    """Whether a file name is text (bytes that are not UTF-8 come as lone surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _read(config: Path) -> dict[str, Any]:
    """The config's mapping, read from the project as compile reads it."""
    try:
        text = decode_text(read_inside(find_project(config), config, MAX_EMBEDDED_BYTES))
        return read_config(text)
    except SourceError as error:
        raise _Refused(_problem(config, f"cannot be read: {error}", error.hint)) from error
    except ConfigError as error:
        raise _Refused(Diagnostic(display_name(config), error.mark.line, error.mark.column,
                                  "", str(error), error.hint)) from error


def trainer_of(data: dict[str, Any], config: Path) -> ConfigSignature:
    """The one trainer whose config `data` is, by its keys (CONFIG_SIGNATURES)."""
    found = {signature: [key for key in signature.keys if key in data]
             for signature in CONFIG_SIGNATURES}
    matches = [signature for signature, keys in found.items() if keys]
    if len(matches) == 1:
        return matches[0]
    if matches:
        named = "; ".join(f"{signature.title}'s {', '.join(found[signature])}"
                          for signature in matches)
        raise _Refused(_problem(config, f"has keys of several trainers' configs ({named}), "
                                "so obc init cannot tell which trainer reads it",
                                "remove the keys its trainer does not know, or write the "
                                "run file's trainer.<name>.config yourself"))
    named = "; ".join(f"{signature.title}'s {', '.join(signature.keys)}"
                      for signature in CONFIG_SIGNATURES)
    raise _Refused(_problem(config, f"has none of the keys that tell a trainer's config "
                            f"({named}), so obc init cannot tell which trainer reads it",
                            "for a script of your own, write a run file with "
                            "trainer.torchrun (docs/trainers.md, \"Your own script under "
                            "torchrun\")"))


def _problem(path: Path, message: str, hint: str | None = None) -> Diagnostic:
    return Diagnostic(display_name(path), 1, 1, "", message, hint)


def run_id(config: Path) -> str:
    """A run's id made of the config's name: ASCII, lower case, other characters as '-'."""
    ascii_name = unicodedata.normalize("NFKD", config.stem).encode("ascii", "ignore").decode()
    return _NOT_IN_ID.sub("-", ascii_name.lower()).strip("-_.")[:63] or "run"


def render_run_file(config: Path, path: Path, signature: ConfigSignature) -> str:
    """The run file's text: a modeline and how to compile it, the fields, and what to change
    next as comments, each example written by ruamel as it would stand uncommented."""
    job = run_id(config)
    in_docker = signature.trainer == IMAGE_TRAINER
    script = f"out/{job}/job.sh"
    run_dir = DEFAULT_RUN_DIR.format(id=job)
    return "".join((
        f"# yaml-language-server: $schema={_schema_path(path)}\n",
        _comment(f"The run file of {signature.title}'s config {config.name}, as obc init "
                 f"wrote it: it compiles as it is. Compile it into {script} and see what the "
                 f"job would do (it runs in {run_dir}):"),
        _commented(join_words(["obc", "compile", path.name, "-o", "out"]), inset=2),
        _commented(join_words(["sh", script, "--dry-run"]), inset=2),
        _yaml({"version": 1, "id": job}),
        "runtime:\n",
        _comment(_runtime_text(signature, in_docker), indent=2),
        _yaml({"kind": "docker" if in_docker else "native"}, indent=2),
        "" if in_docker else _commented(_yaml({"venv": f"~/venvs/{signature.trainer}"}),
                                        indent=2),
        _comment(f"Without slurm: (which picks them), the GPUs the steps see: {DEFAULT_GPUS} "
                 "(the default), none, or a list of device ids:", indent=2),
        _commented(_yaml({"gpus": _flow([0, 1])}), indent=2),
        _yaml({"trainer": {signature.trainer: {"config": config.name}}}),
        _comment("The names of the secrets the job takes from your environment (their "
                 "values stay there):"),
        _commented(_yaml({"secrets": _flow(["HF_TOKEN"])})),
        _comment(f"To submit it with `sbatch {script}`, the Slurm resources it asks for:"),
        # Quoted: a YAML 1.1 reader takes 24:00:00 for a number in base 60.
        _commented(_yaml({"slurm": {"partition": "gpu",
                                    "time": DoubleQuotedScalarString("24:00:00"),
                                    "gpus_per_node": 8}})),
    ))


def _runtime_text(signature: ConfigSignature, in_docker: bool) -> str:
    image = (f"(by default {DEFAULT_IMAGE}, which has {signature.title})" if in_docker
             else f"(name one with {signature.title}: obc's default image is "
                  f"{AXOLOTL.title}'s)")
    return (f"Where the steps run: docker or podman, in a container of `image` {image}; "
            "apptainer or enroot, from an `image` file; or native, from `venv: PATH` or "
            "else PATH.")


def _schema_path(path: Path) -> str:
    """The schema's copy at the top of the project, relative to the run file."""
    project = find_project(path).root
    return Path(os.path.relpath(project / SCHEMA_COPY, path.parent.resolve())).as_posix()


def _flow(items: list[Any]) -> CommentedSeq:
    sequence = CommentedSeq(items)
    sequence.fa.set_flow_style()
    return sequence


def _yaml(data: dict[str, Any], indent: int = 0) -> str:
    """`data` as YAML, as ruamel writes it (quoting each value as YAML needs)."""
    yaml = YAML(typ="rt", pure=True)
    yaml.width = WIDTH
    stream = io.StringIO()
    yaml.dump(data, stream)
    return textwrap.indent(stream.getvalue(), " " * indent)


def _comment(text: str, indent: int = 0) -> str:
    """Prose as comment lines, wrapped, each line visible text."""
    return _commented("\n".join(textwrap.wrap(visible(text), WIDTH - indent - 2,
                                              break_long_words=False,
                                              break_on_hyphens=False)), indent)


def _commented(lines: str, indent: int = 0, inset: int = 0) -> str:
    """Lines (YAML, a command) commented out as they are, each one visible text, the comment
    at `indent` and its text `inset` more."""
    return "".join(f"{' ' * indent}# {' ' * inset}{visible(line)}\n"
                   for line in lines.splitlines())
