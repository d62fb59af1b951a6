"""Runs `obc` in-process, the way a user would from a shell, and captures what it prints."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass

from compiler.cli.main import main


@dataclass(frozen=True)
class Outcome:
    """What one `obc` command did: its exit code and its two output streams."""

    code: int
    stdout: str
    stderr: str

    def diagnostics(self) -> list[dict]:
        """The diagnostics of a `--format json` run."""
        return json.loads(self.stdout)


def run_obc(*args: str) -> Outcome:
    """Run `obc ARGS...` in this process; usage errors (argparse's SystemExit) included."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 2
    return Outcome(code, out.getvalue(), err.getvalue())


def located(outcome: Outcome) -> list[tuple[str, int, int, str]]:
    """The position and field of each diagnostic of a `--format json` run."""
    return [(d["file"], d["line"], d["column"], d["field"]) for d in outcome.diagnostics()]


def validate_json(paths: Sequence[str]) -> Outcome:
    return run_obc("validate", "--format", "json", *paths)
