"""A run that was killed is shown as killed, by `job.sh --status` and by `obc status` alike,
from the same facts: its record says running, and the run is gone (nothing holds its lock,
or the lock is gone, or its Slurm job has ended). The next run removes what it left in
.obc. Real shells, a real KILL, and the real Slurm cluster (docs/resume.md, "Run records")."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from compiler.cli.main import main
from tests.conftest import SHELLS, Sandbox, compile_text, start_script, write_script
from tests.script.test_killed_run import (
    groups,  # noqa: F401 (a fixture)
    kill_job,
    lock_takers,
    start_writing,
    stop_run,
    wait_gone,
    writer,  # noqa: F401 (a fixture)
    writers,
)
from tests.support.engines import wait_until
from tests.support.processes import alive
from tests.support.slurm_cluster import SlurmCluster

QUICK = """\
version: 1
id: killed
runtime: {kind: native}
steps: [{name: write, run: [sh, -c, "echo $$ >> shared-output.txt"]}]
"""


def job_status(script: Path, run_dir: Path, shell: str = "dash",
               env: dict[str, str] | None = None) -> tuple[int, dict | None]:
    """`job.sh --status`: its exit code and the record it prints."""
    done = subprocess.run([*SHELLS[shell], str(script), "--status", "--run-dir", str(run_dir)],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, **(env or {})})
    return done.returncode, json.loads(done.stdout) if done.stdout else None


def obc_status(capsys, *run_dirs: Path) -> tuple[int, list[dict]]:
    """`obc status --format json`: its exit code and, for each run dir, its record and
    why it has none."""
    code = main(["status", "--format", "json", *map(str, run_dirs)])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    return code, [{key: row[key] for key in ("run_dir", "record", "problem")} for row in rows]


def kill_run(script: Path, run_dir: Path, shell: str, env: dict[str, str],
             groups: list[int]) -> None:  # noqa: F811
    """Start a run, KILL its job.sh once the step writes, then its step: nothing of the
    run is left, and its record says running."""
    run, step = start_writing(script, run_dir, shell, env, groups)
    kill_job(run)
    run.wait()
    os.killpg(step, signal.SIGKILL)
    wait_gone(step, run.pid)


@pytest.mark.parametrize("shell", SHELLS)
def test_a_killed_run_is_shown_as_killed_by_status_and_obc_status(
        writer, tmp_path, sandbox, shell, groups, capsys):  # noqa: F811
    run_dir = tmp_path / "run"
    kill_run(writer, run_dir, shell, sandbox.env(), groups)
    assert json.loads((run_dir / ".obc" / "status.json").read_text())["state"] == "running"

    code, record = job_status(writer, run_dir, shell)

    assert code == 0
    assert (record["state"], record["step"], record["exit_code"], record["ended_at"]) == \
        ("killed", "write", None, None)
    assert obc_status(capsys, run_dir) == (0, [{"run_dir": str(run_dir), "record": record,
                                                "problem": None}])
    # The record on disk is left as the run left it.
    assert json.loads((run_dir / ".obc" / "status.json").read_text())["state"] == "running"


def test_a_run_whose_step_outlives_its_killed_job_is_still_running(
        writer, tmp_path, sandbox, groups, capsys):  # noqa: F811
    run_dir = tmp_path / "run"
    first, step = start_writing(writer, run_dir, "dash", sandbox.env(), groups)
    kill_job(first)
    first.wait()

    code, record = job_status(writer, run_dir)

    # Its step still writes into the run dir, holding the lock: the run has not gone.
    assert (code, record["state"]) == (0, "running")
    assert obc_status(capsys, run_dir)[1][0]["record"] == record
    os.killpg(step, signal.SIGKILL)
    wait_gone(step)
    assert job_status(writer, run_dir)[1]["state"] == "killed"


def test_status_and_obc_status_agree_on_every_kind_of_run_dir(
        writer, tmp_path, sandbox, groups, capsys):  # noqa: F811
    (tmp_path / "quick").mkdir()
    quick = write_script(tmp_path / "quick", compile_text(tmp_path / "quick", QUICK))
    running, finished, killed, unlocked, cut_short, never = (
        tmp_path / name for name in ("running", "finished", "killed", "unlocked", "cut-short",
                                     "never"))
    live, _ = start_writing(writer, running, "dash", sandbox.env(), groups)
    assert sandbox.run(quick, "--run-dir", str(finished)).returncode == 0
    kill_run(writer, killed, "dash", sandbox.env(), groups)
    # A run whose lock was removed by hand after it was killed.
    kill_run(writer, unlocked, "dash", sandbox.env(), groups)
    shutil.rmtree(unlocked / ".obc" / "lock")
    assert sandbox.run(quick, "--run-dir", str(cut_short)).returncode == 0
    cut_record = cut_short / ".obc" / "status.json"
    cut_record.write_text(cut_record.read_text()[:40])
    dirs = [running, finished, killed, unlocked, cut_short, never]

    shown = [job_status(writer, run_dir) for run_dir in dirs]
    # A run dir that is not there is no path obc status knows (given the job.sh, it says
    # not started).
    code, listed = obc_status(capsys, *dirs[:-1])

    assert [(c, r and r["state"]) for c, r in shown] == [
        (0, "running"), (0, "succeeded"), (0, "killed"), (0, "killed"), (1, None), (1, None)]
    assert [line["record"] for line in listed] == [record for _, record in shown[:-1]]
    assert [line["problem"] for line in listed] == [
        None, None, None, None,
        f"the record {cut_record} is empty or cut short (a full disk?): no state to show"]
    assert code == 1
    main(["status", *map(str, dirs[:-1])])
    assert [line.split()[:4] for line in capsys.readouterr().out.splitlines()][1:] == [
        [str(running), "running", "write", "1"], [str(finished), "done", "-", "1"],
        [str(killed), "killed", "write", "1"], [str(unlocked), "killed", "write", "1"],
        [str(cut_short), "unknown", "-", "-"],
        [f"{cut_short}:", "the", "record", str(cut_record)]]
    assert main(["status", str(never)]) == 2
    stop_run(live)


def test_the_next_run_removes_what_killed_runs_left_once_it_holds_the_lock(
        writer, tmp_path, sandbox, groups):  # noqa: F811
    run_dir = tmp_path / "run"
    obc = run_dir / ".obc"
    kill_run(writer, run_dir, "dash", sandbox.env(), groups)
    (left_tmp,) = obc.glob("tmp.*")
    with open(obc / "lock.take", "a") as turn:
        fcntl.flock(turn, fcntl.LOCK_EX)
        # A run killed while it waits for its turn to take the lock over leaves its own
        # lock half made.
        waiting = start_script(writer, "--run-dir", str(run_dir), shell="dash",
                               env=sandbox.env())
        groups.append(waiting.pid)
        wait_until(lambda: lock_takers([waiting]), "the run to wait for its turn")
        os.killpg(waiting.pid, signal.SIGKILL)
        waiting.wait()
        (half_made,) = [p for p in obc.glob("lock.??????") if p.name != "lock.take"]
        # A run that is making its lock now: what it made is not touched.
        rival = start_script(writer, "--run-dir", str(run_dir), shell="mksh", env=sandbox.env())
        groups.append(rival.pid)
        wait_until(lambda: lock_takers([rival]), "the rival to wait for its turn")
        assert left_tmp.exists() and half_made.exists()
        next_run = start_script(writer, "--run-dir", str(run_dir), shell="yash",
                                env=sandbox.env())
        groups.append(next_run.pid)
        wait_until(lambda: lock_takers([next_run]), "the next run to wait for its turn")

    wait_until(lambda: len(set(writers(run_dir))) == 2 and
               (rival.poll() is not None or next_run.poll() is not None),
               "one run to write and the other to end")
    (ran,) = [run for run in (rival, next_run) if run.poll() is None]
    (refused,) = [run for run in (rival, next_run) if run is not ran]
    assert refused.returncode == 4, refused.communicate()[1]
    assert not left_tmp.exists() and not half_made.exists()
    assert sorted(p.name for p in obc.iterdir() if p.name.startswith(("tmp.", "lock"))) == \
        ["lock", "lock.take", next(p.name for p in obc.glob("tmp.*"))]
    stop_run(ran)


# --- on the real Slurm cluster ----------------------------------------------------------

WRITER_ON_SLURM = """\
version: 1
id: killed-slurm
runtime: {kind: native}
paths: {run_dir: "${RUN}"}
steps: [{name: write, run: [sh, -c, "while :; do echo $$ >> shared-output.txt; sleep 1; done"]}]
slurm: {}
"""


def on_its_node(run_dir: Path) -> dict[str, str]:
    """The environment of a command run on the node that holds the run dir's lock, as
    Slurm names it: a lock names its machine by SLURMD_NODENAME, and the emulated nodes
    share this machine's `uname -n`."""
    return {"SLURMD_NODENAME": (run_dir / ".obc" / "lock" / "owner").read_text().split()[0]}


