"""Sweeps on the real Slurm cluster of tests/support/slurm_cluster.py (docs/sweeps.md): sweep.sh
--submit makes one job array whose tasks each run their own run's job.sh, at most
max_parallel at a time; a task whose job.sh was edited exits 3; one task requeues alone;
and sbatch --test-only accepts the dispatcher.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, Sandbox, make_sandbox
from tests.script.test_sweep_script import compile_out
from tests.support.slurm_cluster import FINISHED, SlurmCluster

pytestmark = pytest.mark.slow

# Six runs. Each step says it is running (a file of its own while it runs), records how many
# are, and runs two seconds: long enough for a seventh task to start beside it, were the
# throttle not there.
SIX = """\
version: 1
id: six
runtime: {kind: native}
steps:
  - name: s
    run:
      - sh
      - -c
      - >-
        d=$OBC_STUB_STATE/running; mkdir -p "$d"; : > "$d/$SLURM_JOB_ID";
        ls "$d" | wc -l >> "$OBC_STUB_STATE/counts"; record "$LABEL"; sleep 2;
        rm "$d/$SLURM_JOB_ID"
slurm: {time: 10, requeue: true}
matrix:
  axes:
    n: {set: env.LABEL, values: [a, b, c, d, e, f]}
  max_parallel: 2
