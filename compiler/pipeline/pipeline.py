"""The whole way through: run files → build (build.py: load, expand, validate, normalise) →
render → shape → check.

Writing is the caller's choice (cli/main.py), so that `validate`, `compile`, `compile --check` and
`plan` share everything up to the scripts themselves. A run file whose files are unchanged
since it last compiled is reused (incremental.py); a large batch is built in two processes,
a chunk of files at a time. `compile` settles each chunk's files where they were made (it
compares them with OUT and stages them there), so that only small facts of each run come
back and memory does not grow with the number of runs.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from .. import __version__
from ..check.shellcheck import Checked, Seen, check_scripts, find_shellcheck
from ..core.cache import Location, Store, digest, private_location
from ..core.diagnostics import Diagnostic, ObcError
from ..core.project import one_tree
from ..core.workers import in_worker, map_chunks
from ..model.job import Job
from ..read.load import Mark, Source, display_name
from ..read.lockfile import read_lock, unpinned_images
from ..read.sources import find_project
from ..render.render import cache_templates, render_job, render_submit, render_sweep
from ..render.shape import script_and_shape
from ..render.stages import SubmitFile, build_submit
from ..render.sweep import RUNS_TABLE, SWEEP_SCRIPT, Sweep, SweepFile, build_sweep, runs_table
from ..sweep.expand import Expansion
from ..validate.policy import Policy, policy_for
from ..validate.policy_rules import Judgement, judge, judge_sweep
from . import incremental
from .build import Built, build_jobs, input_files

RUN_FILE_SUFFIXES = (".yaml", ".yml")
SCRIPT_NAME = "job.sh"
SCRIPT_MODE, TABLE_MODE = 0o755, 0o644
# A job.sh is read by a person and checked by shellcheck, whose time and memory grow with it
# (about 1 s and 100 MB a MiB): 1 MiB of embedded files, the header and the steps fit.
MAX_SCRIPT_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Script:
    """A compiled job: where it goes under OUT, its text, and its shape (shape.py), which
    shellcheck checks in its place; None to check the text itself."""

    job: Job
    text: str
    # The run file as diagnostics name it, and where its id stands.
    file: str
    id_mark: Mark
    shape: str | None = None
    # The site policy's verdicts on the job (policy_rules.py), which `obc plan` shows.
    judgement: Judgement | None = None
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


@dataclass(frozen=True, slots=True)
class Placed:
    """Where a compiled file goes under OUT and which run file made it: all that is kept of a
    file once it is settled (see compile_files)."""

    relative_path: str
    file: str
    source_file: str
    id_mark: Mark
    # Where it stands among the outputs (see Result.outputs): 0 a job.sh built now, 1 a file
    # of a sweep built now, 2 a file reused.
    rank: int

    @property
    def folder(self) -> str:
        return self.relative_path.split("/")[0]


# What becomes of a chunk's files once they are checked: compared with OUT (and, for
# `compile`, staged there), done where they were made (changes.Settle); each file's outcome.
Settle = Callable[[list[Any]], list[Any]]


@dataclass(slots=True)
class Result:
    """The scripts of every valid input, the files of its sweeps, the files reused as they
    compiled last time (incremental.py), every problem found, sorted, what is worth a
    warning (it does not stop the compile), and why obc's cache was not used, if it was
    refused. Files that were settled are not kept: `settled` holds what settling made of
    them, in the order of `placed`."""

    scripts: list[Script] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    # The files of its sweeps, and the submit.sh of a job with stages.
    sweeps: list[SweepFile | SubmitFile] = field(default_factory=list)
    reused: list[incremental.Reused] = field(default_factory=list)
    cache_refused: str = ""
    placed: list[Placed] = field(default_factory=list)
    settled: list[Any] = field(default_factory=list)
    # shellcheck's findings, which count only if the inputs have no other problem.
    findings: list[Diagnostic] = field(default_factory=list)

    @property
    def outputs(self) -> list[Script | SweepFile | SubmitFile | incremental.Reused]:
        """Every file to write under OUT."""
        return [*self.scripts, *self.sweeps, *self.reused]


@dataclass(frozen=True, slots=True)
class Options:
    """How `compile_files` compiles. `allowed` are resolved folders outside the projects whose
    files run files may read. With `lock`, the image tags it lists are rendered with their
    digests; `require_digests` then makes every image that is neither pinned nor locked a
    problem. Scripts are checked through their shapes, or each as written (`full_check`);
    `cache` says whether obc's cache is used. `policy` names the site policy (policy.py) of
    every run file; without, each is judged by its project's obc-policy.yaml, if any."""

    allowed: tuple[Path, ...] = ()
    policy: Path | None = None
    lock: Path | None = None
    require_digests: bool = False
    full_check: bool = False
    cache: bool = True


