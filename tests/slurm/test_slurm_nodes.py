"""The contract of a job on several nodes, on the real Slurm cluster (two emulated nodes,
tests/slurm_cluster.py): every node runs exactly the script that was checked, or refuses
with exit 3, under sbatch and salloc and from a relative or an absolute path; the rank that
failed first gives the step its exit code; and one job.sh started twice in one Slurm job
(`srun -n2`) runs one copy, the other exiting 4 (docs/slurm.md, docs/security.md).
The other user is uid 65534 (nobody), as in tests/script/test_other_users.py."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import SHELLS, Sandbox, compile_text, open_folder, untimed, write_script
from tests.slurm.test_slurm import output, submit
from tests.support.slurm_cluster import SlurmCluster

pytestmark = pytest.mark.slow

# The first step waits (on the first node) until the test lets it go; then `train` runs on
# every node.
TWO_STEPS = """\
version: 1
id: {id}
runtime: {{kind: native}}
paths: {{run_dir: {run_dir}, shared: true}}
steps:
  - {{name: first, run: [sh, -c, 'record first; while [ ! -e go ]; do sleep 0.1; done']}}
  - {{name: train, run: [record, train], nodes: all}}
slurm: {{nodes: 2, gpus_per_node: 1}}
"""


@pytest.fixture
def team() -> Iterator[Path]:
    """A folder the whole team can write, without the sticky bit (the trial's), that the
    other user can reach."""
    yield from open_folder("obc-team-", 0o777)


def as_teammate(command: str) -> None:
    """Run a shell command as the other user, nobody."""
    subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c",
                    command], check=True, timeout=30)


def salloc(slurm: SlurmCluster, sandbox: Sandbox, cwd: Path, *argv: str,
           **env: str) -> subprocess.CompletedProcess:
    """`salloc -N2 ARGV...` from cwd, with the sandbox's environment: the command runs here,
    in an allocation of both nodes, as an engineer runs a job by hand."""
    return subprocess.run(["salloc", "-N2", *argv], cwd=cwd, capture_output=True, text=True,
                          env={**sandbox.env(**env), **slurm.env}, timeout=120, check=False)


@pytest.mark.parametrize("swap", ["their .obc", "their .obc with our folders", "our copy edited"])
def test_a_script_put_in_place_of_the_nodes_copy_during_a_step_never_runs(
        slurm, sandbox, tmp_path, team, swap):
    run_dir = team / "swap"
    run_dir.mkdir()
    run_dir.chmod(0o777)  # the team's run dir: a teammate can rename what is in it
    marker = team / "pwned"
    job_id = submit(slurm, sandbox, tmp_path, TWO_STEPS.format(id="swap", run_dir=run_dir))
    slurm.wait_for(lambda: len(sandbox.records()) == 1, 60, "the first step to start")
    ours = run_dir / ".obc"
    text = (ours / "job.sh").read_text()
    theirs = text.replace("\nset -u\n", f"\nset -u\necho \"$(id -u) on $(uname -n)\" >> {marker}\n")
    assert theirs != text
    if swap == "our copy edited":
        (ours / "job.sh").write_text(theirs)
    else:
        (team / "theirs.sh").write_text(theirs)
        # What the trial's teammate did: our .obc aside, and one of theirs in its place
        # (mirroring our folders in it, so that what the job writes by name still works).
        folders = " ".join(f"'.obc/{p.name}'" for p in ours.iterdir() if p.is_dir())
        mirror = f" && mkdir -p {folders}" if swap.endswith("folders") else ""
        as_teammate(f"cd '{run_dir}' && mv .obc .obc-aside && mkdir .obc{mirror} && "
                    f"cp '{team}/theirs.sh' .obc/job.sh && chmod -R a+rwX .obc")
    (run_dir / "go").touch()
    job = slurm.wait(job_id)
    log = output(tmp_path, "swap", job_id)
    assert job.exit_code == 3, log
    assert not marker.exists(), marker.read_text()
    assert [r["argv"] for r in sandbox.records()] == [["first"]]
    if swap == "our copy edited":
        # Each node checked its own copy: they refuse, naming themselves.
        assert f"refuses to run {run_dir}/.obc/job.sh: it is not the script this job " \
               "checked (its sha256 differs)" in log
        assert "obc: node n1 (rank 0) refuses" in log or "obc: node n2 (rank 1) refuses" in log
    else:
        assert f"obc: {run_dir}/.obc is no longer the folder this run made" in log


def test_salloc_runs_the_current_script_on_every_node_from_a_relative_or_absolute_path(
        slurm, sandbox, tmp_path):
    # The node's part of the step is the script's own code: its env, here, says which ran.
    text = TWO_STEPS.format(id="current", run_dir=tmp_path / "run") + "env: {VERSION: @}\n"
    # An earlier version ran in the run dir, and left its copy there.
    old = write_script(tmp_path, compile_text(tmp_path, text.replace("@", "old")))
    (tmp_path / "run").mkdir()
    (tmp_path / "run/go").touch()
    assert salloc(slurm, sandbox, tmp_path, "sh", str(old)).returncode == 0
    script = Path("out/current/job.sh")
    (tmp_path / script.parent).mkdir(parents=True, exist_ok=True)
    write_script(tmp_path / script.parent, compile_text(tmp_path, text.replace("@", "current")))
    for path in (script, tmp_path / script, Path(".") / script):
        ran = salloc(slurm, sandbox, tmp_path, "sh", str(path), "--fresh")
        assert ran.returncode == 0, ran.stderr
    trains = [(r["env"]["VERSION"], r["env"]["SLURMD_NODENAME"]) for r in sandbox.records()
              if r["argv"] == ["train"]]
    assert sorted(trains) == sorted([("old", "n1"), ("old", "n2")]
                                    + 3 * [("current", "n1"), ("current", "n2")])


@pytest.mark.parametrize("shell", SHELLS)
def test_in_every_shell_the_nodes_run_its_text_and_leave_no_private_copy(
        slurm, sandbox, tmp_path, shell):
    private = tmp_path / "private"
    private.mkdir()
    text = TWO_STEPS.format(id="shells", run_dir=tmp_path / "run") + "env: {VERSION: 2}\n"
    (tmp_path / "out/shells").mkdir(parents=True)
    write_script(tmp_path / "out/shells", compile_text(tmp_path, text))
    (tmp_path / "run").mkdir()
    (tmp_path / "run/go").touch()
    ran = salloc(slurm, sandbox, tmp_path, *SHELLS[shell], "out/shells/job.sh",
                 TMPDIR=str(private))
    assert ran.returncode == 0, ran.stderr
    trains = [(r["env"]["VERSION"], r["env"]["SLURMD_NODENAME"]) for r in sandbox.records()
              if r["argv"] == ["train"]]
    assert sorted(trains) == [("2", "n1"), ("2", "n2")]
    assert list(private.iterdir()) == []


def test_a_script_read_from_standard_input_cannot_give_the_nodes_a_copy(
        slurm, sandbox, tmp_path):
    write_script(tmp_path, compile_text(tmp_path, TWO_STEPS.format(
        id="stdin", run_dir=tmp_path / "run")))
    ran = subprocess.run("salloc -N2 sh -s < job.sh", shell=True, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, check=False,
                         env={**sandbox.env(), **slurm.env})
    assert ran.returncode == 3, ran.stderr
    assert "obc: preflight: cannot read this script's own text" in ran.stderr
    assert not sandbox.records()


# Rank 0 starts and waits; the failing rank fails once the other runs, which srun then stops
# with TERM (143).
FAILING_RANK = """\
version: 1
id: {id}
runtime: {runtime}
steps:
  - name: train
    nodes: all
    run: [sh, -c, 'if [ "$NODE_RANK" = {rank} ]; then
                     while [ ! -e started ]; do sleep 0.1; done;
                     [ -e tried ] || {{ : > tried; exit {code}; }};
                   else : > started; fi; record; exec sleep 300']
{retry}slurm: {{nodes: 2, gpus_per_node: 1, time: 10}}
"""


@pytest.mark.parametrize(("kind", "rank", "node", "code"), [
    ("native", 1, "n2", 9), ("native", 0, "n1", 7), ("apptainer", 1, "n2", 9)])
def test_the_rank_that_failed_first_gives_the_job_its_exit_code(
        slurm, sandbox, tmp_path, kind, rank, node, code):
    runtime = "{kind: native}"
    if kind == "apptainer":  # the stub apptainer of the sandbox, on every node
        (tmp_path / "axolotl.sif").write_bytes(b"SIF image")
        runtime = f"{{kind: apptainer, image: {tmp_path}/axolotl.sif}}"
    job_id = submit(slurm, sandbox, tmp_path, FAILING_RANK.format(
        id="ranks", runtime=runtime, rank=rank, code=code, retry=""))
    job = slurm.wait(job_id)
    log = output(tmp_path, "ranks", job_id)
    assert job.exit_code == code, log
    assert f"obc: step 1/1 train: rank {rank} failed first, on node {node}, " \
           f"with exit code {code}" in untimed(log)
    assert f"obc: step 1/1 train failed with exit code {code}" in untimed(log)
    status = json.loads((sandbox.home / "overbrainer/runs/ranks/.obc/status.json").read_text())
    assert (status["state"], status["exit_code"]) == ("failed", code)


def test_a_ranks_exit_code_listed_in_retry_requeues_the_job(slurm, sandbox, tmp_path):
    # Rank 1 fails the first time only; the ranks then end by themselves.
    text = FAILING_RANK.format(id="retried", runtime="{kind: native}", rank=1, code=9,
                               retry="retry: {on_exit_codes: [9], max: 1}\n")
    job_id = submit(slurm, sandbox, tmp_path, text.replace("exec sleep 300", "exit 0"))
    run_dir = sandbox.home / "overbrainer/runs/retried"
    slurm.wait_for((run_dir / "tried").exists, 60, "rank 1 to fail")
    slurm.start_requeued(job_id)
    job = slurm.wait(job_id)
    log = output(tmp_path, "retried", job_id)
    assert (job.state, job.exit_code, job.fields["Restarts"]) == ("COMPLETED", 0, "1"), log
    assert "obc: step train exited with 9: requeued (restart 1 of 1)" in log


LOCKED = """\
version: 1
id: twice
runtime: {kind: native}
steps: [{name: only, run: [sh, -c, 'record; while [ ! -e go ]; do sleep 0.1; done']}]
slurm: {}
"""


@pytest.mark.parametrize("nodes", [2, 1])
def test_one_job_sh_started_twice_in_one_slurm_job_runs_once(slurm, sandbox, tmp_path, nodes):
    script = write_script(tmp_path, compile_text(tmp_path, LOCKED))
    # The second task starts once the first one's step runs, and says how it ended.
    tasks = (f"if [ \"$SLURM_PROCID\" = 1 ]; then while [ ! -s '{sandbox.state}/log.jsonl' ]; "
             f"do sleep 0.1; done; sh '{script}'; echo $? > second; else sh '{script}'; fi")
    srun = subprocess.Popen(["salloc", f"-N{nodes}", "-n2", "srun", f"-N{nodes}", "-n2", "sh", "-c",
                             tasks], cwd=tmp_path, env={**sandbox.env(), **slurm.env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        slurm.wait_for((tmp_path / "second").exists, 60, "the second copy to end")
        (sandbox.home / "overbrainer/runs/twice/go").touch()
        _, stderr = srun.communicate(timeout=60)
    finally:
        if srun.poll() is None:
            srun.kill()
            srun.communicate()
    assert (tmp_path / "second").read_text() == "4\n", stderr
    assert len(sandbox.records()) == 1
    assert "is in use by another run of this job" in stderr
    # The lock names the first copy's node, n1: on two nodes the second copy, on n2, took the
    # path of a lock from another machine (though the emulated nodes share one `uname -n`).
    assert "(host, pid, Slurm job, restart: n1 " in stderr
    assert "obc: twice done" in stderr
