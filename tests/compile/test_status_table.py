"""`obc status PATH…` without running a job: which jobs a path names and where their run dirs
are, the table of every state (a snapshot, the clock given), the newest whole checkpoint by
the script's own rule, the last logged loss, and --watch. tests/script/test_status_runs.py
reads records that real job.sh runs wrote.

Update the snapshot after an intended change with
`pytest tests/compile/test_status_table.py --snapshot-update`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pty
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from compiler.pipeline.changes import changes_to
from compiler.pipeline.pipeline import compile_files
from compiler.pipeline.write import apply
from compiler.status.jobs import find_jobs
from compiler.status.progress import WEIGHTS, read_progress
from compiler.status.table import build_row, format_table
from tests.conftest import REPO

NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
STARTED = "2026-12-01T10:00:00Z"


class TextSnapshot(SingleFileSnapshotExtension):
    _write_mode = WriteMode.TEXT
    file_extension = "txt"


def job_file(job_id: str, more: str = "") -> str:
    return f"""\
version: 1
id: {job_id}
runtime: {{kind: native}}
trainer: {{axolotl: {{config: {{output_dir: out, max_steps: 10}}}}}}
{more}"""


def compile_out(root: Path, files: dict[str, str]) -> Path:
    """Compile the run files `files` (name: text) into root/out; return OUT."""
    for name, text in files.items():
        (root / name).write_text(text)
    result = compile_files([root / name for name in files], out=root / "out")
    assert not result.diagnostics, [d.text() for d in result.diagnostics]
    apply(changes_to(root / "out", result.outputs))
    return root / "out"


def record(run_dir: Path, job: str, state: str, *, attempt: int = 1, step: str | None = "train",
           exit_code: int | None = None, ended_at: str | None = None,
           slurm_job_id: str | None = None, inputs: str = "sha256:" + "a" * 64) -> None:
    """A record as job.sh writes it (templates/lib/records.sh obc_status), field by field."""
    (run_dir / ".obc").mkdir(parents=True)
    line = json.dumps({"job": job, "attempt": attempt, "state": state, "step": step,
                       "exit_code": exit_code, "started_at": STARTED, "ended_at": ended_at,
                       "slurm_job_id": slurm_job_id, "slurm_restarts": None,
                       "inputs": inputs, "resumed_from": None,
                       "resumed_from_inputs": None})
    (run_dir / ".obc/status.json").write_text(line + "\n")


def checkpoint(output_dir: Path, step: int, *, whole: bool = True, weights: str =
               "adapter_model.safetensors") -> Path:
    """checkpoint-STEP as transformers saves it: weights, then trainer_state.json, which
    logs a loss of 2/N at each step N."""
    folder = output_dir / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / weights).write_text("w\n")
    if whole:
        history = [{"step": n, "loss": round(2 / n, 4)} for n in range(1, step + 1)]
        (folder / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    return folder


@pytest.fixture
def out(tmp_path: Path) -> Path:
    names = ("a-done", "b-stopped", "c-gave-up", "d-killed", "e-never")
    return compile_out(tmp_path, {f"{name}.yaml": job_file(name) for name in names})


def test_the_table_of_every_state(out, tmp_path, snapshot):
    root = tmp_path / "runs"
    record(root / "a-done", "a-done", "succeeded", attempt=2, step=None, exit_code=0,
           ended_at="2026-12-01T11:02:03Z", slurm_job_id="4711")
    checkpoint(root / "a-done/out", 10)
    record(root / "b-stopped", "b-stopped", "stopped", exit_code=143,
           ended_at="2026-12-01T10:30:00Z")
    checkpoint(root / "b-stopped/out", 4)
    checkpoint(root / "b-stopped/out", 6, whole=False)  # stopped while it was saved
    record(root / "c-gave-up", "c-gave-up", "failed", attempt=3, exit_code=5,
           ended_at="2026-12-01T10:00:09Z", slurm_job_id="4712")
    # A record that says running, of a run whose lock is gone: killed, its end not known.
    record(root / "d-killed", "d-killed", "running")

    rows = [build_row(job, NOW) for job in find_jobs([out], root)]

    assert format_table(rows) == snapshot.use_extension(TextSnapshot)


def test_a_path_names_jobs_by_script_folder_sweep_or_out_each_once(tmp_path):
    sweep = """\
