"""The rules of a sweep as a whole, which no single run can break: run ids that are valid and
distinct, and a run dir and a trainer's output_dir of each run's own."""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterable, Iterator
from typing import Any

from ..core.diagnostics import Diagnostic, show
from ..core.text import quoted
from ..model.job import Job
from ..model.trainers import trainer_kind
from ..read.axolotl import ConfigError
from ..read.config_files import load_as_trainer
from ..read.load import Path_, Source
from ..validate.rules import AXOLOTL_CONFIG_NAME
from .matrix import MATRIX, Matrix, Member

ID = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}", re.ASCII)
ID_HINT = "use shorter labels, or an id template (matrix.id)"


def id_problems(source: Source, matrix: Matrix, members: list[Member]) -> list[Diagnostic]:
    """Every run's id must be a valid id, its own, and not the sweep's (whose folder holds
    sweep.sh)."""
    template: Path_ = (*MATRIX, "id") if "id" in source.data["matrix"] else ("id",)
    problems = list(_invalid_ids(source, template, members))
    by_id: dict[str, list[Member]] = {}
    for member in members:
        by_id.setdefault(member.id, []).append(member)
    for run_id, same in by_id.items():
        where = _where(source, template, same[-1])
        if len(same) > 1:
            problems.append(where(f"runs {' and '.join(run_label(m) for m in same[:2])} both "
                                  f"get the id {quoted(run_id)}",
                                  "make the labels, or matrix.id, tell them apart"))
        if run_id == source.data["id"]:
            problems.append(where(f"run {run_label(same[0])} gets the sweep's own id "
                                  f"{quoted(run_id)}, whose folder holds sweep.sh", ID_HINT))
    return problems


def _invalid_ids(source: Source, template: Path_, members: list[Member]) -> Iterator[Diagnostic]:
    bad = [member for member in members if not ID.fullmatch(member.id)]
    if bad:
        worst = max(bad, key=lambda member: len(member.id))
        which = f"{len(bad)} runs get ids that are not valid, such as run" if len(bad) > 1 \
            else "run"
        yield _where(source, template, worst)(
            f"{which} {run_label(worst)}: {show(worst.id, 80)} ({len(worst.id)} characters); "
            "an id is 1 to 63 lowercase letters, digits, '_', '.' or '-', starting with a "
            "letter or digit", ID_HINT)


def _where(source: Source, template: Path_, member: Member):
    """Place a problem of `member`'s id: at a named run's name, else at the id template."""
    path = (*MATRIX, "runs", member.name) if member.name is not None else template
    return functools.partial(source.problem, path, key=member.name is not None)


def run_label(member: Member) -> str:
    """A run by its labels (`model=qwen lr=1e-4`), or a named run by its name."""
    if member.name is not None:
        return f"runs.{member.name}"
    return " ".join(f"{axis}={label}" for axis, label in member.labels)


def shared_folders(runs: Iterable[tuple[Member, Job]]) -> list[Diagnostic]:
    """Runs that would write to one folder: the same run dir, or the same absolute Axolotl
    output_dir (a relative one is in each run's own run dir), however each is written."""
    run_dirs: dict[str, list[tuple[Member, str]]] = {}
    outputs: dict[str, list[tuple[Member, str]]] = {}
    for member, job in runs:
        run_dirs.setdefault(folder_key(job.run_dir), []).append((member, job.run_dir))
        output = _output_dir(job)
        if isinstance(output, str) and output.startswith(("/", "~", "${")):
            outputs.setdefault(folder_key(output), []).append((member, output))
    problems = [_shared(same, ("paths", "run_dir"), "share the run dir {}", run_dir,
                        "leave paths.run_dir to its default (~/overbrainer/runs/<id>), or "
                        "set it in an axis")
                for run_dir, same in run_dirs.items() if len(same) > 1]
    problems += [_shared(same, _output_dir_field(same), "write their output_dir to one "
                         "folder, {} on the machine", output,
                         "make it relative: each run has its own run dir")
                 for output, same in outputs.items() if len(same) > 1]
    return problems


def folder_key(path: str) -> str:
    """Return the folder `path` names, as sweeps compare folders: `~` as ${HOME}, then `.`,
    `..` and repeated or trailing slashes resolved as text. Links on the machine are not seen
    (`a/..` is taken for the folder `a` is in, so two spellings are at worst refused)."""
    if path == "~" or path.startswith("~/"):
        path = "${HOME}" + path[1:]
    normal = posixpath.normpath(path)
    # POSIX leaves a leading `//` to the system; on Linux it is `/`.
    return "/" + normal.lstrip("/") if normal.startswith("//") else normal


def _shared(same: list[tuple[Member, str]], path: Path_, what: str, folder: str,
            hint: str) -> Diagnostic:
    """One problem for the runs in `same`: `what` they do, with {} for the folder, and each
    way the runs write it when that is not the folder as shown."""
    first = same[0][0]
    assert first.source is not None
    names = ", ".join(member.id for member, _ in same[:3])
    more = f" and {len(same) - 3} more" if len(same) > 3 else ""
    spellings = list(dict.fromkeys(written for _, written in same))
    written = f" (written {', '.join(map(show, spellings[:3]))})" \
        if spellings != [folder] else ""
    return first.source.problem(path, f"runs {names}{more} {what.format(show(folder))}"
                                f"{written}; each run of a sweep needs its own", hint)


def _output_dir_field(same: list[tuple[Member, str]]) -> Path_:
    """Where the first of the runs that share an output_dir says it: its trainer's field."""
    source = same[0][0].source
    assert source is not None
    kind = trainer_kind(source.data)
    assert kind is not None  # only a trainer has an output_dir
    return kind.output_dir_field


def _output_dir(job: Job) -> Any:
    """Where train writes on the machine: a mount's source, or a path of the machine (the
    run dir's own is None), as normalise found it; or, for a job that neither resumes nor
    checkpoints on a signal, the config's absolute output_dir as written."""
    if job.checkpoints is not None:
        folder = job.checkpoints
        return None if folder.host_base is None else \
            posixpath.join(folder.host_base, folder.host_rest)
    config = next((f for f in job.files if f.path == AXOLOTL_CONFIG_NAME), None)
    if config is None:
        return None
    try:
        data = load_as_trainer(config.content)
    except ConfigError:
        return None  # Axolotl will say so; obc has nothing to compare
    return data.get("output_dir") if isinstance(data, dict) else None
