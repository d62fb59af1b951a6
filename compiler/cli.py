"""The `obc` command line: compile, validate, schema. Chooses what is printed and the exit code.

Exit codes: 0 success; 1 invalid input, drift found by --check, or shellcheck findings;
2 usage error or a broken environment.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from . import __version__
from .diagnostics import ObcError
from .pipeline import compile_files
from .reporters import REPORTERS
from .resources import schema_path
from .write import apply, plan

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="obc", description="Compile GPU fine-tuning run files into standalone job.sh scripts.")
    parser.add_argument("--version", action="version", version=f"obc {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    formats = argparse.ArgumentParser(add_help=False)
    formats.add_argument("--format", choices=sorted(REPORTERS), default="text",
                         help="how to print problems: text on stderr (default), or json / "
                              "github (Actions annotations) on stdout")
    inputs = argparse.ArgumentParser(add_help=False, parents=[formats])
    inputs.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                        help="run files, or folders of *.yaml and *.yml run files")

    compile_ = commands.add_parser("compile", parents=[inputs], help="write OUT/<id>/job.sh")
    compile_.add_argument("-o", "--out", type=Path, default=Path("out"),
                          help="output folder (default: out)")
    compile_.add_argument("--check", action="store_true",
                          help="write nothing; exit 1 if OUT is not what compile would write")
    compile_.add_argument("--diff", action="store_true", help="with --check, print diffs")
    commands.add_parser("validate", parents=[inputs], help="check run files, write nothing")
    commands.add_parser("schema", help="print the JSON Schema of the run file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "schema":
            sys.stdout.write(schema_path().read_text(encoding="utf-8"))
            return EXIT_OK
        return _compile(args)
    except ObcError as error:
        print(f"obc: error: {error}", file=sys.stderr)
        return EXIT_USAGE


def _compile(args: argparse.Namespace) -> int:
    validating = args.command == "validate"
    result = compile_files(args.paths, None if validating else args.out)
    report = REPORTERS[args.format]
    stream = sys.stderr if args.format == "text" else sys.stdout
    if result.diagnostics or args.format != "text":
        report(result.diagnostics, stream)
    if result.diagnostics:
        return EXIT_INVALID
    if validating:
        return EXIT_OK
    changes = plan(args.out, result.scripts)
    if args.check:
        return _report_drift(args, changes)
    done = apply(changes)
    counts = {status: sum(c.status == status for c in done)
              for status in ("written", "unchanged", "removed")}
    for change in done:
        if change.status == "removed":
            print(f"obc: removed {change.path} (its run file is gone)", file=sys.stderr)
    print("obc: " + ", ".join(f"{n} {status}" for status, n in counts.items()), file=sys.stderr)
    return EXIT_OK


def _report_drift(args: argparse.Namespace, changes: list) -> int:
    drift = [c for c in changes if c.status != "unchanged"]
    for change in drift:
        why = {"changed": "would change", "missing": "is missing",
               "stale": "is stale (no run file produces it)"}[change.status]
        print(f"obc: {change.path} {why}", file=sys.stderr)
        if args.diff:
            sys.stdout.write(change.diff())
    if not drift:
        return EXIT_OK
    fix = shlex.join(["obc", "compile", *map(str, args.paths), "-o", str(args.out)])
    print(f"obc: {len(drift)} file(s) out of date; to fix, run: {fix}", file=sys.stderr)
    return EXIT_INVALID