version: 1
id: sw
runtime: {kind: native}
steps: [{name: s, run: [echo]}]
matrix: {axes: {a: {set: env.A, values: [x, y]}}}
"""
    out = compile_out(tmp_path, {"sw.yaml": sweep, "one.yaml": job_file("one")})
    root = tmp_path / "runs"

    def jobs(*paths: Path) -> list[str]:
        return [job.job for job in find_jobs(list(paths), root)]

    assert jobs(out) == ["one", "sw-x", "sw-y"]
    assert jobs(out / "sw") == jobs(out / "sw/sweep.sh") == ["sw-x", "sw-y"]
    assert jobs(out / "sw-y/job.sh", out / "sw") == ["sw-y", "sw-x"]
    assert jobs(out / "one") == ["one"]
    (out / "sw/sweep.sh").rename(out / "sw/all.sh")  # a sweep.sh by its record, any name
    assert jobs(out / "sw/all.sh") == ["sw-x", "sw-y"]
    (run_dir,) = find_jobs([out / "one"], root)
    assert (run_dir.run_dir, run_dir.checkpoints) == (root / "one", root / "one/out")


def test_a_stage_stands_for_its_job_with_what_each_step_finishes_for(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    example = [Path("examples/slurm-pipeline.yaml")]
    apply(changes_to(tmp_path / "out", compile_files(example, out=tmp_path / "out").outputs))
    # Without OUT, every job is built (with it, one compiled before may be reused).
    job = next(script.job for script in compile_files(example).scripts
               if script.job.id == "slurm-pipeline")

    (watched,) = find_jobs([tmp_path / "out"], None)

    # As the scripts judge a step finished: Job.step_inputs, which obc_step_inputs prints.
    assert (watched.job, watched.inputs) == ("slurm-pipeline", job.training_inputs)
    assert [(stage.name, stage.job, stage.steps) for stage in watched.stages] == [
        (stage.name, f"slurm-pipeline-{stage.name}",
         tuple((step.name, job.step_inputs(step)) for step in stage.steps))
        for stage in job.stages]
    assert find_jobs([tmp_path / "out/slurm-pipeline-eval/job.sh"], None) == [watched]
    # Where no run dir is known (a variable not set), no stage's state is.
    unknown = build_row(dataclasses.replace(watched, run_dir=None, problem="no run dir"), NOW)
    assert (unknown.state, unknown.cells(stages=True)[-1]) == (
        None, "preprocess unknown, train unknown, eval unknown")


def test_a_jobs_own_script_that_failed_before_any_step_failed_its_first_stage(tmp_path,
                                                                             monkeypatch):
    monkeypatch.chdir(REPO)
    out, root = tmp_path / "out", tmp_path / "runs"
    apply(changes_to(out, compile_files([Path("examples/slurm-pipeline.yaml")],
                                        out=out).outputs))
    (watched,) = find_jobs([out], root)

    def stages(inputs: str) -> tuple[str | None, list[tuple[str, str | None, str | None]]]:
        shutil.rmtree(root, ignore_errors=True)
        # Preflight failed (exit 3): the job's job.sh ran no step.
        record(root / "slurm-pipeline", "slurm-pipeline", "failed", step=None, exit_code=3,
               ended_at=STARTED, inputs=inputs)
        row = build_row(watched, NOW)
        return row.state, [(stage.name, stage.state, stage.step) for stage in row.stages]

    assert stages(watched.inputs) == ("failed", [("preprocess", "failed", None),
                                                 ("train", "not started", None),
                                                 ("eval", "not started", None)])
    # A run for other training inputs says nothing of these scripts' stages.
    assert stages("sha256:" + "b" * 64)[1] == [
        (name, "not started", None) for name in ("preprocess", "train", "eval")]


def test_a_run_dir_is_the_scripts_default_with_home_and_variables_from_the_environment(
        tmp_path):
    out = compile_out(tmp_path, {
        "home.yaml": job_file("home"),
        "var.yaml": job_file("var", 'paths: {run_dir: "${SCRATCH}/runs/var"}\n')})
    environ = {"HOME": "/h", "SCRATCH": "/s"}

    home, var = find_jobs([out], None, environ)

    assert (home.run_dir, home.checkpoints) == (Path("/h/overbrainer/runs/home"),
                                                Path("/h/overbrainer/runs/home/out"))
    assert (var.run_dir, var.problem) == (Path("/s/runs/var"), None)
    unset = find_jobs([out / "var"], None, {"HOME": "/h"})
    assert unset[0].run_dir is None and unset[0].problem.startswith("${SCRATCH} is not set")
    row = build_row(unset[0], NOW)
    assert (row.state, row.as_json()["problem"]) == (None, unset[0].problem)


def test_a_path_that_is_no_job_is_a_usage_error(obc, tmp_path):
    (tmp_path / "empty").mkdir()
    missing = obc("status", str(tmp_path / "nothing"))
    assert (missing.code, missing.stderr) == (2, f"obc: error: {tmp_path}/nothing: no such "
                                                 "file or folder\n")
    (tmp_path / "job.sh").write_text("#!/bin/sh\necho hand-written\n")
    foreign = obc("status", str(tmp_path / "job.sh"))
    assert (foreign.code, foreign.stderr) == (2, f"obc: error: {tmp_path}/job.sh: not a "
                                                 "script of obc's (it has no plan record to "
                                                 "read)\n")
    empty = obc("status", str(tmp_path / "empty"))
    assert (empty.code, empty.stderr) == (2, f"obc: error: {tmp_path}/empty: holds no job.sh "
                                             "or sweep.sh, and is no run dir\n")


def test_the_newest_checkpoint_is_the_newest_whole_one_as_the_script_judges(tmp_path):
    output = tmp_path / "out"
    checkpoint(output, 2)
    checkpoint(output, 3, weights="model.safetensors.index.json")
    checkpoint(output, 12, whole=False)
    (output / "checkpoint-20").mkdir()  # no weights
    (output / "checkpoint-20/trainer_state.json").write_text("{}")
    checkpoint(output, 30).rename(output / "checkpoint-30.incomplete")

    progress = read_progress(output)

    assert (progress.checkpoint, progress.step, progress.loss) == ("checkpoint-3", 3, 0.6667)
    # The same globs as obc_whole_checkpoint, the rule train resumes by.
    library = (REPO / "templates/lib/checkpoints.sh").read_text()
    globs = re.search(r'for OBC_PART in (.*?); do', library, re.S)[1]
    assert re.findall(r'"\$1"/(\S+)', globs) == list(WEIGHTS)


def test_the_last_loss_is_the_later_of_output_dir_and_its_newest_checkpoint(tmp_path):
    output = tmp_path / "out"
    checkpoint(output, 4)
    assert read_progress(output).step == 4
    # transformers writes output_dir's own trainer_state.json when training ends.
    history = [{"step": 5, "loss": 0.25}, {"step": 5, "train_runtime": 1.0},
               {"step": 6, "loss": None}, {"step": "7", "loss": 0.1}]  # no loss logged
    (output / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    assert (read_progress(output).step, read_progress(output).loss) == (5, 0.25)
    assert read_progress(tmp_path / "none") == read_progress(None)


def obc_status(*args: str, **popen: object) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "compiler", "status", *args], cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, **popen)


def test_watch_prints_one_table_after_the_other_where_the_output_is_no_terminal(out):
    done = obc_status("--watch", "0.01", "--count", "3", str(out / "a-done"),
                      stdout=subprocess.PIPE, text=True)
    stdout, _ = done.communicate(timeout=60)
    tables = stdout.rstrip("\n").split("\n\n")
    assert done.returncode == 0 and len(tables) == 3
    assert len(set(tables)) == 1 and tables[0].startswith("job ")
    assert "\x1b" not in stdout


def test_watch_redraws_the_table_in_place_on_a_terminal(out):
    leader, follower = pty.openpty()
    done = obc_status("--watch", "0.01", "--count", "2", str(out / "a-done"), stdout=follower)
    os.close(follower)
    assert done.wait(timeout=60) == 0
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal's other side is closed: all is read
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert shown.count(b"\x1b[H\x1b[J") == 2 and shown.startswith(b"\x1b[H\x1b[J")