@pytest.mark.slow
def test_a_slurm_job_killed_with_kill_is_shown_as_killed(slurm: SlurmCluster, sandbox: Sandbox,
                                                         tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])
    script = write_script(tmp_path, compile_text(tmp_path, WRITER_ON_SLURM))
    running_dir, killed_dir = tmp_path / "running", tmp_path / "killed"
    running_id = slurm.submit(script, cwd=tmp_path, env=sandbox.env(RUN=str(running_dir)))
    killed_id = slurm.submit(script, cwd=tmp_path, env=sandbox.env(RUN=str(killed_dir)))
    for run_dir in (running_dir, killed_dir):
        slurm.wait_for(lambda d=run_dir: writers(d), 60, f"the step in {run_dir} to write")

    # job.sh itself is killed, as the OOM killer would (scancel --signal=KILL is a cancel:
    # the script gets TERM first); Slurm then ends the job and what it started.
    os.kill(int((killed_dir / ".obc" / "lock" / "owner").read_text().split()[1]),
            signal.SIGKILL)
    assert slurm.wait(killed_id).state == "FAILED"
    # This cluster tracks a job's processes by their parents (proctrack/linuxproc): the step,
    # whose parent was killed, runs on, holding the lock, so the run has not gone. Slurm with
    # proctrack/cgroup ends it with the job; here the test does.
    assert job_status(script, killed_dir, env=on_its_node(killed_dir))[1]["state"] == "running"
    (step,) = set(writers(killed_dir))
    os.killpg(step, signal.SIGKILL)
    slurm.wait_for(lambda: not alive(step), 30, "the step to end")

    for run_dir, state in ((running_dir, "running"), (killed_dir, "killed")):
        # On its own node (the lock), and as another machine sees it (Slurm's word).
        for node in (on_its_node(run_dir), {}):
            code, record = job_status(script, run_dir, env=node)
            assert (code, record["state"], record["slurm_job_id"]) == \
                (0, state, running_id if state == "running" else killed_id)
            with monkeypatch.context() as here:
                for name, value in node.items():
                    here.setenv(name, value)
                assert obc_status(capsys, run_dir)[1][0]["record"] == record
    assert slurm.run("scancel", running_id).returncode == 0
    slurm.wait(running_id)
