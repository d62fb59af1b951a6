"""`obc status` and `sweep.sh --status` over the records real job.sh runs wrote: a sweep of
three runs of the stand-in trainer that checkpoints as Axolotl does (stubs/checkpointer.py),
one run to the end, one stopped half way, one never started. The JSON is held to what each
`job.sh --status` prints, the elapsed time only to its shape."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import SHELLS, Sandbox, install_stub, start_script
from tests.script.test_sweep_script import compile_out
from tests.support.engines import wait_until
from tests.support.stages import compile_out as stage_out
from tests.support.stages import pipeline

SWEEP = """\
version: 1
id: sw
runtime: {kind: native, stop_timeout: 5}
trainer: {axolotl: {config: {output_dir: out, max_steps: 6, save_steps: 2}}}
checkpoint: {grace: 30}
matrix:
  axes:
    steps:  # sw-400 checkpoints only when it is stopped
      "6": {trainer: {axolotl: {config: {max_steps: 6}}}}
      "400": {trainer: {axolotl: {config: {max_steps: 400, save_steps: 1000}}}}
      "8": {trainer: {axolotl: {config: {max_steps: 8}}}}
"""
IDS = ["sw-6", "sw-400", "sw-8"]
ELAPSED = re.compile(r"[0-9]+:[0-5][0-9]:[0-5][0-9]")


def loss(step: int) -> float:
    """The loss the stand-in trainer logs at `step`."""
    return round(2 / step, 4)


def run_the_sweep(box: Sandbox, out: Path, *options: str) -> str:
    """Run sw-6 to the end and stop sw-400 half way, each job.sh with `options`; return
    the checkpoint sw-400 saved when it was stopped."""
    assert box.run(out / "sw-6/job.sh", *options).returncode == 0
    env = box.env(OBC_STUB_STEP_SECONDS="0.1")
    stopped = start_script(out / "sw-400/job.sh", *options, shell="dash", env=env)
    log = box.home / "overbrainer/runs/sw-400/.obc/logs/train.1.log"
    if options:
        log = Path(options[1]) / ".obc/logs/train.1.log"
    wait_until(lambda: log.exists() and "step 3\n" in log.read_text(), "train to start")
    stopped.send_signal(signal.SIGTERM)
    _, stderr = stopped.communicate(timeout=60)
    assert stopped.returncode == 143, stderr
    (saved,) = re.findall(r"obc: (checkpoint-[0-9]+) saved", stderr)
    return saved


@pytest.fixture
def sweep(sandbox, tmp_path, monkeypatch) -> tuple[Sandbox, Path, str]:
    """The sweep, its runs in their default run dirs under the sandbox's HOME (which obc
    status reads too)."""
    install_stub(sandbox.bin / "axolotl", "checkpointer")
    out = compile_out(tmp_path, SWEEP)
    monkeypatch.setenv("HOME", str(sandbox.home))
    return sandbox, out, run_the_sweep(sandbox, out)


def job_status(box: Sandbox, script: Path, *options: str) -> dict | None:
    shown = box.run(script, "--status", *options)
    return json.loads(shown.stdout) if shown.returncode == 0 else None


def test_obc_status_shows_each_runs_state_checkpoint_and_last_loss_as_the_records_say(
        sweep, obc):
    box, out, saved = sweep
    at = int(saved.removeprefix("checkpoint-"))

    shown = obc("status", "--format", "json", str(out / "sw"))

    rows = [json.loads(line) for line in shown.stdout.splitlines()]
    assert shown.code == 0 and [row["job"] for row in rows] == IDS
    assert [row["record"] for row in rows] == [job_status(box, out / f"{run}/job.sh")
                                               for run in IDS]
    assert [row["run_dir"] for row in rows] == [str(box.home / "overbrainer/runs" / run)
                                                for run in IDS]
    assert [(row["state"], row["step"], row["attempt"], row["checkpoint"],
             row["trained_step"], row["loss"], row["slurm_job_id"]) for row in rows] == [
        ("done", None, 1, "checkpoint-6", 6, loss(6), None),
        ("stopped", "train", 1, saved, at, loss(at), None),
        ("not started", None, None, None, None, None, None)]
    assert all(isinstance(row["elapsed_seconds"], int) and row["elapsed_seconds"] >= 0
               for row in rows[:2]) and rows[2]["elapsed_seconds"] is None
    assert [row["problem"] for row in rows] == [None] * 3


def test_the_table_is_the_same_from_out_the_sweep_its_script_or_the_runs(sweep, obc):
    _, out, saved = sweep
    at = int(saved.removeprefix("checkpoint-"))

    table = obc("status", str(out)).stdout

    header, *lines = [re.split(r"  +", line) for line in table.splitlines()]
    assert header == ["job", "state", "step", "attempt", "checkpoint", "trained", "loss",
                      "elapsed", "slurm job"]
    assert [line[:7] + line[8:] for line in lines] == [
        ["sw-6", "done", "-", "1", "checkpoint-6", "6", "0.3333", "-"],
        ["sw-400", "stopped", "train", "1", saved, str(at), f"{loss(at):.4g}", "-"],
        ["sw-8", "not started", "-", "-", "-", "-", "-", "-", "-"][:7] + ["-"]]
    assert [bool(ELAPSED.fullmatch(line[7])) for line in lines] == [True, True, False]
    for path in (out / "sw", out / "sw/sweep.sh"):
        assert obc("status", str(path)).stdout.splitlines()[1:] == table.splitlines()[1:]
    runs = [str(out / run / "job.sh") for run in IDS]
    assert obc("status", *runs).stdout.splitlines()[1:] == table.splitlines()[1:]


def test_run_dir_root_finds_the_runs_of_job_sh_run_dir(sandbox, tmp_path, obc, monkeypatch):
    install_stub(sandbox.bin / "axolotl", "checkpointer")
    out = compile_out(tmp_path, SWEEP)
    root = tmp_path / "runs"
    monkeypatch.setenv("HOME", str(sandbox.home))
    assert sandbox.run(out / "sw-6/job.sh", "--run-dir", str(root / "sw-6")).returncode == 0

    rooted = obc("status", "--format", "json", "--run-dir-root", str(root), str(out / "sw"))
    default = obc("status", "--format", "json", str(out / "sw"))

    rows = [json.loads(line) for line in rooted.stdout.splitlines()]
    assert [(row["run_dir"], row["state"], row["checkpoint"]) for row in rows] == [
        (str(root / "sw-6"), "done", "checkpoint-6"), (str(root / "sw-400"), "not started", None),
        (str(root / "sw-8"), "not started", None)]
    assert rows[0]["record"] == job_status(sandbox, out / "sw-6/job.sh", "--run-dir",
                                           str(root / "sw-6"))
    assert [json.loads(line)["state"] for line in default.stdout.splitlines()] == \
        ["not started"] * 3


@pytest.mark.parametrize("shell", SHELLS)
def test_sweep_status_adds_each_runs_state_to_the_runs_table_in_every_shell(sweep, obc,
                                                                             shell):
    box, out, _ = sweep

    shown = subprocess.run([*SHELLS[shell], str(out / "sw/sweep.sh"), "--status"],
                           env=box.env(), capture_output=True, text=True, timeout=120,
                           check=False)

    assert shown.returncode == 0, shown.stderr
    assert [line.split("\t") for line in shown.stdout.splitlines()] == [
        ["index", "id", "steps", "state", "step", "attempt", "slurm_job_id"],
        ["0", "sw-6", "6", "done", "-", "1", "-"],
        ["1", "sw-400", "400", "stopped", "train", "1", "-"],
        ["2", "sw-8", "8", "not started", "-", "-", "-"]]
    rows = [json.loads(line) for line in obc("status", "--format", "json",
                                             str(out / "sw")).stdout.splitlines()]
    assert [line.split("\t")[3] for line in shown.stdout.splitlines()[1:]] == \
        [row["state"] for row in rows]
    one = subprocess.run([*SHELLS[shell], str(out / "sw/sweep.sh"), "--status", "sw-8"],
                         env=box.env(), capture_output=True, text=True, timeout=60, check=False)
    assert one.stdout.splitlines()[1:] == ["2\tsw-8\t8\tnot started\t-\t-\t-"]


# A pipeline whose eval waits for the file `go` in the run dir and exits with the code in it,
# so that the test decides when it ends and how.
PIPELINE = pipeline("""[sh, -c, 'until [ -s go ]; do sleep 0.1; done; exit "$(cat go)"']""")


def stages_of(obc, *paths: Path) -> list[tuple]:
    """Each row of `obc status --format json PATHS`: its job, state and each stage's
    (name, job, state, step)."""
    shown = obc("status", "--format", "json", *map(str, paths))
    assert shown.code == 0, shown.stderr
    return [(row["job"], row["state"],
             [(stage["name"], stage["job"], stage["state"], stage["step"])
              for stage in row["stages"]])
            for row in map(json.loads, shown.stdout.splitlines())]


def test_obc_status_shows_a_jobs_stages_in_one_row_each_where_it_stands(
        sandbox, tmp_path, obc, monkeypatch):
    (tmp_path / "one").mkdir()
    out = stage_out(tmp_path / "one", PIPELINE)
    monkeypatch.setenv("HOME", str(sandbox.home))
    run_dir = sandbox.home / "overbrainer/runs/pipe"

    def stages(*states: tuple[str, str | None]) -> list[tuple]:
        return [(name, f"pipe-{name}", state, step)
                for name, (state, step) in zip(("preprocess", "train", "eval"), states,
                                                strict=True)]

    never = ("not started", None)
    assert stages_of(obc, out) == [("pipe", "not started", stages(never, never, never))]
    for stage in ("preprocess", "train"):
        assert sandbox.run(out / f"pipe-{stage}/job.sh").returncode == 0
    (run_dir / "go").write_text("7\n")
    # The whole job's script: it skips what the stages did, and eval fails in it.
    assert sandbox.run(out / "pipe/job.sh").returncode == 7
    failed = [("pipe", "failed", stages(("done", None), ("done", None), ("failed", "eval")))]
    assert stages_of(obc, out) == failed
    # Any of the job's scripts stands for the job, each once; submit.sh too.
    assert stages_of(obc, out / "pipe-train/job.sh", out / "pipe") == failed
    assert stages_of(obc, out / "pipe/submit.sh") == failed

    (run_dir / "go").unlink()
    evaluating = start_script(out / "pipe-eval/job.sh", shell="dash", env=sandbox.env())
    wait_until(lambda: '"state": "running", "step": "eval"' in
               (run_dir / ".obc/status.json").read_text(), "eval to run")
    assert stages_of(obc, out) == [
        ("pipe", "running", stages(("done", None), ("done", None), ("running", "eval")))]
    (run_dir / "go").write_text("0\n")
    assert evaluating.wait(timeout=60) == 0
    done = ("done", None)
    assert stages_of(obc, out) == [("pipe", "done", stages(done, done, done))]

    header, row = [re.split(r"  +", line) for line in obc("status", str(out)).stdout.splitlines()]
    assert (header[-1], row[0], row[1], row[-1]) == (
        "stages", "pipe", "done", "preprocess done, train done, eval done")
    # Compiled again with another base model, no stage has finished for the new inputs.
    (tmp_path / "two").mkdir()
    changed = stage_out(tmp_path / "two", PIPELINE.replace("base_model: m", "base_model: n"))
    assert stages_of(obc, changed) == [("pipe", "not started", stages(never, never, never))]


def test_a_job_without_stages_has_no_stages_column(sandbox, tmp_path, obc, monkeypatch):
    out = compile_out(tmp_path, SWEEP)
    monkeypatch.setenv("HOME", str(sandbox.home))
    shown = obc("status", "--format", "json", str(out))
    assert [json.loads(line)["stages"] for line in shown.stdout.splitlines()] == [[]] * 3
    assert "stages" not in obc("status", str(out)).stdout