def run_files(paths: Iterable[Path]) -> list[Path]:
    """Expand the command line's paths: files as given, folders to their *.yaml and *.yml."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            # By name, which is a path's order within one folder, not by Path's comparison,
            # which makes each path's parts again at every step of the sort. The listing
            # says which entries are files: no stat for each of ten thousand.
            inside = sorted((Path(entry.path) for entry in _folder_entries(path)
                             if entry.is_file() and PurePath(entry.name).suffix
                             in RUN_FILE_SUFFIXES),
                            key=lambda p: p.name)
            if not inside:
                raise ObcError(f"{path}: no *.yaml or *.yml run files in this folder")
            found += inside
        elif path.exists():
            found.append(path)
        else:
            raise ObcError(f"{path}: no such file or folder")
    return list(dict.fromkeys(found))


def _folder_entries(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except OSError as error:
        raise ObcError(f"{display_name(folder)}: cannot read this folder: "
                       f"{error.strerror or error}") from error


@one_tree()
def compile_files(paths: Iterable[Path], out: Path | None = None,
                  options: Options = Options(), settle: Settle | None = None) -> Result:
    """Compile every run file in `paths`; a file with problems yields diagnostics, no script.

    With `out`, the scripts are also checked with shellcheck, named as under `out`, and
    those of unchanged run files reused from it; without, every job is built (obc plan
    needs them). With `settle`, each chunk's files, once checked, are settled where they
    were made and not kept: the result has where each goes (`placed`) and what `settle`
    made of it (`settled`), in the order of `outputs`.
    """
    result = Result()
    digests: dict[str, str] = {}
    if options.lock is not None:
        locked, result.diagnostics = read_lock(options.lock, options.allowed)
        digests = locked.digests
    cache = private_location() if options.cache else Location(None)
    root, result.cache_refused = cache.folder, cache.refused
    cache_templates(root)
    pinned_by = options.lock if options.require_digests else None
    files = run_files(paths)
    setup = _Setup(out, out is not None and not options.full_check, options.full_check,
                   options.allowed, options.policy, digests, pinned_by,
                   _reuse(out, root, options.allowed, digests, pinned_by),
                   Store(root, "findings"), settle)
    for one in map_chunks(functools.partial(_compile_chunk, setup), files):
        for name in ("scripts", "sweeps", "reused", "diagnostics", "warnings", "placed",
                     "settled", "findings"):
            getattr(result, name).extend(getattr(one, name))
    # In the order of `outputs`: built scripts, built sweep files, reused files.
    order = sorted(range(len(result.placed)), key=lambda i: result.placed[i].rank)
    result.placed = [result.placed[i] for i in order]
    if len(result.settled) == len(result.placed):  # else a chunk had problems: discarded
        result.settled = [result.settled[i] for i in order]
    # Every job.sh, then the sweeps' files, each in the order of the run files, reused or not.
    result.diagnostics += _duplicate_ids(sorted(result.placed, key=lambda o: not _is_script(o)))
    if not result.diagnostics:
        result.diagnostics += result.findings
    # A sweep's runs can share a problem of their run file (an unpinned image): once.
    result.diagnostics = sorted(set(result.diagnostics))
    return result


def _is_script(output: Placed) -> bool:
    return output.relative_path.endswith(f"/{SCRIPT_NAME}")


@dataclass(frozen=True, slots=True)
class _Setup:
    """What each file's compile takes besides its path: where its scripts go (None: they are
    not checked), whether to shape them, whether to check them all as written, the folders
    it may read, the site policy named, the image lock (and whether images must be pinned),
    reuse of earlier outputs, where findings are kept, and what becomes of the checked
    files."""

    out: Path | None
    shapes: bool
    full_check: bool
    allowed: tuple[Path, ...]
    policy: Path | None
    digests: Mapping[str, str]
    pinned_by: Path | None
    reuse: incremental.Reuse | None
    findings: Store
    settle: Settle | None
    # The findings of the texts checked so far (in this process: a worker has its own).
    seen: Seen = field(default_factory=dict)


def _reuse(out: Path | None, root: Path | None, *settings: object) -> incremental.Reuse | None:
    """Outputs are reused only where they are checked (compile, not validate or plan), from
    the cache at `root`, and only with the same obc, shellcheck and `settings` (what else
    decides what a run file compiles to)."""
    if out is None or root is None:
        return None
    return incremental.Reuse(Store(root, "outputs"), digest(
        incremental.build_fingerprint(), __version__, find_shellcheck().key,
        repr(settings)))


# What to keep in the cache if the check passes: a key, and the record of the outputs.
Memo = tuple[str, dict] | None


def _compile_chunk(setup: _Setup, paths: list[Path]) -> list[Result]:
    """Compile a chunk of run files; if their scripts go to OUT and the chunk has no other
    problem, check them, keep the records of the run files (if all passed) and settle their
    files."""
    compiled = [_compile_one(setup, path) for path in paths]
    results = [one for one, _ in compiled]
    for one in results:
        one.placed = [Placed(o.relative_path, o.file, o.source_file, o.id_mark, rank)
                      for rank, group in enumerate((one.scripts, one.sweeps, one.reused))
                      for o in group]
    if setup.out is None or any(one.diagnostics for one in results):
        return results
    scripts = [checked for one in results for checked in _to_check(setup.out, one)]
    results[0].findings = check_scripts(scripts, setup.findings, parallel=not in_worker(),
                                        seen=setup.seen)
    if setup.reuse is not None and not results[0].findings:
        for _, memo in compiled:
            if memo is not None:
                setup.reuse.store.put(*memo)  # checked clean: worth keeping
    if setup.settle is not None:
        for one in results:
            one.settled = setup.settle(one.outputs)
            one.scripts, one.sweeps, one.reused = [], [], []
    return results


def _compile_one(setup: _Setup, path: Path) -> tuple[Result, Memo]:
    """Compile one run file: reused when unchanged (its policy too), else built, judged by
    its policy, rendered (and shaped)."""
    policy, problems = policy_for(setup.policy, path, setup.allowed)
    if problems:
        return Result(diagnostics=problems), None
    key = None
    if setup.reuse is not None:
        key, reused = incremental.lookup(setup.reuse, path, find_project(path, setup.allowed).root,
                                         repr(policy))
        if reused is not None and not setup.full_check:
            return Result(reused=reused), None
    built = build_jobs(path, setup.digests, setup.allowed, policy)
    result = _render(setup, built, policy)
    if key is None or result.diagnostics or result.warnings:
        return result, None  # compiled again next time: its warnings are said again
    record = incremental.record(result.outputs, input_files(built), path.parent)
    return result, None if record is None else (key, record)


def _render(setup: _Setup, built: Built, policy: Policy) -> Result:
    """The scripts of a run file's jobs, with the policy's verdicts, and its sweep's files."""
    result = Result(diagnostics=list(built.problems))
    for source, job in built.jobs:
        if setup.pinned_by is not None:
            result.diagnostics += unpinned_images(source, job, setup.pinned_by)
        text, shape = script_and_shape(job) if setup.shapes else (render_job(job), None)
        problems = _script_size(source, job, text)
        result.diagnostics += problems
        if not problems:
            result.scripts.append(Script(job, text, source.file, source.mark(("id",)), shape,
                                         Judgement(policy, tuple(judge(job, policy)))))
    if built.sweep is not None and built.jobs and len(result.scripts) == len(built.jobs):
        sweep = sweep_files(built.sweep, result.scripts, policy)
        result.sweeps += sweep
        result.warnings += _unthrottled(built.sweep, sweep[0].sweep)
    if built.jobs and built.jobs[0][1].stages and len(result.scripts) == len(built.jobs):
        whole, *stages = result.scripts
        submit = build_submit(whole.job, [stage.text for stage in stages])
        result.sweeps.append(SubmitFile(submit, render_submit(submit), whole.file,
                                        whole.id_mark, SCRIPT_MODE))
    return result


