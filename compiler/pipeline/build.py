"""Stages 1 to 3 for one run file: load → expand → validate → normalise, into its jobs.

`compile`, `plan` and `validate` build jobs through pipeline.py, which renders them; `lock`
builds them only for their images.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from .. import __version__
from ..core.diagnostics import Diagnostic
from ..core.project import source_name
from ..core.text import quoted
from ..model.job import Job, SweepRun
from ..model.trainers import config_field, trainer_kind
from ..normalise import trainer
from ..normalise.normalise import attachment_fields, normalise
from ..normalise.stages import stage_jobs
from ..read.axolotl import (
    ConfigError,
    ConfigPlace,
    config_place,
    config_problems,
    read_config,
)
from ..read.llamafactory import LLAMAFACTORY_PATHS
from ..read.load import Source, display_name, load_source
from ..read.sources import (
    BudgetError,
    Embedding,
    Project,
    SourceError,
    check_inside,
    check_regular,
    find_project,
)
from ..read.trl import TRL_PATHS, trl_problems
from ..render.provenance import inputs_digest, lock_entry
from ..render.sweep import throttled
from ..sweep.expand import Expansion, expand
from ..sweep.rules import shared_folders
from ..validate import policy_rules, stage_rules, trainer_config
from ..validate.policy import Policy
from ..validate.validate import validate


@dataclass(slots=True)
class Built:
    """What one run file builds: its jobs (one, or a sweep's runs), each with the Source it
    was validated as, and its problems; for a sweep, the expansion that made the runs."""

    jobs: list[tuple[Source, Job]]
    problems: list[Diagnostic]
    sweep: Expansion | None = None


def build_jobs(path: Path, digests: Mapping[str, str], allowed: tuple[Path, ...] = (),
               policy: Policy | None = None) -> Built:
    """Load, expand, validate, normalise and judge (by the site `policy`) one run file;
    `digests` is the image lock. Without a policy the jobs are not judged (`obc lock` reads
    only their images; compile, plan and validate always judge, by obc's defaults at least)."""
    project = find_project(path, allowed)
    source, problems = _run_file_problems(project, path)
    if not problems:
        source, problems = load_source(path)
    sweep = None
    if not problems:
        sweep, problems = expand(source, Embedding(project))
    if problems:
        return Built([], problems)
    if sweep is None:
        job, problems = _build_job(source, project, source_name(path), digests, policy)
        # A job with stages on Slurm: its own script, then each stage's (normalise/stages.py).
        jobs = [] if job is None else [job, *stage_jobs(job)]
        return Built([(source, one) for one in jobs], problems)
    found = [(member, *_build_job(member.source, project, source_name(path), digests,
                                  policy, sweep=member.run))
             if member.source is not None else (member, None, member.problems)
             for member in sweep.members]
    runs = [(member, job) for member, job, _ in found if job is not None]
    problems = sweep.name_runs([(member, problems) for member, _, problems in found]) \
        or shared_folders(runs) or _sweep_policy(sweep, [job for _, job in runs], policy)
    return Built([] if problems else [(member.source, job) for member, job in runs],
                 problems, sweep)


def _build_job(  # noqa: PLR0913 -- a sweep's run is optional, and given by name
        source: Source, project: Project, name: str, digests: Mapping[str, str],
        policy: Policy | None, *,
        sweep: SweepRun | None = None) -> tuple[Job | None, list[Diagnostic]]:
    """Validate, normalise and judge one run (a run file, or one run of a sweep)."""
    problems = validate(source)
    if not problems and sweep is not None:
        problems = stage_rules.sweep_problems(source)
    if not problems:
        attachments, problems = _read_attachments(source, Embedding(project))
    if not problems and config_field(source.data) is not None:  # a trainer with a schema
        problems = _config_problems(source, attachments)
    if problems:
        return None, problems
    job = normalise(name, source.data, attachments, digests, __version__, sweep=sweep)
    problems = stage_rules.problems(source, job)
    if not problems and policy is not None:
        problems = [problem for one in (job, *stage_jobs(job))
                    for problem in policy_rules.problems(source, one, policy)]
    if problems:
        return None, problems
    field = config_field(source.data)
    if sweep is not None and sweep.config_file is not None and field is not None:
        # A config file a sweep patched is an input too, though not embedded as it is.
        attachments = {**attachments, field: Embedding(project).read(
            source.directory / sweep.config_file)}
    inputs = inputs_digest(source.sha256, attachments,
                           lock_entry(getattr(job.runtime, "image", None), digests))
    return replace(job, inputs=inputs), []


def _sweep_policy(sweep: Expansion, jobs: list[Job], policy: Policy | None) -> \
        list[Diagnostic]:
    """The sweep limits a sweep's runs break together, located at its id; max_parallel
    holds them back only when they go as one job array."""
    if policy is None:
        return []
    at_once = sweep.max_parallel if throttled(sweep, jobs) else None
    mark = sweep.id_mark
    return [Diagnostic(sweep.file, mark.line, mark.column, "matrix",
                       f"{v.asks} is not allowed by {policy.cite(v.rule)}", v.hint)
            for v in policy_rules.judge_sweep(jobs, at_once, policy)
            if not v.allowed]


def input_files(built: Built) -> list[str]:
    """The files a run file's jobs were built from besides itself, as it names them (relative
    to its folder): each run's embedded files, and the config files a sweep patched."""
    names = [relative for source, job in built.jobs
             for relative in [*(relative for _, relative in attachment_fields(source.data)),
                              *([job.sweep.config_file] if job.sweep and job.sweep.config_file
                                else [])]]
    return list(dict.fromkeys(names))


def _config_problems(source: Source, attachments: dict) -> list[Diagnostic]:
    """The trainer's config must be one its release of the trainer takes, and the files it
    names in the run dir must be ones the job puts there."""
    field = config_field(source.data)
    assert field is not None  # a trainer with a config
    config = source.data["trainer"][field[1]]["config"]
    name = display_name(source.directory / config) if isinstance(config, str) else ""
    where = config_place(source, attachments.get(field), name)
    embedded = list(source.data.get("files", {}))
    if field[1] == "trl":
        return [*trainer_config.problems(where), *config_problems(where, embedded, TRL_PATHS),
                *trl_problems(where)]
    if field[1] == "llamafactory":
        return [*trainer_config.problems(where),
                *config_problems(where, embedded, LLAMAFACTORY_PATHS),
                *_export_problems(source, attachments)]
    return [*trainer_config.problems(where), *config_problems(where, embedded)]


def _export_problems(source: Source, attachments: dict) -> list[Diagnostic]:
    """LLaMA-Factory's export config, which runs only after train, must be one its export
    takes (its paths may be what train makes, so they are not looked for)."""
    field = ("trainer", "llamafactory", "export")
    export = source.data["trainer"]["llamafactory"].get("export")
    if export is None:
        return []
    where = ConfigPlace(source, export, "", field) if isinstance(export, dict) else \
        ConfigPlace(source, read_config(attachments[field]),
                    display_name(source.directory / export), field)
    return trainer_config.problems(where, "export_keys")


def _run_file_problems(project: Project, path: Path) -> tuple[Source, list[Diagnostic]]:
    """A run file too is read only from inside its project, and only if it is a file."""
    source = Source(file=display_name(path), directory=path.parent)
    try:
        check_regular(check_inside(project, path))
    except SourceError as error:
        return source, [Diagnostic(source.file, 1, 1, "", f"this run file {error}", error.hint)]
    return source, []


def _read_attachments(source: Source, embedding: Embedding) -> tuple[dict, list[Diagnostic]]:
    attachments, problems = {}, []
    # The trainer's configs given as files (a script under torchrun is no YAML).
    configs = dict(trainer.attachment_fields(source.data)) \
        if config_field(source.data) is not None else {}
    for path, relative in attachment_fields(source.data):
        try:
            text = embedding.read(source.directory / relative)
            if path in configs:
                read_config(text, trainer_kind(source.data))
            attachments[path] = text
        except ConfigError as error:  # located in the config file itself
            problems.append(Diagnostic(display_name(source.directory / relative),
                                       error.mark.line, error.mark.column, "", str(error),
                                       error.hint))
        except ValueError as error:
            problems.append(source.problem(path, f"file {quoted(relative)}: {error}",
                                           getattr(error, "hint", None)))
            if isinstance(error, BudgetError):
                break  # read nothing more of a run file that embeds too much
    return attachments, problems
