"""A clean terminal (docs/running.md): obc's messages start on a line of their own,
also after a step's progress bar redrawn with carriage returns and left without a newline,
on the terminal and in the step's log alike; a dry run says it was one."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.conftest import SHELLS, compile_text, start_script, write_script
from tests.script.test_signals import stop_with
from tests.support.engines import wait_until

# What tqdm writes to stderr: each redraw starts with a carriage return, and the bar
# ends no line until the loop is over.
PROGRESS = r"printf ' 10%%|#         |\r 50%%|#####     |' >&2"


def native_job(folder: Path, argv: list[str]) -> Path:
    return write_script(folder, compile_text(folder, f"""\
version: 1
id: bar
runtime: {{kind: native}}
steps: [{{name: train, run: {json.dumps(argv)}}}]
"""))


def run(script: Path, *args: str, shell: str) -> tuple[int, str]:
    """Run the job to its end; return its exit code and its stderr."""
    job = start_script(script, *args, shell=shell, env=dict(os.environ))
    _, stderr = job.communicate(timeout=120)
    return job.returncode, stderr


def obc_lines_start_lines(stderr: str) -> bool:
    return all(piece.endswith("\n") for piece in stderr.split("obc: ")[:-1][1:]) \
        and "obc: " in stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_a_stop_message_starts_a_line_after_a_progress_bar(tmp_path, shell):
    script = native_job(tmp_path, ["sh", "-c", f"{PROGRESS}; sleep 300"])
    run_dir = tmp_path / "run"
    log = run_dir / ".obc/logs/train.1.log"
    job = start_script(script, "--run-dir", str(run_dir), shell=shell, env=dict(os.environ))
    wait_until(lambda: log.exists() and log.read_text().endswith("#####     |"),
               "the progress bar in the step's log")
    _, stderr = stop_with(job, signal.SIGTERM)
    assert job.returncode == 143, stderr
    assert " 50%|#####     |\nobc: TERM received, stopping\n" in stderr
    assert obc_lines_start_lines(stderr), stderr
    # The log ends the bar's line too, once: the next message needs no other.
    assert log.read_bytes() == b" 10%|#         |\r 50%|#####     |\n"
    assert "\n\n" not in stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_a_failure_message_starts_a_line_after_output_cut_mid_line(tmp_path, shell):
    script = native_job(tmp_path, ["sh", "-c", f"{PROGRESS}; printf ' loss 1.2' >&2; exit 7"])
    code, stderr = run(script, "--run-dir", str(tmp_path / "run"), shell=shell)
    assert code == 7, stderr
    assert "|#####     | loss 1.2\nobc: " in stderr
    assert obc_lines_start_lines(stderr), stderr


def test_a_message_after_a_whole_line_adds_no_blank_line(tmp_path):
    script = native_job(tmp_path, ["sh", "-c", "echo 'all done' >&2"])
    code, stderr = run(script, "--run-dir", str(tmp_path / "run"), shell="dash")
    assert code == 0, stderr
    assert "all done\nobc: " in stderr and "\n\n" not in stderr
    assert (tmp_path / "run/.obc/logs/train.1.log").read_bytes() == b"all done\n"


@pytest.mark.parametrize("shell", SHELLS)
def test_a_dry_run_says_it_was_one(tmp_path, shell):
    script = native_job(tmp_path, ["sh", "-c", "exit 0"])
    code, stderr = run(script, "--dry-run", "--run-dir", str(tmp_path / "run"), shell=shell)
    assert code == 0, stderr
    assert stderr.splitlines()[-1] == "obc: bar: dry run, nothing was run or written"
    assert "obc: bar done" not in stderr
    assert not (tmp_path / "run").exists()