def _unthrottled(expansion: Expansion, sweep: Sweep) -> list[Diagnostic]:
    """max_parallel throttles a job array; runs submitted each on its own have none."""
    if sweep.submission != "each" or expansion.max_parallel is None:
        return []
    mark = expansion.id_mark
    return [Diagnostic(expansion.file, mark.line, mark.column, "matrix.max_parallel",
                       "the runs differ in their #SBATCH lines, so sweep.sh --submit submits "
                       "each on its own and max_parallel cannot apply",
                       "give every run the same slurm block, or drop max_parallel")]


def sweep_files(expansion: Expansion, scripts: list[Script], policy: Policy) -> \
        list[SweepFile]:
    """sweep.sh (with the policy's verdicts on the sweep) and runs.tsv of a sweep whose runs
    compiled to `scripts`."""
    jobs = [s.job for s in scripts]
    sweep = build_sweep(expansion, jobs, [s.text for s in scripts])
    judgement = Judgement(policy, tuple(judge_sweep(jobs, sweep.at_once, policy)))
    return [SweepFile(sweep, name, text, mode, expansion.file, expansion.id_mark,
                      judgement if name == SWEEP_SCRIPT else None)
            for name, text, mode in ((SWEEP_SCRIPT, render_sweep(sweep), SCRIPT_MODE),
                                     (RUNS_TABLE, runs_table(sweep), TABLE_MODE))]


def _to_check(out: Path, result: Result) -> list[Checked]:
    """The scripts shellcheck must pass, named as under `out`: each job.sh through its shape,
    each sweep.sh as written (one a sweep, a tenth of a second), none that was reused (it
    passed when it was compiled)."""
    return [((out / s.relative_path).as_posix(), s.text,
             s.shape if isinstance(s, Script) else None)
            for s in [*result.scripts, *result.sweeps] if s.mode == SCRIPT_MODE]


def _script_size(source: Source, job: Job, text: str) -> list[Diagnostic]:
    size = len(text.encode("utf-8"))
    if size <= MAX_SCRIPT_BYTES:
        return []
    which = f"run {job.id}" if job.sweep is not None else "this run file"
    return [Diagnostic(source.file, 1, 1, "", f"the job.sh of {which} would be "
                       f"{size:,} bytes; obc writes at most {MAX_SCRIPT_BYTES:,} (2 MiB)",
                       "embed less, and shorten the longest values (each step's command "
                       "is shown in the header and in --help as well)")]


def _duplicate_ids(outputs: list[Placed]) -> list[Diagnostic]:
    """Two run files whose ids (a script's, a sweep's) name one folder under OUT."""
    first: dict[str, Placed] = {}
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
