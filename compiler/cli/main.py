"""The `obc` command line: compile, plan, validate, lock, schema, status, report, init.
Chooses what is printed and the exit code.

Exit codes: 0 success; 1 invalid input, drift found by --check, or shellcheck findings;
2 usage error or a broken environment. `plan --detailed-exitcode`: 0 no changes, 1 any
error, 2 changes.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from .. import __version__
from ..core.diagnostics import Diagnostic, ObcError
from ..core.resources import schema_path
from ..core.text import quoted, visible
from ..pipeline.changes import Change, Elsewhere, account_for
from ..pipeline.pipeline import Options, Result, compile_files
from ..pipeline.write import Settle, apply, discard, write_atomic
from ..read.lockfile import default_lock_path, format_lock
from ..read.sources import allowed_folders
from .reporters import REPORTERS

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
# `obc plan --detailed-exitcode`: changes found (no error is 2 there).
EXIT_CHANGES = 2
DETAILED = "--detailed-exitcode"
LOCK_MODE = 0o644
LOCK_DEADLINE = 300  # seconds for a whole `obc lock` (--timeout)
WATCH_EVERY = 2.0  # seconds between the tables of `obc status --watch`
# Home the cursor and clear the screen (ECMA-48): --watch redraws the table in place.
CLEAR_SCREEN = "\x1b[H\x1b[J"
T = TypeVar("T")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="obc", description="Compile GPU fine-tuning run files into standalone job.sh scripts.")
    parser.add_argument("--version", action="version", version=f"obc {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    formats = argparse.ArgumentParser(add_help=False)
    formats.add_argument("--format", choices=sorted(REPORTERS), default="text",
                         help="how to print problems: text on stderr (default), or json / "
                              "github (Actions annotations) on stdout; a plan: text, json, "
                              "or github (markdown for a pull request comment)")
    inputs = argparse.ArgumentParser(add_help=False, parents=[formats])
    inputs.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                        help="run files, or folders of *.yaml and *.yml run files")
    inputs.add_argument("--allow-dir", action="append", type=Path, default=[], metavar="DIR",
                        help="a folder outside the project whose files run files may embed "
                             "(repeatable)")

    judged = argparse.ArgumentParser(add_help=False)
    judged.add_argument("--policy", type=Path, metavar="FILE",
                        help="the site policy every job is judged by (default: obc-policy.yaml "
                             "at the top of each run file's project, else obc's defaults)")

    locked = argparse.ArgumentParser(add_help=False)
    locked.add_argument("--lock", type=Path, metavar="FILE",
                        help="the image lock (default: obc.lock at the top of the git work "
                             "tree that holds the run files, else in the current directory)")

    compiles = argparse.ArgumentParser(add_help=False, parents=[inputs, judged, locked])
    compiles.add_argument("-o", "--out", type=Path, default=Path("out"),
                          help="output folder (default: out)")
    compiles.add_argument("--prune", action="store_true",
                          help="also remove obc's scripts in OUT that these inputs do not "
                               "produce (by default only those whose run file is gone)")
    compiles.add_argument("--require-digests", action="store_true",
                          help="fail on an image that is neither pinned by digest nor locked")

    compile_ = commands.add_parser("compile", parents=[compiles], help="write OUT/<id>/job.sh")
    compile_.add_argument("--check", action="store_true",
                          help="write nothing; exit 1 if OUT is not what compile would write")
    compile_.add_argument("--diff", action="store_true", help="with --check, print diffs")
    compile_.add_argument("--full-check", action="store_true",
                          help="run shellcheck on every script as written, rather than once "
                               "per script shape (slower; what CI can afford)")
    compile_.add_argument("--no-cache", action="store_true",
                          help="neither read nor write obc's cache (OBC_COMPILE_CACHE)")
    planner = commands.add_parser("plan", parents=[compiles],
                                  help="say what compile would change in OUT, by what the jobs "
                                       "mean, and each job's bill of materials; write nothing")
    planner.add_argument(DETAILED, action="store_true",
                         help="exit 0 with no changes, 2 with changes, 1 on any error")
    lock = commands.add_parser("lock", parents=[inputs, locked],
                               help="resolve image tags to digests into the lock (network)")
    mode = lock.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 if a tag moved, or the lock lacks a tag or "
                           "lists one no run file uses")
    mode.add_argument("--update", action="store_true",
                      help="resolve every tag again, not only those the lock lacks")
    lock.add_argument("--skopeo", action="store_true",
                      help="resolve with `skopeo inspect`, which uses your registry logins")
    lock.add_argument("--allow-realm", action="append", type=_host_name, default=[],
                      metavar="HOST",
                      help="a host other than the registry's whose token service obc may ask "
                           "for a pull token (repeatable; Docker Hub's is known)")
    lock.add_argument("--timeout", type=_seconds, default=LOCK_DEADLINE, metavar="SECONDS",
                      help=f"give up when the whole run takes longer (default {LOCK_DEADLINE})")
    commands.add_parser("validate", parents=[inputs, judged],
                        help="check run files, write nothing")
    commands.add_parser("schema", help="print the JSON Schema of the run file")
    status = commands.add_parser("status", help="print a table of the state of each job, "
                                                "as job.sh --status judges it, and how far "
                                                "its training got")
    status.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                        help="out/ folders, job.sh or sweep.sh scripts or their folders, "
                             "or run dirs")
    status.add_argument("--run-dir-root", type=Path, metavar="DIR",
                        help="each job's run dir is DIR/<job id> (as job.sh --run-dir "
                             "DIR/<job id>), not its default")
    status.add_argument("--format", choices=["text", "json"], default="text",
                        help="a table (default), or one JSON object per job, with the record "
                             "job.sh --status prints")
    status.add_argument("--watch", type=_seconds, nargs="?", const=WATCH_EVERY,
                        metavar="SECONDS",
                        help=f"print it again every SECONDS (default {WATCH_EVERY:g}): in place "
                             "on a terminal, else one after the other")
    status.add_argument("--count", type=_count, metavar="N",
                        help="with --watch, stop after N tables")
    report = commands.add_parser("report", help="write the status table and each run's loss "
                                                "curve (a sweep's overlaid) as one static "
                                                "HTML page (needs overbrainer[report])")
    report.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                        help="as obc status takes them")
    report.add_argument("--run-dir-root", type=Path, metavar="DIR",
                        help="as obc status takes it")
    report.add_argument("-o", "--output", type=Path, required=True, metavar="FILE",
                        help="the HTML file to write (replaced)")
    init = commands.add_parser("init", help="write a commented run file beside each trainer "
                                            "config (Axolotl, TRL or LLaMA-Factory, told by "
                                            "its keys); never over a file")
    init.add_argument("configs", nargs="+", type=Path, metavar="CONFIG")
    verify = commands.add_parser("verify", help="prove that each job.sh embeds exactly the "
                                                "library its obc release shipped; and that "
                                                "each submit.sh or sweep.sh is what obc "
                                                "writes, starting only such job.sh scripts")
    verify.add_argument("scripts", nargs="+", type=Path, metavar="SCRIPT")
    verify.add_argument("--format", choices=["text", "json"], default="text",
                        help="one line per script: text (default), or JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command == "compile" and args.diff and not args.check:
            parser.error("--diff works only with --check")
    except SystemExit as stop:
        # With --detailed-exitcode (terraform's), 2 means changes: any error is 1.
        if stop.code == EXIT_USAGE and DETAILED in argv:
            return EXIT_INVALID
        raise
    try:
        return COMMANDS[args.command](args)
    except ObcError as error:
        print(f"obc: error: {error}", file=sys.stderr)
        return EXIT_INVALID if getattr(args, "detailed_exitcode", False) else EXIT_USAGE
    except BrokenPipeError:
        # The reader went away (`obc compile --check --diff | head`): not an error of ours.
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_INVALID


def _schema(_args: argparse.Namespace) -> int:
    sys.stdout.write(schema_path().read_text(encoding="utf-8"))
    return EXIT_OK


def _validate(args: argparse.Namespace) -> int:
    result = compile_files(args.paths, options=Options(allowed=allowed_folders(args.allow_dir),
                                                       policy=_policy_file(args)))
    _warn(result)
    problems = result.diagnostics
    _report(args.format, problems)
    return EXIT_INVALID if problems else EXIT_OK


def _status(args: argparse.Namespace) -> int:
    # Imported here, as plan's: compile, the command run most, needs neither status nor
    # verify (4 ms of its start).
    from ..status.jobs import find_jobs  # noqa: PLC0415
    from ..status.table import build_row, format_json, format_table  # noqa: PLC0415

    jobs = find_jobs(args.paths, args.run_dir_root)
    printed = 0
    while True:
        now = datetime.now(UTC)
        rows = [build_row(job, now) for job in jobs]
        text = format_json(rows) if args.format == "json" else format_table(rows)
        if args.watch is not None and sys.stdout.isatty():
            text = CLEAR_SCREEN + text
        elif printed:
            text = "\n" + text
        sys.stdout.write(text)
        sys.stdout.flush()
        printed += 1
        if args.watch is None or printed == args.count:
            return EXIT_INVALID if any(row.problem for row in rows) else EXIT_OK
        time.sleep(args.watch)


def _report_page(args: argparse.Namespace) -> int:
    """Write the report of the jobs; exit 1, as status does, if a job's state is unknown."""
    # Imported here: matplotlib is an extra, and heavy.
    from ..report.page import report_page  # noqa: PLC0415
    from ..status.jobs import find_jobs  # noqa: PLC0415
    from ..status.table import build_row  # noqa: PLC0415

    now = datetime.now(UTC)
    rows = [build_row(job, now) for job in find_jobs(args.paths, args.run_dir_root)]
    try:
        args.output.write_text(report_page(rows), encoding="utf-8")
    except OSError as error:
        raise ObcError(f"{args.output}: cannot write: {error.strerror or error}") from error
    print(visible(f"obc: wrote {args.output}"), file=sys.stderr)
    return EXIT_INVALID if any(row.problem for row in rows) else EXIT_OK


