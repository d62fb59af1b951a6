"""How problems reach the user: every problem of every file in one sorted report, text on
stderr or JSON on stdout, colour only on a terminal, obc's exit codes (docs/command-line.md),
and an output folder that a bad input never touches."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.compile.diagnostics.harness import located, run_obc

GOOD = "version: 1\nid: {id}\nruntime: {{kind: docker}}\nsteps: [{{name: a, run: [x]}}]\n"
# One load error: the file stops there.
BROKEN = "version: 1\nid: broken\n\truntime: {kind: docker}\n"
# Two schema errors and two rule errors in one file: all four are reported together.
MANY = """\
version: 1
id: Many
runtime:
  kind: docker
  venv: /v
steps:
  - name: a
    run: [x, 3.10]
env:
  IFS: " "
"""
MANY_PROBLEMS = [
    ("many.yaml", 2, 5, "id"),
    ("many.yaml", 5, 3, "runtime.venv"),
    ("many.yaml", 8, 14, "steps[0].run[1]"),
    ("many.yaml", 10, 3, "env.IFS"),
]
TEXT_LINE = re.compile(r"^[^:\n]+:\d+:\d+: error: (?:[^:\n]+: )?[^\n]+$")


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    for name, text in {"good.yaml": GOOD.format(id="good"), "many.yaml": MANY,
                       "broken.yaml": BROKEN, "other.yaml": GOOD.format(id="other")}.items():
        (tmp_path / "runs" / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_every_problem_of_every_file_is_reported_in_one_run_sorted(folder):
    outcome = run_obc("validate", "--format", "json", "runs/many.yaml", "runs/good.yaml",
                      "runs/broken.yaml")

    assert outcome.code == 1
    assert located(outcome) == [("runs/broken.yaml", 3, 1, ""),
                                *[(f"runs/{f}", *rest) for f, *rest in MANY_PROBLEMS]]


def test_a_folder_is_validated_file_by_file(folder):
    outcome = run_obc("validate", "--format", "json", "runs")

    assert outcome.code == 1
    assert [d[0] for d in located(outcome)] == ["runs/broken.yaml"] + ["runs/many.yaml"] * 4


def test_text_goes_to_stderr_one_line_per_problem_with_an_indented_hint(folder):
    outcome = run_obc("validate", "runs/many.yaml", "runs/broken.yaml")

    assert outcome.code == 1
    assert outcome.stdout == ""
    assert outcome.stderr.splitlines() == [
        "runs/broken.yaml:3:1: error: a tab is used for indentation",
        "  hint: YAML indents with spaces only; replace the tab with spaces",
        "runs/many.yaml:2:5: error: id: 'Many': use 1 to 63 lowercase letters, digits, '_', "
        "'.' or '-', starting with a letter or digit",
        "runs/many.yaml:5:3: error: runtime.venv: only applies to runtime.kind native, "
        "not to docker",
        "runs/many.yaml:8:14: error: steps[0].run[1]: expected a string, got the number 3.1",
        '  hint: YAML reads 3.10 as the number 3.1; quote it: "3.10"',
        "runs/many.yaml:10:3: error: env.IFS: 'IFS' cannot be set by a run file: it changes "
        "how every shell splits words",
    ]


def test_json_is_an_array_of_located_problems_on_stdout(folder):
    outcome = run_obc("compile", "--format", "json", "runs/many.yaml", "-o", "out")

    assert outcome.code == 1
    assert outcome.stderr == ""
    problems = json.loads(outcome.stdout)
    assert [sorted(p) for p in problems] == [
        ["column", "field", "file", "hint", "line", "message"]] * 4
    assert problems[2] == {
        "file": "runs/many.yaml", "line": 8, "column": 14, "field": "steps[0].run[1]",
        "message": "expected a string, got the number 3.1",
        "hint": 'YAML reads 3.10 as the number 3.1; quote it: "3.10"'}


def test_json_of_valid_files_is_an_empty_array(folder):
    outcome = run_obc("validate", "--format", "json", "runs/good.yaml")

    assert (outcome.code, json.loads(outcome.stdout), outcome.stderr) == (0, [], "")


def test_text_from_the_run_file_cannot_break_a_line(folder):
    Path("bad.yaml").write_text(
        'version: 1\nid: "a\\nb\\tc"\nruntime: {kind: docker}\n'
        'steps: [{name: a, run: [x]}]\nenv: {"X\\nY": "1"}\n', encoding="utf-8")

    outcome = run_obc("validate", "bad.yaml")

    assert outcome.code == 1
    lines = outcome.stderr.splitlines()
    assert len(lines) == 2 and all(TEXT_LINE.match(line) for line in lines), lines
    assert lines[0].startswith("bad.yaml:2:5: error: id: 'a\\nb\\tc'")
    assert lines[1].startswith('bad.yaml:5:7: error: env["X\\nY"]: ')


def test_a_control_character_is_named_not_shown(folder):
    Path("bad.yaml").write_text(
        'version: 1\nid: "a\\e[2Jb"\nruntime: {kind: docker}\nsteps: [{name: a, run: [x]}]\n',
        encoding="utf-8")

    outcome = run_obc("validate", "bad.yaml")

    assert outcome.stderr.splitlines()[0] == (
        "bad.yaml:2:5: error: id: string holds the control character U+001B (escape)")


@pytest.mark.parametrize(("args", "code"), [
    (["validate", "runs/good.yaml"], 0),
    (["compile", "runs/good.yaml", "-o", "out"], 0),
    (["validate", "runs/good.yaml", "runs/many.yaml"], 1),
    (["compile", "runs/many.yaml", "-o", "out"], 1),
    (["validate", "runs/missing.yaml"], 2),
    (["validate", "out-of-nowhere"], 2),
    (["validate", "--colour", "runs/good.yaml"], 2),
    (["compile"], 2),
    (["validate", "empty"], 2),
])
def test_exit_codes(folder, args, code):
    Path("empty").mkdir()

    outcome = run_obc(*args)

    assert outcome.code == code, outcome
    assert "Traceback" not in outcome.stderr


def snapshot(root: Path) -> dict[str, tuple[bytes, int, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_mode)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_bad_input_among_good_ones_writes_nothing(folder):
    outcome = run_obc("compile", "runs/good.yaml", "runs/other.yaml", "runs/many.yaml",
                      "-o", "out")

    assert outcome.code == 1
    assert not Path("out").exists()


def test_a_bad_input_leaves_an_existing_output_exactly_as_it_was(folder):
    assert run_obc("compile", "runs/good.yaml", "runs/other.yaml", "-o", "out").code == 0
    Path("runs/good.yaml").write_text(GOOD.format(id="good").replace("[x]", "[y]"))
    before = snapshot(Path("out"))

    outcome = run_obc("compile", "runs/good.yaml", "runs/many.yaml", "-o", "out")

    assert outcome.code == 1
    assert snapshot(Path("out")) == before
    assert sorted(before) == ["good/job.sh", "other/job.sh"]


def run_on_terminal(folder: Path, **env: str) -> bytes:
    """Run `obc validate` on a bad file with stderr on a pseudo-terminal; return what it shows."""
    controller, terminal = pty.openpty()
    environment = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    process = subprocess.run(
        [sys.executable, "-m", "compiler", "validate", "runs/many.yaml"], cwd=folder,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=terminal,
        env={**environment, "TERM": "xterm", **env}, timeout=60, check=False)
    os.close(terminal)
    shown = b""
    try:
        while chunk := os.read(controller, 65536):
            shown += chunk
    except OSError:  # EIO: the terminal has no writer left
        pass
    os.close(controller)
    assert process.returncode == 1
    return shown


def test_colour_on_a_terminal(folder):
    shown = run_on_terminal(folder)

    assert b"\x1b[1;31merror:\x1b[0m" in shown
    assert b"\x1b[1mruns/many.yaml:2:5:\x1b[0m" in shown


@pytest.mark.parametrize("env", [{"NO_COLOR": "1"}, {"TERM": "dumb"}])
def test_no_colour_when_asked_not_to(folder, env):
    shown = run_on_terminal(folder, **env)

    assert b"runs/many.yaml:2:5: error: id:" in shown
    assert b"\x1b" not in shown


def test_no_colour_when_not_on_a_terminal(folder):
    process = subprocess.run([sys.executable, "-m", "compiler", "validate", "runs/many.yaml"],
                             cwd=folder, capture_output=True, text=True, timeout=60,
                             env={**os.environ, "TERM": "xterm"}, check=False)

    assert process.returncode == 1
    assert "runs/many.yaml:2:5: error: id:" in process.stderr
    assert "\x1b" not in process.stderr
