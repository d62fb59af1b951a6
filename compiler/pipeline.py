"""The whole way through: run files → load → validate → normalise → render → check.

Writing is the caller's choice (cli.py), so that `validate`, `compile` and `compile --check`
share everything up to the scripts themselves.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .check import check_scripts
from .diagnostics import Diagnostic, ObcError, field_path
from .load import Mark, Source, load_source, parse_mapping, read_attachment
from .model import Job
from .normalise import CONFIG_FIELD, attachment_fields, normalise
from .project import source_name
from .render import render_job
from .validate import validate

RUN_FILE_SUFFIXES = (".yaml", ".yml")
SCRIPT_NAME = "job.sh"


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
            inside = sorted(p for p in path.iterdir()
                            if p.suffix in RUN_FILE_SUFFIXES and p.is_file())
            if not inside:
                raise ObcError(f"{path}: no *.yaml or *.yml run files in this folder")
            found += inside
        elif path.exists():
            found.append(path)
        else:
            raise ObcError(f"{path}: no such file or folder")
    return list(dict.fromkeys(found))


def compile_files(paths: Iterable[Path], out: Path | None = None) -> Result:
    """Compile every run file in `paths`; a file with problems yields diagnostics, no script.

    With `out`, the scripts are also checked with shellcheck, and named as under `out`.
    """
    result = Result()
    for path in run_files(paths):
        source, job, problems = build_job(path)
        result.diagnostics += problems
        if job is not None:
            result.scripts.append(Script(job, render_job(job), source.file,
                                         source.mark(("id",))))
    result.diagnostics += _duplicate_ids(result.scripts)
    if out is not None and not result.diagnostics:
        result.diagnostics += check_scripts(
            {(out / s.relative_path).as_posix(): s.text for s in result.scripts})
    result.diagnostics.sort()
    return result


def build_job(path: Path) -> tuple[Source, Job | None, list[Diagnostic]]:
    """Load, validate and normalise one run file."""
    source, problems = load_source(path)
    if not problems:
        problems = validate(source)
    if not problems:
        attachments, problems = _read_attachments(source)
    if problems:
        return source, None, problems
    return source, normalise(source_name(path), source.data, attachments, __version__), []


def _read_attachments(source: Source) -> tuple[dict, list[Diagnostic]]:
    attachments, problems = {}, []
    for path, relative in attachment_fields(source.data):
        try:
            text = read_attachment(source, relative)
            if path == CONFIG_FIELD:
                parse_mapping(text)
            attachments[path] = text
        except (OSError, ValueError) as error:
            reason = error.strerror if isinstance(error, OSError) else str(error)
            mark = source.mark(path)
            problems.append(Diagnostic(source.file, mark.line, mark.column,
                                       field_path(path),
                                       f"file {relative!r}: {reason}"))
    return attachments, problems


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