def _init(args: argparse.Namespace) -> int:
    """Write the run file of each config; none if any of them cannot be written."""
    # Imported here, as plan's: compile, the command run most, does not need it.
    from ..init.run_file import plan_run_files, write_run_files  # noqa: PLC0415

    run_files, problems = plan_run_files(args.configs)
    if problems:
        _report("text", problems)
        print("obc: no run file written", file=sys.stderr)
        return EXIT_INVALID
    try:
        write_run_files(run_files)
    except OSError as error:  # one appeared since it was planned, or the folder is read-only
        raise ObcError(f"{error.filename}: cannot write: {error.strerror or error}") from error
    for run_file in run_files:
        print(visible(f"obc: wrote {run_file.path} for {run_file.trainer}; compile it: "
                      f"{shlex.join(['obc', 'compile', str(run_file.path), '-o', 'out'])}"),
              file=sys.stderr)
    return EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    from ..verify.scripts import verify_script  # noqa: PLC0415
    from ..verify.verify import format_verdict  # noqa: PLC0415

    verdicts = [(path, verify_script(path)) for path in args.scripts]
    for path, verdict in verdicts:
        if args.format == "json":
            print(json.dumps({"script": str(path), "verified": verdict.verified,
                              "obc_version": verdict.version, "parts": list(verdict.parts),
                              "problems": list(verdict.problems),
                              "runs": list(verdict.started)}))
        else:
            print(visible(f"{path}: {format_verdict(verdict)}"))
    return EXIT_OK if all(verdict.verified for _, verdict in verdicts) else EXIT_INVALID


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError("expected a number of seconds above 0, got "
                                         f"{quoted(text)}")
    return seconds


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a number, 1 or more, got {quoted(text)}")
    return int(text)


