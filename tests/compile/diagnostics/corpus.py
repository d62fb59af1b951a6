"""The machinery of the corpora of bad run files: a case is a run file (and the files it
names), the one diagnostic it must give, and the words its message must say."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.compile.diagnostics.harness import run_obc

# A valid run file of four lines; cases append to it from line 5.
BASE = "version: 1\nid: r\nruntime: {kind: docker}\nsteps: [{name: a, run: [x]}]\n"
STEPS = "steps: [{name: a, run: [x]}]\n"
# obc must answer at once; this only stops a case that would block (a named pipe opened).
BLOCKED_AFTER_SECONDS = 60


def with_runtime(runtime: str) -> str:
    """A run file whose runtime mapping (block style, from line 3) is `runtime`."""
    return f"version: 1\nid: r\nruntime:\n{runtime}{STEPS}"


def with_steps(steps: str) -> str:
    """A run file whose steps list (block style, from line 4) is `steps`."""
    return f"version: 1\nid: r\nruntime: {{kind: docker}}\nsteps:\n{steps}"


@dataclass(frozen=True)
class Case:
    text: str | bytes
    line: int
    column: int
    field: str
    words: tuple[str, ...]
    attachments: dict[str, str | bytes] = field(default_factory=dict)
    # Makes what a text cannot describe beside the run file: links, pipes, devices.
    setup: Callable[[Path], object] | None = None


def case(name: str, text: str | bytes, line: int, column: int, field_: str,  # noqa: PLR0913
         *words: str, attachments: dict[str, str | bytes] | None = None,
         setup: Callable[[Path], object] | None = None):
    """One row of a corpus: the run file, where its problem is, and what the message says."""
    return pytest.param(Case(text, line, column, field_, words, attachments or {}, setup),
                        id=name)


def write_case(folder: Path, bad: Case) -> Path:
    for name, content in bad.attachments.items():
        path = folder / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    if bad.setup is not None:
        bad.setup(folder)
    run_file = folder / "run.yaml"
    run_file.write_bytes(bad.text if isinstance(bad.text, bytes) else bad.text.encode())
    return run_file


class BlockedError(Exception):
    """obc waited (on a named pipe) instead of answering; not an OSError, which obc catches."""


@contextlib.contextmanager
def unblocked() -> Iterator[None]:
    """Fail, rather than hang the suite, if obc blocks (SIGALRM interrupts a blocked open)."""
    def stop(signum, frame):
        raise BlockedError(f"obc blocked for {BLOCKED_AFTER_SECONDS} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(BLOCKED_AFTER_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def assert_reported_once(bad: Case, command: str, folder: Path) -> None:
    """Run `obc COMMAND` on the case in `folder` (the working directory): exactly the one
    diagnostic, at its place, saying its words; exit 1; no output folder."""
    write_case(folder, bad)
    out = ["-o", "out"] if command == "compile" else []
    with unblocked():
        outcome = run_obc(command, "--format", "json", "run.yaml", *out)

    assert outcome.code == 1, outcome
    (found,) = outcome.diagnostics()
    assert (found["file"], found["line"], found["column"], found["field"]) == (
        "run.yaml", bad.line, bad.column, bad.field), found
    said = found["message"] + " " + (found["hint"] or "")
    for word in bad.words:
        assert word in said, found
    assert not (folder / "out").exists()


def reported_once_test(cases: list[Case]) -> Callable[..., None]:
    """The test every corpus of bad run files makes of its cases: each is reported once, at
    its exact place, by `obc validate` and by `obc compile` (assert_reported_once). A module
    names it as its test: `test_each_x_is_reported_once = reported_once_test(CASES)`."""
    @pytest.mark.parametrize("bad", cases)
    @pytest.mark.parametrize("command", ["validate", "compile"])
    def test(bad: Case, command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.chdir(tmp_path)
        assert_reported_once(bad, command, tmp_path)
    return test
