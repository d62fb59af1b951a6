"""health: (docs/preflight.md) with real torch and the real Slurm cluster's two emulated
nodes. No GPU exists here: nvidia-smi is a stub on the job's PATH that lists one GPU, or, on
the node named sick, none. The all-reduce is health.py's, in the Axolotl venv, over gloo."""

from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.axolotl.test_axolotl_real import (
    dump,
    free_port,
    home,
    last_lines,
    native,
    nodes_resolve,  # noqa: F401 -- a fixture, used by name
)
from tests.conftest import REPO, compile_text, write_script
from tests.support.axolotl import PROGRAMS, clean_env

pytestmark = pytest.mark.slow

JOB_TIMEOUT = 300


def nvidia_smi(folder: Path, sick: str) -> Path:
    """A stub nvidia-smi in `folder/bin` that lists one healthy GPU, or none on the node named
    in `folder/sick` (the first node that asks, if the file says `first`), and notes each node
    that asked in `folder/asked`."""
    stubs = folder / "bin"
    stubs.mkdir()
    (stubs / "nvidia-smi").write_text(f"""#!/bin/sh
echo "$SLURMD_NODENAME" >> '{folder}/asked'
[ "$(cat '{folder}/sick')" != first ] || echo "$SLURMD_NODENAME" > '{folder}/sick'
[ "$(cat '{folder}/sick')" = "$SLURMD_NODENAME" ] && exit 6
echo '0, [N/A]'
""")
    (stubs / "nvidia-smi").chmod(0o755)
    (folder / "sick").write_text(sick + "\n")
    return stubs


def submit(slurm, tmp_path: Path, run_file: dict, sick: str = "none") -> tuple[str, Path]:
    """Compile the run file, sbatch it with the stub first on PATH (`sick`: nvidia_smi's);
    return its Slurm id and its log."""
    script = write_script(tmp_path, compile_text(tmp_path, dump(run_file)))
    env = clean_env(home(tmp_path), path=f"{nvidia_smi(tmp_path, sick)}:/usr/bin:/bin")
    slurm_id = slurm.submit(script, cwd=tmp_path, env=env)
    return slurm_id, tmp_path / f"{run_file['id']}-{slurm_id}.out"


def test_every_rank_of_two_nodes_joins_the_all_reduce_before_torchrun_starts(
        slurm, nodes_resolve, axolotl_venv, tmp_path):  # noqa: F811 -- the fixture
    shutil.copy(PROGRAMS / "allreduce.py", tmp_path / "allreduce.py")
    run_dir = tmp_path / "run"
    torchrun = ('exec torchrun --nnodes "$NNODES" --nproc_per_node "$GPUS_PER_NODE" '
                '--rdzv_backend c10d --rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" '
                '--rdzv_id "$SLURM_JOB_ID" allreduce.py')
    slurm_id, log = submit(slurm, tmp_path, {
        "version": 1, "id": "healthy", "runtime": native(axolotl_venv),
        "paths": {"run_dir": str(run_dir)}, "files": {"allreduce.py": "allreduce.py"},
        "steps": [{"name": "allreduce", "nodes": "all", "run": ["sh", "-c", torchrun]}],
        "slurm": {"nodes": 2, "gpus_per_node": 1, "time": 30, "rendezvous_port": free_port()},
        "health": {"timeout": 120}})
    job = slurm.wait(slurm_id, timeout=JOB_TIMEOUT)
    text = log.read_text()
    assert (job.state, job.exit_code) == ("COMPLETED", 0), last_lines(text)
    assert sorted((tmp_path / "asked").read_text().split()) == ["n1", "n2"]
    # Each node's ranks joined one all-reduce of two; then torchrun's rendezvous took the
    # same port.
    assert sorted(line for line in text.splitlines() if line.startswith("obc: health:")) == [
        f"obc: health: node {n} of 2: the all-reduce across 2 ranks (gloo) is done"
        for n in (1, 2)]
    assert (run_dir / "allreduce-1.json").exists()


def test_a_node_that_fails_its_check_is_excluded_and_the_job_runs_on_another(
        slurm, axolotl_venv, tmp_path):
    run_dir = tmp_path / "run"
    slurm_id, log = submit(slurm, tmp_path, {
        "version": 1, "id": "sick-node", "runtime": native(axolotl_venv),
        "paths": {"run_dir": str(run_dir)},
        "steps": [{"name": "hello", "run": ["sh", "-c", 'echo "ran on $SLURMD_NODENAME"']}],
        "slurm": {"gpus_per_node": 1, "time": 30, "max_restarts": 1},
        "health": {"timeout": 120, "on_failure": "requeue"}}, sick="first")
    slurm.start_requeued(slurm_id)
    job = slurm.wait(slurm_id, timeout=JOB_TIMEOUT)
    text = log.read_text()
    assert (job.state, job.exit_code) == ("COMPLETED", 0), last_lines(text)
    sick = (tmp_path / "sick").read_text().strip()
    healthy = {"n1": "n2", "n2": "n1"}[sick]
    assert (job.fields["ExcNodeList"], job.fields["NodeList"], job.fields["Restarts"]) == (
        sick, healthy, "1")
    assert f"obc: sick-node: health check failed on {sick}: expected 1 GPU, nvidia-smi " \
        "lists 0 (it exited with 6)" in text
    assert f"obc: the health check failed on {sick}: requeued (restart 1 of 1)" in text
    assert f"ran on {healthy}" in text


def test_a_sick_node_of_two_stops_the_job_with_exit_3_naming_it(
        slurm, nodes_resolve, axolotl_venv, tmp_path):  # noqa: F811 -- the fixture
    run_dir = tmp_path / "run"
    slurm_id, log = submit(slurm, tmp_path, {
        "version": 1, "id": "stopped", "runtime": native(axolotl_venv),
        "paths": {"run_dir": str(run_dir)},
        "steps": [{"name": "train", "run": ["sh", "-c", "echo the step ran"]}],
        "slurm": {"nodes": 2, "gpus_per_node": 1, "time": 30, "rendezvous_port": free_port()},
        "health": {}}, sick="n2")
    job = slurm.wait(slurm_id, timeout=JOB_TIMEOUT)
    text = log.read_text()
    assert (job.state, job.exit_code) == ("FAILED", 3), last_lines(text)
    assert "obc: stopped: health check failed on n2: expected 1 GPU, nvidia-smi lists 0 " \
        "(it exited with 6)\n" in text
    assert "the step ran" not in text


def test_an_all_reduce_whose_peer_never_comes_is_killed_at_its_time_limit(axolotl_venv):
    # Node 1 of 2 alone: its rank waits at the rendezvous for one that is never started,
    # until the program's own alarm ends it (the shell's side: tests/script/test_health.py).
    done = subprocess.run(
        [str(axolotl_venv / "bin" / "python3"), str(REPO / "templates" / "health.py"),
         "10", "2", "0"], capture_output=True, text=True, timeout=120, check=False,
        env=clean_env(Path("/nonexistent"), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(free_port())))
    assert done.returncode == -signal.SIGALRM, done.stderr