def _host_name(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9.-]+", text):
        raise argparse.ArgumentTypeError(f"expected a host name (no scheme, port or path), "
                                         f"got {quoted(text)}")
    return text.lower()


def _policy_file(args: argparse.Namespace) -> Path | None:
    if args.policy is not None and not os.path.lexists(args.policy):
        raise ObcError(f"--policy {args.policy}: no such file")
    return args.policy


def _lock_file(args: argparse.Namespace) -> Path:
    return args.lock if args.lock is not None else default_lock_path(args.paths)


def _compare_with_out(args: argparse.Namespace, compare: Callable[..., list[T]], *,
                      shellcheck: bool, settle: Settle | None = None,
                      **options: bool) -> list[T] | None:
    """Compile the inputs (with these pipeline.Options besides the shared ones, and each
    chunk's files settled by `settle`) and compare the result with OUT through `compare`
    (account_for the settled files, or plan.diff.plan_scripts); None, with the problems
    reported, if the inputs have any. What was staged is removed if it cannot be written."""
    if args.lock is not None and not args.lock.is_file():
        raise ObcError(f"{args.lock}: no such lock file")
    # shellcheck runs, and scripts compiled before are reused, only when compile_files is
    # told where the scripts go (plan needs every job itself).
    out = args.out if shellcheck else None
    settings = Options(allowed=allowed_folders(args.allow_dir), policy=_policy_file(args),
                       lock=_lock_file(args),
                       require_digests=args.require_digests, **options)
    result = compile_files(args.paths, out, settings, settle)
    _warn(result)
    if result.diagnostics:
        discard(result.settled)
        _report(args.format, result.diagnostics)
        return None

    def compile_named(named: dict[str, Path]) -> Elsewhere:
        return _compile_named(named, out, settings)

    try:
        return compare(args.out, result, prune=args.prune, compile_named=compile_named)
    except OSError as error:  # OUT or a folder in it cannot be read
        discard(result.settled)
        raise ObcError(f"{error.filename}: cannot read: {error.strerror or error}") from error
    except BaseException:
        discard(result.settled)
        raise


