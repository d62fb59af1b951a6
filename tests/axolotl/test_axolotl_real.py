"""Real Axolotl as the judge: obc's Axolotl jobs fine-tune a tiny model on the CPU.

Each job is compiled from a run file exactly as a user's, and started as an admin, cron or
sbatch would: `env -i PATH=/usr/bin:/bin HOME=...`, no venv active. Natively, under the real
Slurm cluster (two nodes with torchrun's rendezvous; one node, as the stages of a pipeline, in
test_axolotl_stages.py), and in real podman with
the host's Python and the Axolotl venv mounted read-only. tests/support/axolotl.py has the venv, the
tiny model and the config; tests/support/programs/allreduce.py the multi-node torch program.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests.conftest import compile_text, write_script
from tests.support.axolotl import (
    OFFLINE,
    OUTPUT_DIR,
    PROGRAMS,
    STEPS,
    clean_env,
    host_python_mounts,
    lora_config,
    missing_outputs,
)

pytestmark = pytest.mark.slow

# Long enough for preprocess, train and merge-lora on a busy two-core machine.
JOB_TIMEOUT = 900


def dump(data: dict) -> str:
    stream = io.StringIO()
    yaml = YAML()
    yaml.default_flow_style = False
    yaml.dump(data, stream)
    return stream.getvalue()


def axolotl_run_file(job_id: str, runtime: dict, config: dict, env: dict | None = None,
                     **more: object) -> str:
    """A run file that preprocesses, trains and merges with `config`, offline."""
    return dump({"version": 1, "id": job_id, "runtime": runtime,
                 "trainer": {"axolotl": {"config": config, "preprocess": True, "merge": True}},
                 "env": {"HF_HUB_OFFLINE": "1", **(env or {})}, **more})


def last_lines(text: str, count: int = 40) -> str:
    return "\n".join(text.splitlines()[-count:])


def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir(exist_ok=True)
    return folder


def native(venv: Path) -> dict:
    return {"kind": "native", "venv": str(venv)}


def run_job(tmp_path: Path, text: str, **env: str) -> None:
    """Compile the run file `text` and run its job.sh as an admin would; it must succeed."""
    script = write_script(tmp_path, compile_text(tmp_path, text))
    result = subprocess.run(["sh", str(script)], env=clean_env(home(tmp_path), **env),
                            capture_output=True, text=True, timeout=JOB_TIMEOUT, check=False)
    assert result.returncode == 0, last_lines(result.stderr)


def sbatch_job(slurm, tmp_path: Path, job_id: str, text: str) -> None:
    """Compile the run file `text` and sbatch its job.sh; it must complete."""
    script = write_script(tmp_path, compile_text(tmp_path, text))
    slurm_id = slurm.submit(script, cwd=tmp_path, env=clean_env(home(tmp_path)))
    job = slurm.wait(slurm_id, timeout=JOB_TIMEOUT)
    log = (tmp_path / f"{job_id}-{slurm_id}.out").read_text()
    assert (job.state, job.exit_code) == ("COMPLETED", 0), last_lines(log)


def test_axolotl_train_cannot_start_accelerate_without_its_venv_on_path(
        axolotl_venv, tiny_model, tmp_path):
    # What a job meets that runs <venv>/bin/axolotl without activating the venv: `train`
    # execs `accelerate` by name (os.execvpe), from PATH, and reports the last folder tried.
    (tmp_path / "axolotl.yaml").write_text(dump(lora_config(tiny_model)))
    result = subprocess.run([str(axolotl_venv / "bin" / "axolotl"), "train", "axolotl.yaml"],
                            cwd=tmp_path, env=clean_env(home(tmp_path), **OFFLINE),
                            capture_output=True, text=True, timeout=JOB_TIMEOUT, check=False)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == \
        "FileNotFoundError: [Errno 2] No such file or directory: b'/bin/accelerate'"


def test_a_native_axolotl_job_preprocesses_trains_and_merges(axolotl_venv, tiny_model,
                                                             tmp_path):
    run_dir = tmp_path / "run"
    run_job(tmp_path, axolotl_run_file("native-axolotl", native(axolotl_venv),
                                       lora_config(tiny_model), paths={"run_dir": str(run_dir)}))
    assert missing_outputs(run_dir) == []


def test_an_axolotl_job_runs_in_podman(podman, axolotl_image, axolotl_venv, tiny_model,
                                       tmp_path, cleanup):
    job_id = f"podman-axolotl-{os.getpid()}"
    cleanup.append((podman, f"overbrainer-{job_id}"))
    run_dir = tmp_path / "run"
    mounts = [*host_python_mounts(axolotl_venv),
              {"source": str(tiny_model.root), "target": str(tiny_model.root),
               "readonly": True}]
    runtime = {"kind": "podman", "image": axolotl_image, "gpus": "none", "mounts": mounts,
               "extra_args": ["--network=none"]}
    run_job(tmp_path, axolotl_run_file(
        job_id, runtime, lora_config(tiny_model),
        paths={"run_dir": str(run_dir), "cache_dir": str(tmp_path / "cache")}), **podman.env)
    assert missing_outputs(run_dir) == []


# Two nodes: two `slurmd -N` on this machine, both at 127.0.0.1.

@pytest.fixture(scope="session")
def nodes_resolve() -> None:
    """Make the emulated nodes' names resolve, as a real cluster's do: the rendezvous host
    (MASTER_ADDR) is the first node's name, and torch looks it up."""
    try:
        socket.gethostbyname("n2")
    except socket.gaierror:
        with open("/etc/hosts", "a", encoding="utf-8") as hosts:
            hosts.write("127.0.0.1 n1 n2  # the emulated Slurm nodes of obc's tests\n")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def two_nodes() -> dict:
    return {"nodes": 2, "gpus_per_node": 1, "time": 30, "rendezvous_port": free_port()}