"""


def sweep_sh(slurm: SlurmCluster, box: Sandbox, out: Path, *args: str,
             cwd: Path) -> subprocess.CompletedProcess:
    """Run OUT/six/sweep.sh ARGS from `cwd`, with the sandbox's environment and Slurm's."""
    return subprocess.run(["sh", str(out / "six/sweep.sh"), *args], cwd=cwd,
                          env={**box.env(), **slurm.env}, capture_output=True, text=True,
                          timeout=120, check=False)


def submitted(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stderr
    return re.fullmatch(r"Submitted batch job (\d+)\n", result.stdout).group(1)


def tasks(slurm: SlurmCluster, array: str) -> dict[int, dict[str, str]]:
    """Each task of a job array, by index, as `scontrol show job` describes it."""
    shown = slurm.run("scontrol", "show", "job", "-o", array)
    found = {}
    for line in shown.stdout.splitlines():
        fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
        if "ArrayTaskId" in fields and fields["ArrayTaskId"].isdigit():
            found[int(fields["ArrayTaskId"])] = fields
    return found


def wait_for_tasks(slurm: SlurmCluster, array: str, count: int,
                   timeout: float = 180) -> dict[int, dict[str, str]]:
    """Wait until each of `count` tasks has ended, checking on the way that never more than
    two run at once; return them."""
    deadline = time.monotonic() + timeout
    while True:
        found = tasks(slurm, array)
        running = [t for t in found.values() if t["JobState"] == "RUNNING"]
        assert len(running) <= 2, running
        if len(found) == count and all(t["JobState"] in FINISHED for t in found.values()):
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.2)


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    return make_sandbox(tmp_path / "box")


def test_a_six_run_array_runs_each_run_in_its_own_task_two_at_a_time(slurm, box, tmp_path):
    out = compile_out(tmp_path, SIX)
    array = submitted(sweep_sh(slurm, box, out, "--submit", cwd=tmp_path))
    found = wait_for_tasks(slurm, array, 6)
    assert {t["JobState"] for t in found.values()} == {"COMPLETED"}, found
    assert {t["JobName"] for t in found.values()} == {"six"}
    # Each task ran its own run: the label of its index, in the run dir of its id.
    runs = box.home / "overbrainer/runs"
    by_task = {int(r["env"]["SLURM_ARRAY_TASK_ID"]): (r["argv"], r["cwd"], r["env"])
               for r in box.records()}
    assert sorted(by_task) == [0, 1, 2, 3, 4, 5]
    for index, label in enumerate("abcdef"):
        argv, cwd, env = by_task[index]
        assert (argv, cwd) == ([label], str(runs / f"six-{label}"))
        assert env["SLURM_ARRAY_JOB_ID"] == array and env["WANDB_RUN_GROUP"] == "six"
        log = (tmp_path / f"six-{array}_{index}.out").read_text()
        assert f"obc: sweep six: array task {index} is run six-{label}\n" in log
    counts = [int(n) for n in (box.state / "counts").read_text().split()]
    assert len(counts) == 6 and max(counts) <= 2


def test_a_task_whose_job_sh_was_edited_exits_3_and_the_others_run(slurm, box, tmp_path):
    out = compile_out(tmp_path, SIX.replace("[a, b, c, d, e, f]", "[a, b, c]"))
    job = out / "six-b/job.sh"
    original = job.read_text()
    job.write_text(original + "# edited\n")
    # --submit checks first, and submits nothing.
    refused = sweep_sh(slurm, box, out, "--submit", cwd=tmp_path)
    assert (refused.returncode, refused.stdout) == (3, "")
    assert "is not the job.sh obc compiled for run six-b" in refused.stderr
    # Edited after the submit, before its task starts: the task refuses it.
    job.write_text(original)
    array = submitted(sweep_sh(slurm, box, out, "--submit", "--", "--hold", cwd=tmp_path))
    job.write_text(original + "# edited\n")
    assert slurm.run("scontrol", "release", array).returncode == 0
    found = wait_for_tasks(slurm, array, 3)
    assert {i: (t["JobState"], t["ExitCode"]) for i, t in found.items()} == {
        0: ("COMPLETED", "0:0"), 1: ("FAILED", "3:0"), 2: ("COMPLETED", "0:0")}
    assert sorted(r["argv"] for r in box.records()) == [["a"], ["c"]]
    log = (tmp_path / f"six-{array}_1.out").read_text()
    assert f"obc: {job} is not the job.sh obc compiled for run six-b" in log


def test_requeueing_one_task_requeues_that_task_alone(slurm, box, tmp_path):
    out = compile_out(tmp_path, SIX.replace("[a, b, c, d, e, f]", "[a, b, c]"))
    array = submitted(sweep_sh(slurm, box, out, "--submit", cwd=tmp_path))
    wait_for_tasks(slurm, array, 3)
    assert slurm.run("scontrol", "requeue", f"{array}_1").returncode == 0
    slurm.wait_for(lambda: tasks(slurm, array)[1]["JobState"] == "PENDING", 60,
                   "task 1 to be requeued")
    assert {i: t["JobState"] for i, t in tasks(slurm, array).items()} == {
        0: "COMPLETED", 1: "PENDING", 2: "COMPLETED"}
    # Slurm holds a requeued job back; let it start (not in the second its credential was
    # revoked: the node would refuse it, see tests/slurm/test_slurm.py).
    requeued = int(time.time())
    slurm.wait_for(lambda: time.time() >= requeued + 2, 10, "the next second but one")
    assert slurm.run("scontrol", "update", f"JobId={array}_1", "StartTime=now").returncode == 0
    found = wait_for_tasks(slurm, array, 3)
    assert {i: (t["JobState"], t["Restarts"]) for i, t in found.items()} == {
        0: ("COMPLETED", "0"), 1: ("COMPLETED", "1"), 2: ("COMPLETED", "0")}
    logs = {i: (tmp_path / f"six-{array}_{i}.out").read_text() for i in range(3)}
    for index, label in enumerate("abc"):
        started = logs[index].count(f"obc: sweep six: array task {index} is run six-{label}\n")
        assert started == (2 if index == 1 else 1), logs[index]
    # The requeued run had finished its step for these inputs: it has nothing left to do.
    assert "obc: every step finished before for these inputs" in logs[1]
    assert sorted(r["argv"] for r in box.records()) == [["a"], ["b"], ["c"]]


def test_sbatch_test_only_accepts_the_dispatcher(slurm, box, tmp_path):
    out = compile_out(tmp_path, SIX)
    test = sweep_sh(slurm, box, out, "--submit", "--", "--test-only", cwd=tmp_path)
    assert test.returncode == 0 and "to start at" in test.stderr, test.stderr
    # As an admin would, with the #SBATCH lines of the file alone; and the example's.
    for script in (out / "six/sweep.sh", REPO / "out/lr-sweep/sweep.sh"):
        test = slurm.run("sbatch", "--test-only", str(script))
        assert test.returncode == 0 and "to start at" in test.stderr, (script, test.stderr)


def test_sbatch_of_sweep_sh_in_its_folder_finds_the_runs(slurm, box, tmp_path):
    out = compile_out(tmp_path, SIX.replace("[a, b, c, d, e, f]", "[a, b]"))
    result = subprocess.run(["sbatch", "--parsable", "sweep.sh"], cwd=out / "six",
                            env={**box.env(), **slurm.env}, capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    found = wait_for_tasks(slurm, result.stdout.strip(), 2)
    assert {t["JobState"] for t in found.values()} == {"COMPLETED"}
    assert sorted(r["argv"] for r in box.records()) == [["a"], ["b"]]
