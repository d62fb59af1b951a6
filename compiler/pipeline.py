"""The whole way through: run files → load → validate → normalise → render → shape → check.

Writing is the caller's choice (cli.py), so that `validate`, `compile` and `compile --check`
share everything up to the scripts themselves. A run file whose script is unchanged since it
last compiled is reused (incremental.py); a large batch is built in two processes.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__, incremental
from .axolotl import ConfigError, config_problems, read_config
from .cache import Store, digest
from .cache import default_dir as cache_dir
from .check import check_scripts, find_shellcheck
from .diagnostics import Diagnostic, ObcError, field_path
from .load import CONFIG_FIELD, Mark, Source, display_name, load_source
from .lockfile import read_lock, unpinned_images
from .model import Job
from .normalise import attachment_fields, normalise
from .project import source_name
from .render import cache_templates, render_job
from .shape import shape_of
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
from .workers import map_files

RUN_FILE_SUFFIXES = (".yaml", ".yml")
SCRIPT_NAME = "job.sh"
# A job.sh is read by a person and checked by shellcheck, whose time and memory grow with it
# (about 1 s and 100 MB a MiB): 1 MiB of embedded files, the header and the steps fit.
MAX_SCRIPT_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Script:
    """A compiled job: where it goes under OUT, and its text.

    `job` is None for a script reused from the cache (incremental.py); `shape` is what
    shellcheck checks in its place (shape.py), None when it has none or needs none.
    """

    job_id: str
    text: str
    # The run file as diagnostics name it, as the script's header names it, and where its
    # id stands.
    file: str
    source_name: str
    id_mark: Mark
    job: Job | None = None
    shape: str | None = None

    @property
    def relative_path(self) -> str:
        return f"{self.job_id}/{SCRIPT_NAME}"


@dataclass(slots=True)
class Result:
    """The scripts of every valid input, and every problem found, sorted."""

    scripts: list[Script] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Options:
    """How `compile_files` compiles. `allowed` are resolved folders outside the projects whose
    files run files may read. With `lock`, the image tags it lists are rendered with their
    digests; `require_digests` then makes every image that is neither pinned nor locked a
    problem. Scripts are checked through their shapes, or each as written (`full_check`);
    `cache` says whether obc's cache is used."""

    allowed: tuple[Path, ...] = ()
    lock: Path | None = None
    require_digests: bool = False
    full_check: bool = False
    cache: bool = True


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


def compile_files(paths: Iterable[Path], out: Path | None = None,
                  options: Options = Options()) -> Result:
    """Compile every run file in `paths`; a file with problems yields diagnostics, no script.

    With `out`, the scripts are also checked with shellcheck, and named as under `out`.
    """
    result = Result()
    digests: dict[str, str] = {}
    if options.lock is not None:
        locked, result.diagnostics = read_lock(options.lock)
        digests = locked.digests
    cache_templates(cache_dir() if options.cache else None)
    pinned_by = options.lock if options.require_digests else None
    plan = _Plan(out is not None, options.full_check, options.allowed, digests, pinned_by,
                 _reuse(out, options, options.allowed, digests, pinned_by))
    built = map_files(functools.partial(_compile_one, plan), run_files(paths))
    for script, problems, _ in built:
        result.diagnostics += problems
        if script is not None:
            result.scripts.append(script)
    result.diagnostics += _duplicate_ids(result.scripts)
    if out is not None and not result.diagnostics:
        store = Store(cache_dir() if options.cache else None, "findings")
        result.diagnostics += check_scripts(
            [((out / s.relative_path).as_posix(), s.text, s.shape)
             for s in result.scripts if s.job is not None], store)  # a reused one passed
        if not result.diagnostics and plan.reuse is not None:
            for _, _, memo in built:
                if memo is not None:
                    incremental.remember(plan.reuse, *memo)  # checked clean: worth keeping
    result.diagnostics.sort()
    return result


@dataclass(frozen=True, slots=True)
class _Plan:
    """What each file's compile takes besides its path: whether to shape it, the folders it
    may read, the image lock (and whether images must be pinned), reuse of earlier scripts."""

    shapes: bool
    full_check: bool
    allowed: tuple[Path, ...]
    digests: Mapping[str, str]
    pinned_by: Path | None
    reuse: incremental.Reuse | None


def _reuse(out: Path | None, options: Options, *settings: object) -> incremental.Reuse | None:
    """Scripts are reused only where they are checked (compile, not validate), and only with
    the same obc, shellcheck and `settings` (what else decides what a run file compiles to)."""
    root = cache_dir() if options.cache else None
    if out is None or root is None:
        return None
    return incremental.Reuse(Store(root, "scripts"), digest(
        incremental.build_fingerprint(), __version__, find_shellcheck().key,
        repr(settings)), out)


# What to keep in the cache if the check passes: a key, and the record of the script.
Memo = tuple[str, dict] | None


def _compile_one(plan: _Plan, path: Path) -> tuple[Script | None, list[Diagnostic], Memo]:
    """Compile one run file: reused when unchanged, else built, rendered (and shaped)."""
    key = None
    if plan.reuse is not None:
        key, reused = incremental.lookup(plan.reuse, path, display_name(path),
                                         find_project(path, plan.allowed).root)
        if reused is not None and not plan.full_check:
            return Script(reused.job_id, reused.text, display_name(path), source_name(path),
                          Mark(reused.id_line, reused.id_column)), [], None
    source, job, problems = build_job(path, plan.digests, plan.allowed)
    if job is not None and plan.pinned_by is not None:
        problems += unpinned_images(source, job, plan.pinned_by)
    if job is None or problems:
        return None, problems, None
    text = render_job(job)
    problems = _script_size(source, text)
    if problems:
        return None, problems, None
    mark = source.mark(("id",))
    script = Script(job.id, text, source.file, job.source_file, mark, job,
                    shape_of(job, text) if plan.shapes and not plan.full_check else None)
    record = None if key is None else incremental.record(job.id, mark.line, mark.column, text,
                                                         source)
    return script, [], None if record is None else (key, record)


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
    return source, normalise(source_name(path), source.data, attachments, digests,
                             __version__), []


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
        if script.job_id in first:
            mark = script.id_mark
            problems.append(Diagnostic(script.file, mark.line, mark.column, "id",
                                       f"id '{script.job_id}' is also the id of "
                                       f"{first[script.job_id].file}; ids must be unique"))
        first.setdefault(script.job_id, script)
    return problems
