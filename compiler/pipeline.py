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
from .load import CONFIG_FIELD, Mark, Source, display_name, load_source
from .lockfile import read_lock, unpinned_images
from .model import Job
from .normalise import attachment_fields, normalise
from .project import source_name
from .provenance import inputs_digest, lock_entry
from .render import render_job
from .sources import (
    BudgetError,
    Embedding,
    Project,
    SourceError,
    check_inside,
    check_regular,
    find_project,
)
from .validate import validate

RUN_FILE_SUFFIXES = (".yaml", ".yml")
SCRIPT_NAME = "job.sh"
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

    @property
    def relative_path(self) -> str:
        return f"{self.job.id}/{SCRIPT_NAME}"


@dataclass(slots=True)
class Result:
    """The scripts of every valid input, and every problem found, sorted."""

    scripts: list[Script] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


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
        source, job, problems = build_job(path, digests, allowed)
        if job is not None and lock is not None and require_digests:
            problems += unpinned_images(source, job, lock)
        result.diagnostics += problems
        if job is not None:
            text = render_job(job)
            problems = _script_size(source, text)
            result.diagnostics += problems
            if not problems:
                result.scripts.append(Script(job, text, source.file, source.mark(("id",))))
    result.diagnostics += _duplicate_ids(result.scripts)
    if out is not None and not result.diagnostics:
        result.diagnostics += check_scripts(
            {(out / s.relative_path).as_posix(): s.text for s in result.scripts})
    result.diagnostics.sort()
    return result


def build_job(path: Path, digests: Mapping[str, str], allowed: tuple[Path, ...] = ()) -> \
        tuple[Source, Job | None, list[Diagnostic]]:
    """Load, validate and normalise one run file; `digests` is the image lock."""
    project = find_project(path, allowed)
    source, problems = _run_file_problems(project, path)
    if not problems:
        source, problems = load_source(path)
    if not problems:
        problems = validate(source)
    if not problems:
        attachments, problems = _read_attachments(source, Embedding(project))
    if not problems and "trainer" in source.data:
        problems = _config_problems(source, attachments)
    if problems:
        return source, None, problems
    job = normalise(source_name(path), source.data, attachments, digests, __version__)
    inputs = inputs_digest(source.sha256, attachments, lock_entry(source.data, digests))
    return source, replace(job, inputs=inputs), []


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


def _script_size(source: Source, text: str) -> list[Diagnostic]:
    size = len(text.encode("utf-8"))
    if size <= MAX_SCRIPT_BYTES:
        return []
    return [Diagnostic(source.file, 1, 1, "", f"the job.sh of this run file would be "
                       f"{size:,} bytes; obc writes at most {MAX_SCRIPT_BYTES:,} (2 MiB)",
                       "embed less, and shorten the longest values (each step's command "
                       "is shown in the header and in --help as well)")]


def _duplicate_ids(scripts: list[Script]) -> list[Diagnostic]:
    first: dict[str, Script] = {}
    problems = []
    for script in scripts:
        job = script.job
        if job.id in first:
            mark = script.id_mark
            problems.append(Diagnostic(script.file, mark.line, mark.column, "id",
                                       f"id '{job.id}' is also the id of "
                                       f"{first[job.id].file}; ids must be unique"))
        first.setdefault(job.id, script)
    return problems
