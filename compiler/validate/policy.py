"""The site policy: what an admin allows the jobs of a cluster, written once in
`obc-policy.yaml` (docs/slurm.md, "Site policy"); policy_rules.py judges each job by it.

A project's policy is `obc-policy.yaml` at its root (sources.py: the git work tree, or the run
file's folder); `obc --policy PATH` names one for every run file, which may be outside the
repository. It is read as obc reads every file it is given: a regular file of its own project,
bounded, checked before it is opened, parsed as strictly as a run file and validated by its
own JSON Schema (schemas/policy.schema.json). Without one, obc's built-in defaults apply: the
sbatch allow-list of slurm.extra, and nothing else.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ..core.diagnostics import Diagnostic, did_you_mean
from ..core.resources import data_dir
from ..read.load import MAX_FILE_BYTES, Source, display_name, parse_source
from ..read.sources import SourceError, TooLargeError, find_project, read_inside
from .rules.sbatch_options import SBATCH_DEFAULT_ALLOWED

POLICY_NAME = "obc-policy.yaml"
BUILT_IN = "obc's built-in sbatch allow-list (docs/security.md)"


@dataclass(frozen=True, slots=True)
class Limits:
    """The most a job (or a sweep) may ask for; None where the policy says nothing."""

    max_time: str | None = None
    max_nodes: int | None = None
    max_gpus: int | None = None
    max_gpu_hours: float | None = None


@dataclass(frozen=True, slots=True)
class Policy:
    """A site policy; None where it says nothing. `places` says where each rule is written
    (`FILE:LINE:COL`), which every diagnostic that names the rule cites."""

    file: str | None = None
    partitions: tuple[str, ...] | None = None
    accounts: tuple[str, ...] | None = None
    qos: tuple[str, ...] | None = None
    job: Limits = Limits()
    sweep: Limits = Limits()
    allowed: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    runtimes: tuple[str, ...] | None = None
    registries: tuple[str, ...] | None = None
    shared_run_dirs: bool = True
    places: tuple[tuple[str, str], ...] = ()

    def allows_option(self, name: str) -> bool:
        return name not in self.refused and (name in SBATCH_DEFAULT_ALLOWED
                                             or name in self.allowed)

    def cite(self, rule: str) -> str:
        """Name a rule and where it is written: `partitions (obc-policy.yaml:3:1)`."""
        place = dict(self.places).get(rule)
        built_in = f"{BUILT_IN} or " if rule == "sbatch.allowed" else ""
        if place is None:
            return BUILT_IN if built_in else f"{rule} (obc's default)"
        return f"{built_in}site policy rule {rule} ({place})"


# A project without obc-policy.yaml: its fields say nothing, so obc's built-in rules alone apply.
NO_POLICY = Policy()


def policy_for(named: Path | None, run_file: Path,
               allowed: tuple[Path, ...] = ()) -> tuple[Policy, list[Diagnostic]]:
    """The policy `run_file` is judged by: the one named (`--policy`), else its project's
    obc-policy.yaml, else obc's defaults."""
    if named is not None:
        return read_policy(named, allowed)
    found = find_project(run_file, allowed).root / POLICY_NAME
    return read_policy(found, allowed) if os.path.lexists(found) else (NO_POLICY, [])


def read_policy(path: Path, allowed: tuple[Path, ...] = ()) -> tuple[Policy, list[Diagnostic]]:
    """Read, parse and validate the policy file at `path`; its problems, located in it."""
    name = display_name(path)
    try:
        data = read_inside(find_project(path, allowed), path, MAX_FILE_BYTES)
    except SourceError as error:
        limit = f"; a policy file holds at most {MAX_FILE_BYTES:,} bytes" \
            if isinstance(error, TooLargeError) else ""
        return NO_POLICY, [Diagnostic(name, 1, 1, "", f"this policy file {error}{limit}",
                                           error.hint)]
    source, problems = parse_source(Source(file=name, directory=path.parent), data)
    if not problems:
        problems = _schema_problems(source)
    if problems:
        return NO_POLICY, problems
    return _policy(source), []


def _schema_problems(source: Source) -> list[Diagnostic]:
    from jsonschema import Draft7Validator  # noqa: PLC0415 -- slow to import, needed here only

    hint = "see schemas/policy.schema.json and docs/slurm.md, \"Site policy\""
    problems = []
    for error in Draft7Validator(_schema()).iter_errors(source.data):
        path = tuple(error.absolute_path)
        if error.validator == "additionalProperties":  # at each key it does not know
            known = error.schema["properties"]
            problems += [source.problem((*path, key), "not a rule of a site policy"
                                        + did_you_mean(key, known), hint, key=True)
                         for key in error.instance if key not in known]
        else:
            problems.append(source.problem(path, error.message, hint))
    return sorted(problems)


@cache
def _schema() -> dict[str, Any]:
    return json.loads((data_dir("schemas") / "policy.schema.json").read_text(encoding="utf-8"))


def _policy(source: Source) -> Policy:
    data = source.data
    sbatch = data.get("sbatch", {})
    names = ("partitions", "accounts", "qos", "runtimes", "registries")
    rules = [(key,) for key in (*names, "shared_run_dirs") if key in data]
    rules += [(block, key) for block in ("job", "sweep", "sbatch")
              for key in data.get(block, {})]
    places = tuple((".".join(path), _place(source, path)) for path in rules)
    return Policy(
        source.file,
        **{key: tuple(data[key]) for key in names if key in data},
        job=Limits(**data.get("job", {})), sweep=Limits(**data.get("sweep", {})),
        allowed=tuple(sbatch.get("allowed", ())), refused=tuple(sbatch.get("refused", ())),
        required=tuple(sbatch.get("required", ())),
        shared_run_dirs=data.get("shared_run_dirs", True), places=places)


def _place(source: Source, path: tuple[str, ...]) -> str:
    mark = source.mark(path, key=True)
    return f"{source.file}:{mark.line}:{mark.column}"
