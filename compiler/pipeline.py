"""The whole way through: run files → load → validate → normalise → render → check.

Writing is the caller's choice (cli.py), so that `validate`, `compile` and `compile --check`
share everything up to the scripts themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import __version__
from .axolotl import ConfigError, config_problems, read_config
from .check import check_scripts
from .diagnostics import Diagnostic, ObcError, field_path
from .expand import Expansion, expand
from .load import CONFIG_FIELD, Mark, Source, display_name, load_source
from .lockfile import read_lock, unpinned_images
from .model import Job, SweepRun
from .normalise import attachment_fields, normalise
from .project import source_name
from .provenance import inputs_digest, lock_entry
from .render import render_job, render_sweep
from .sources import (
    BudgetError,
    Embedding,
    Project,
    SourceError,
    check_inside,
    check_regular,
    find_project,
)
from .sweep import RUNS_TABLE, SWEEP_SCRIPT, SweepFile, build_sweep, runs_table
from .sweep_rules import shared_folders
from .validate import validate

RUN_FILE_SUFFIXES = (".yaml", ".yml")
SCRIPT_NAME = "job.sh"
SCRIPT_MODE, TABLE_MODE = 0o755, 0o644
# A job.sh is read by a person and checked by shellcheck, whose time and memory grow with it
# (about 1 s and 100 MB a MiB): 1 MiB of embedded files, the header and the steps fit.
MAX_SCRIPT_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Script:
    """A compiled job: where it goes under OUT, and its text."""

    job: Job
    text: str
    # The run file as diagnostics name it, and where its id stands.
    file: str
    id_mark: Mark
    mode = SCRIPT_MODE

    @property
    def relative_path(self) -> str:
        return f"{self.job.id}/{SCRIPT_NAME}"

    @property
    def source_file(self) -> str:
        return self.job.source_file

    @property
    def folder(self) -> str:
        return self.job.id


@dataclass(slots=True)
class Result:
    """The scripts of every valid input, the files of its sweeps, and every problem found,
    sorted."""

    scripts: list[Script] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sweeps: list[SweepFile] = field(default_factory=list)

    @property
    def outputs(self) -> list[Script | SweepFile]:
        """Every file to write under OUT."""
        return [*self.scripts, *self.sweeps]


@dataclass(slots=True)
class Built:
    """What one run file builds: its jobs (one, or a sweep's runs), each with the Source it
    was validated as, and its problems; for a sweep, the expansion that made the runs."""

    jobs: list[tuple[Source, Job]]
    problems: list[Diagnostic]
    sweep: Expansion | None = None


def run_files(paths: Iterable[Path]) -> list[Path]:
    """Expand the command line's paths: files as given, folders to their *.yaml and *.yml."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in _folder_entries(path)
                            if p.suffix in RUN_FILE_SUFFIXES and p.is_file())
            if not inside:
                raise ObcError(f"{path}: no *.yaml or *.yml run files in this folder")
            found += inside
        elif path.exists():
            found.append(path)
        else:
            raise ObcError(f"{path}: no such file or folder")
    return list(dict.fromkeys(found))


def _folder_entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError as error:
        raise ObcError(f"{display_name(folder)}: cannot read this folder: "
                       f"{error.strerror or error}") from error


def compile_files(paths: Iterable[Path], out: Path | None = None, *,
                  allowed: tuple[Path, ...] = (), lock: Path | None = None,
                  require_digests: bool = False) -> Result:
    """Compile every run file in `paths`; a file with problems yields diagnostics, no script.

    With `out`, the scripts are also checked with shellcheck, and named as under `out`.
    `allowed` are resolved folders outside the projects whose files run files may read. With
    `lock`, the image tags it lists are rendered with their digests; `require_digests` then
    makes every image that is neither pinned nor locked a problem.
    """
    result = Result()
    digests: dict[str, str] = {}
    if lock is not None:
        locked, result.diagnostics = read_lock(lock)
        digests = locked.digests
    for path in run_files(paths):
        built = build_jobs(path, digests, allowed)
        result.diagnostics += built.problems
        scripts = []
        for source, job in built.jobs:
            if lock is not None and require_digests:
                result.diagnostics += unpinned_images(source, job, lock)
            text = render_job(job)
            problems = _script_size(source, job, text)
            result.diagnostics += problems
            if not problems:
                scripts.append(Script(job, text, source.file, source.mark(("id",))))
        result.scripts += scripts
        if built.sweep is not None and built.jobs and len(scripts) == len(built.jobs):
            result.sweeps += sweep_files(built.sweep, scripts)
    result.diagnostics += _duplicate_ids(result.outputs)
    if out is not None and not result.diagnostics:
        result.diagnostics += check_scripts(
            {(out / s.relative_path).as_posix(): s.text for s in result.outputs
             if s.mode == SCRIPT_MODE})
    # A sweep's runs can share a problem of their run file (an unpinned image): once.
    result.diagnostics = sorted(set(result.diagnostics))
    return result