def _compile_named(named: dict[str, Path], out: Path | None, options: Options) -> Elsewhere:
    """Compile the run files named by obc's files in OUT that were not given (by the name
    their headers give them), as those given were: together, and one by one only if that
    fails, to tell which do not compile (their problems are not shown: a header may name any
    file)."""
    together = compile_files(named.values(), out, options)
    if not together.diagnostics:
        return Elsewhere(tuple(together.outputs))
    each = {name: compile_files([path], out, options) for name, path in named.items()}
    return Elsewhere(tuple(output for result in each.values() if not result.diagnostics
                           for output in result.outputs),
                     {name: "does not compile" for name, result in each.items()
                      if result.diagnostics})


def _warn(result: Result) -> None:
    """Say on stderr what does not stop the command: warnings, and a cache not used."""
    for warning in result.warnings:
        print(warning.text("warning"), file=sys.stderr)
    if result.cache_refused:
        print(f"obc: warning: not using the cache {visible(result.cache_refused)}; obc uses a "
              "cache only if no one else can change it (yours, mode 0700), so it compiles "
              "without one", file=sys.stderr)


def _compile(args: argparse.Namespace) -> int:
    def settled(out: Path, result: Result, **how: Any) -> list[Change]:
        return account_for(out, result.settled, result.placed, **how)

    changes = _compare_with_out(args, settled, shellcheck=True,
                                settle=Settle(args.out, write=not args.check, diff=args.diff),
                                full_check=args.full_check, cache=not args.no_cache)
    if changes is None:
        return EXIT_INVALID
    if args.check:
        return _check(args, changes)
    _report(args.format, [])
    _report_writes(apply(changes), args.out)
    return EXIT_OK


def _plan(args: argparse.Namespace) -> int:
    """Print what compile would do to OUT; 0, or with --detailed-exitcode 2 if it would
    change anything. The scripts are not run through shellcheck: compile does that."""
    # Imported here: compile, the command run most, needs neither (a tenth of its imports).
    from ..plan.diff import SYMBOLS, ScriptPlan, plan_scripts  # noqa: PLC0415
    from ..plan.report import PLAN_REPORTERS  # noqa: PLC0415

    def planned(out: Path, result: Result, **how: Any) -> list[ScriptPlan]:
        return plan_scripts(out, result.outputs, **how)

    plans = _compare_with_out(args, planned, shellcheck=False)
    if plans is None:
        return EXIT_INVALID
    PLAN_REPORTERS[args.format](plans, sys.stdout)
    changed = any(plan.action in SYMBOLS for plan in plans)
    return EXIT_CHANGES if changed and args.detailed_exitcode else EXIT_OK


def _report(format_: str, problems: list[Diagnostic]) -> None:
    """Print problems: text on stderr, only if there are any; other formats always, on stdout."""
    if problems or format_ != "text":
        REPORTERS[format_](problems, sys.stderr if format_ == "text" else sys.stdout)


def _check(args: argparse.Namespace, changes: list[Change]) -> int:
    """Report how OUT differs from what compile would write; 1 if it does, 0 if not."""
    drift = [change for change in changes if change.status not in ("unchanged", "kept")]
    fix = shlex.join(["obc", "compile", *map(str, args.paths), "-o", str(args.out)])
    # Text output ends with one line naming the fix; annotations and JSON must stand alone.
    hint = None if args.format == "text" else f"to fix, run: {fix}"
    _report(args.format, [Diagnostic(str(change.path), change.first_changed_line(), 1, "",
                                     _drift_message(change, args.out), hint)
                                for change in drift])
    if args.diff:
        # stdout carries the diffs in text format; with json or github it carries the report.
        stream = sys.stdout if args.format == "text" else sys.stderr
        stream.writelines(change.diff() for change in drift)
    if not drift:
        print(f"obc: {args.out} is up to date ({len(changes)} file(s))", file=sys.stderr)
        return EXIT_OK
    print(f"obc: {len(drift)} of {len(changes)} file(s) in {args.out} out of date; "
          f"to fix, run: {fix}", file=sys.stderr)
    return EXIT_INVALID