def test_torchrun_joins_the_ranks_of_two_nodes_in_one_all_reduce(
        slurm, nodes_resolve, axolotl_venv, tmp_path):
    shutil.copy(PROGRAMS / "allreduce.py", tmp_path / "allreduce.py")
    run_dir = tmp_path / "run"
    torchrun = ('exec torchrun --nnodes "$NNODES" --nproc_per_node "$GPUS_PER_NODE" '
                '--rdzv_backend c10d --rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" '
                '--rdzv_id "$SLURM_JOB_ID" allreduce.py')
    sbatch_job(slurm, tmp_path, "allreduce", dump({
        "version": 1, "id": "allreduce", "runtime": native(axolotl_venv),
        "paths": {"run_dir": str(run_dir)},
        "files": {"allreduce.py": "allreduce.py"},
        "steps": [{"name": "allreduce", "nodes": "all", "run": ["sh", "-c", torchrun]}],
        "slurm": two_nodes()}))
    records = [json.loads((run_dir / f"allreduce-{rank}.json").read_text())
               for rank in (0, 1)]
    assert [(r["rank"], r["world_size"], r["sum"]) for r in records] == [
        (0, 2, 3.0), (1, 2, 3.0)]
    assert sorted(r["node"] for r in records) == ["n1", "n2"]


def test_axolotl_trains_one_model_across_two_nodes_with_torchrun(
        slurm, nodes_resolve, axolotl_venv, tiny_model, tmp_path):
    # Axolotl 0.19 on CPU, several processes: `max_memory` keeps the model off CUDA
    # (normalize_config pins device_map to the local rank, a CUDA index), and
    # ACCELERATE_USE_CPU makes the trainer use the gloo process group (otherwise each rank
    # trains alone).
    run_dir = tmp_path / "run"
    config = lora_config(tiny_model, max_memory={"cpu": "2GiB"})
    sbatch_job(slurm, tmp_path, "multinode-axolotl", axolotl_run_file(
        "multinode-axolotl", native(axolotl_venv), config, env={"ACCELERATE_USE_CPU": "true"},
        paths={"run_dir": str(run_dir)}, slurm=two_nodes()))
    assert missing_outputs(run_dir) == []
    # One data-parallel group of two ranks: each step took a micro batch on each node, so
    # the steps covered twice the rows a single process would have.
    rows = len(tiny_model.data.read_text().splitlines())
    state = json.loads((run_dir / OUTPUT_DIR / f"checkpoint-{STEPS}" / "trainer_state.json")
                       .read_text())
    assert state["epoch"] == STEPS * config["micro_batch_size"] * 2 / rows