def build_jobs(path: Path, digests: Mapping[str, str], allowed: tuple[Path, ...] = ()) -> Built:
    """Load, expand, validate and normalise one run file; `digests` is the image lock."""
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
        job, problems = _build_job(source, project, source_name(path), digests)
        return Built([(source, job)] if job is not None else [], problems)
    found = [(member, *_build_job(member.source, project, source_name(path), digests,
                                  member.run))
             if member.source is not None else (member, None, member.problems)
             for member in sweep.members]
    runs = [(member, job) for member, job, _ in found if job is not None]
    problems = sweep.name_runs([(member, problems) for member, _, problems in found]) \
        or shared_folders(runs)
    return Built([] if problems else [(member.source, job) for member, job in runs],
                 problems, sweep)


def _build_job(source: Source, project: Project, name: str, digests: Mapping[str, str],
               sweep: SweepRun | None = None) -> tuple[Job | None, list[Diagnostic]]:
    """Validate and normalise one run (a run file, or one run of a sweep)."""
    problems = validate(source)
    if not problems:
        attachments, problems = _read_attachments(source, Embedding(project))
    if not problems and "trainer" in source.data:
        problems = _config_problems(source, attachments)
    if problems:
        return None, problems
    job = normalise(name, source.data, attachments, digests, __version__, sweep=sweep)
    if sweep is not None and sweep.config_file is not None:
        # A config file a sweep patched is an input too, though not embedded as it is.
        attachments = {**attachments, CONFIG_FIELD: Embedding(project).read(
            source.directory / sweep.config_file)}
    inputs = inputs_digest(source.sha256, attachments, lock_entry(source.data, digests))
    return replace(job, inputs=inputs), []


def sweep_files(expansion: Expansion, scripts: list[Script]) -> list[SweepFile]:
    """sweep.sh and runs.tsv of a sweep whose runs compiled to `scripts`."""
    sweep = build_sweep(expansion, [s.job for s in scripts], [s.text for s in scripts])
    return [SweepFile(sweep, name, text, mode, expansion.file, expansion.id_mark)
            for name, text, mode in ((SWEEP_SCRIPT, render_sweep(sweep), SCRIPT_MODE),
                                     (RUNS_TABLE, runs_table(sweep), TABLE_MODE))]


def _config_problems(source: Source, attachments: dict) -> list[Diagnostic]:
    """The files the Axolotl config names in the run dir must be ones the job puts there."""
    config = source.data["trainer"]["axolotl"]["config"]
    name = display_name(source.directory / config) if isinstance(config, str) else ""
    embedded = list(source.data.get("files", {}))
    return list(config_problems(source, attachments.get(CONFIG_FIELD), name, embedded))


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
    for path, relative in attachment_fields(source.data):
        try:
            text = embedding.read(source.directory / relative)
            if path == CONFIG_FIELD:
                read_config(text)
            attachments[path] = text
        except ConfigError as error:  # located in the config file itself
            problems.append(Diagnostic(display_name(source.directory / relative),
                                       error.mark.line, error.mark.column, "", str(error),
                                       error.hint))
        except ValueError as error:
            mark = source.mark(path)
            problems.append(Diagnostic(source.file, mark.line, mark.column, field_path(path),
                                       f"file {relative!r}: {error}",
                                       getattr(error, "hint", None)))
            if isinstance(error, BudgetError):
                break  # read nothing more of a run file that embeds too much
    return attachments, problems


def _script_size(source: Source, job: Job, text: str) -> list[Diagnostic]:
    size = len(text.encode("utf-8"))
    if size <= MAX_SCRIPT_BYTES:
        return []
    which = f"run {job.id}" if job.sweep is not None else "this run file"
    return [Diagnostic(source.file, 1, 1, "", f"the job.sh of {which} would be "
                       f"{size:,} bytes; obc writes at most {MAX_SCRIPT_BYTES:,} (2 MiB)",
                       "embed less, and shorten the longest values (each step's command "
                       "is shown in the header and in --help as well)")]


def _duplicate_ids(outputs: list[Script | SweepFile]) -> list[Diagnostic]:
    """Two run files whose ids (a script's, a sweep's) name one folder under OUT."""
    first: dict[str, Script | SweepFile] = {}
    problems = []
    for output in outputs:
        if output.relative_path.endswith(f"/{RUNS_TABLE}"):
            continue  # its folder is its sweep.sh's
        folder = output.folder
        if folder in first and first[folder].file != output.file:
            mark = output.id_mark
            problems.append(Diagnostic(output.file, mark.line, mark.column, "id",
                                       f"id '{folder}' is also the id of "
                                       f"{first[folder].file}; ids must be unique"))
        first.setdefault(folder, output)
    return problems