def _drift_message(change: Change, out: Path) -> str:
    if change.status == "missing":
        return "missing; compile would write it"
    if change.status == "stale":
        return f"stale: {change.reason}; compile would remove it"
    if change.status == "foreign":
        return f"not obc's: {change.reason}; compile leaves it (move it out of {out})"
    if change.only_mode_differs():
        return f"has mode {change.old_mode:04o}; compile would make it {change.mode:04o}"
    return "differs from what compile would write"


def _report_writes(done: list[Change], out: Path) -> None:
    for change in done:
        if change.status in ("removed", "foreign"):
            verb = "removed" if change.status == "removed" else "left, not obc's:"
            print(f"obc: {verb} {visible(str(change.path))}: {visible(change.reason)}",
                  file=sys.stderr)
    counts = {status: sum(change.status == status for change in done)
              for status in ("written", "unchanged", "removed")}
    kept = sum(change.status == "kept" for change in done)
    foreign = sum(change.status == "foreign" for change in done)
    print("obc: " + ", ".join(f"{n} {status}" for status, n in counts.items())
          + (f", {kept} kept (their run files were not given and compile to them; --prune "
             "removes them)" if kept else "")
          + (f", {foreign} not obc's (left as they are; --check fails until they are moved "
             f"out of {visible(str(out))})" if foreign else ""), file=sys.stderr)


def _lock(args: argparse.Namespace) -> int:
    # Only `obc lock` loads the network code (urllib, ssl): compile and validate never need it.
    from ..lock.lock import check_lock, lock_images  # noqa: PLC0415
    from ..lock.registry import deadline, resolve, resolve_with_skopeo  # noqa: PLC0415

    lock_file = _lock_file(args)
    resolver = resolve_with_skopeo if args.skopeo else functools.partial(
        resolve, allowed_realms=frozenset(args.allow_realm))
    if args.check:
        with deadline(args.timeout):
            problems = check_lock(args.paths, lock_file, resolver,
                                  allowed_folders(args.allow_dir))
        _report(args.format, problems)
        if problems:
            fix = ["obc", "lock", *map(str, args.paths), *_lock_option(args), "--update"]
            print(f"obc: {lock_file} is out of date; to fix, run: {shlex.join(fix)}",
                  file=sys.stderr)
            return EXIT_INVALID
        print(f"obc: {lock_file} is up to date", file=sys.stderr)
        return EXIT_OK
    with deadline(args.timeout):
        result = lock_images(args.paths, lock_file, resolver, update=args.update,
                             allowed=allowed_folders(args.allow_dir))
    _report(args.format, result.diagnostics)
    if result.diagnostics:
        print(f"obc: {lock_file} left as it was", file=sys.stderr)
        return EXIT_INVALID
    _write_lock(lock_file, format_lock(result.digests).encode())
    for image in sorted(result.old.keys() | result.digests.keys()):
        line = _lock_change(image, result.old.get(image), result.digests.get(image))
        if line:
            print(f"obc: {line}", file=sys.stderr)
    print(f"obc: {lock_file}: {len(result.digests)} image(s) locked", file=sys.stderr)
    return EXIT_OK


def _write_lock(lock_file: Path, text: bytes) -> None:
    """Write the lock unless it holds `text` already (its mtime then stays)."""
    try:
        if not lock_file.is_file() or lock_file.read_bytes() != text:
            write_atomic(lock_file, text, LOCK_MODE)
    except OSError as error:
        raise ObcError(f"{lock_file}: cannot write: {error.strerror or error}") from error


def _lock_option(args: argparse.Namespace) -> list[str]:
    return [] if args.lock is None else ["--lock", str(args.lock)]


def _lock_change(image: str, old: str | None, new: str | None) -> str | None:
    if old == new:
        return None
    if new is None:
        return f"removed {image}: no run file uses it"
    return f"locked {image} at {new}" + (f" (was {old})" if old else "")


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "compile": _compile, "plan": _plan, "validate": _validate, "lock": _lock, "schema": _schema,
    "status": _status, "report": _report_page, "verify": _verify, "init": _init}
