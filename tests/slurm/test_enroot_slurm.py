"""enroot jobs on the real test cluster with the fake pyxis (tests/support/pyxis): the real
sbatch runs job.sh, whose steps the real srun starts with pyxis's options, which slurmstepd
hands the plugin; it records each task's options, argv and environment, and runs the task
natively (with the stub trainer of the sandbox). Single-node and two-node jobs, secrets by name,
--container-env naming every variable the job sets, TERM and scancel."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from compiler.model.trainers import AXOLOTL
from tests.conftest import Sandbox, compile_text, untimed, write_script
from tests.script.test_apptainer_jobs import run_dir_hash
from tests.slurm.test_pyxis_plugin import pyxis  # noqa: F401 (the cluster, a fixture)
from tests.slurm.test_slurm_nodes import FAILING_RANK
from tests.support.processes import alive
from tests.support.pyxis import read_records

pytestmark = pytest.mark.slow

IMAGE = "nvcr.io/nvidia/pytorch:24.01-py3"
CANARY = "hf_CANARY,it's $(id) \"x\""
# What Slurm sets in a task beyond what the batch script had: not the job's to name.
SLURM_TASK_NAMES = ("SLURM_", "SLURMD_", "SRUN_", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES",
                    "ZE_AFFINITY_MASK", "OLDPWD", "PWD", "TMPDIR")


def submit(pyxis, sandbox: Sandbox, tmp_path: Path, text: str, **env: str) -> str:  # noqa: F811
    cluster, _ = pyxis
    script = write_script(tmp_path, compile_text(tmp_path, text))
    return cluster.submit(script, cwd=tmp_path, env=sandbox.env(**env))


def job_records(pyxis, job_id: str) -> dict[str, list[dict]]:  # noqa: F811
    """The plugin's records of a job, by step ("batch", "0", ...), each by task."""
    _, records = pyxis
    found: dict[str, list[dict]] = {}
    for record in read_records(records):
        if record["job"] == int(job_id):
            found.setdefault(record["step"], []).append(record)
    return {step: sorted(tasks, key=lambda r: r["task"]) for step, tasks in found.items()}


def changed_by_the_job(task: dict, batch: dict) -> set[str]:
    """The variables a task has that the batch script did not have, or had otherwise."""
    return {name for name, value in task["env"].items()
            if batch["env"].get(name) != value and not name.startswith(SLURM_TASK_NAMES)}


def output(tmp_path: Path, name: str, job_id: str) -> str:
    return (tmp_path / f"{name}-{job_id}.out").read_text()


def test_a_one_node_job_runs_each_step_through_pyxis_with_every_name_it_sets(
        pyxis, sandbox, tmp_path):  # noqa: F811
    cluster, _ = pyxis
    job_id = submit(pyxis, sandbox, tmp_path, f"""\
version: 1
id: enroot-one
runtime: {{kind: enroot, image: {IMAGE}}}
trainer: {{axolotl: {{config: {{base_model: x}}, preprocess: true, merge: true}}}}
env: {{WANDB_PROJECT: "a,b $c", LANG: C.UTF-8}}
secrets: [HF_TOKEN]
slurm: {{gpus_per_node: 2}}
""", HF_TOKEN=CANARY)
    job = cluster.wait(job_id)
    log = output(tmp_path, "enroot-one", job_id)
    assert (job.state, job.exit_code) == ("COMPLETED", 0), log
    run_dir = sandbox.home / "overbrainer/runs/enroot-one"
    cache_dir = sandbox.home / "overbrainer/.hf-cache"
    records = job_records(pyxis, job_id)
    # No pyxis option in the #SBATCH lines: it would reach the batch script and every step.
    assert records["batch"][0]["options"] == {}
    names = ",".join(["HF_HOME", *dict(AXOLOTL.env), "WANDB_PROJECT", "LANG", "WANDB_RUN_ID",
                      "HF_TOKEN", "CUDA_VISIBLE_DEVICES"])
    options = {"container-image": "nvcr.io#nvidia/pytorch:24.01-py3",
               "container-mounts": f"{run_dir}:/workspace/run,{cache_dir}:/workspace/hf-cache",
               "container-workdir": "/workspace/run", "no-container-mount-home": True,
               "container-env": names}
    assert sorted(step for step in records if step != "batch") == ["0", "1", "2"]
    for step, argv in (("0", "preprocess"), ("1", "train"), ("2", "merge-lora")):
        (task,) = records[step]
        assert task["options"] == options
        assert task["argv"] == ["axolotl", argv, "axolotl.yaml"]
        assert {name: task["env"][name] for name in names.split(",")} == {
            "HF_HOME": "/workspace/hf-cache", **dict(AXOLOTL.env), "WANDB_PROJECT": "a,b $c",
            "LANG": "C.UTF-8", "WANDB_RUN_ID": f"enroot-one-{run_dir_hash(run_dir)}",
            "HF_TOKEN": CANARY, "CUDA_VISIBLE_DEVICES": "0,1"}
        # Whatever the job set for its step, pyxis is told to keep.
        assert changed_by_the_job(task, records["batch"][0]) <= set(names.split(","))
    assert "CANARY" not in log and "CANARY" not in (tmp_path / "job.sh").read_text()
    assert [r["argv"] for r in sandbox.records()] == [
        ["preprocess", "axolotl.yaml"], ["train", "axolotl.yaml"],
        ["merge-lora", "axolotl.yaml"]]


TWO_NODES = f"""\
version: 1
id: enroot-two
runtime: {{kind: enroot, image: {IMAGE}}}
steps:
  - {{name: everywhere, run: [record, rank], nodes: all}}
  - {{name: once, run: [record, once]}}
secrets: [HF_TOKEN]
slurm: {{nodes: 2, gpus_per_node: 2, rendezvous_port: 29612}}
"""


def test_a_two_node_step_is_one_task_per_node_with_its_rank_and_the_rendezvous(
        pyxis, sandbox, tmp_path):  # noqa: F811
    cluster, _ = pyxis
    job_id = submit(pyxis, sandbox, tmp_path, TWO_NODES, HF_TOKEN=CANARY)
    job = cluster.wait(job_id)
    assert (job.state, job.exit_code) == ("COMPLETED", 0), output(tmp_path, "enroot-two", job_id)
    records = job_records(pyxis, job_id)
    everywhere, once = records["0"], records["1"]
    assert [(t["task"], t["node"]) for t in everywhere] == [(0, 0), (1, 1)]
    assert [t["node"] for t in once] == [0]
    names = ("HF_HOME,HF_TOKEN,CUDA_VISIBLE_DEVICES,MASTER_ADDR,MASTER_PORT,NNODES,NODE_RANK,"
             "GPUS_PER_NODE")
    for task in everywhere + once:
        assert task["options"]["container-env"] == names
        assert changed_by_the_job(task, records["batch"][0]) <= set(names.split(","))
    shell, c, _, name, failed, *command = everywhere[0]["argv"]
    assert (shell, c, name, command) == ("/bin/sh", "-c", "sh", ["record", "rank"])
    assert failed.startswith(".obc/tmp.") and failed.endswith("/failed")
    steps = sorted((r["env"] for r in sandbox.records() if r["argv"] == ["rank"]),
                   key=lambda env: env["NODE_RANK"])
    assert [(env["NODE_RANK"], env["SLURMD_NODENAME"]) for env in steps] == [
        ("0", "n1"), ("1", "n2")]
    for env in steps:
        assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["NNODES"]) == ("n1", "29612", "2")
        assert (env["HF_TOKEN"], env["CUDA_VISIBLE_DEVICES"]) == (CANARY, "0,1")


LONG = f"""\
version: 1
id: enroot-long
runtime: {{kind: enroot, image: {IMAGE}, stop_timeout: 20}}
steps: [{{name: long, run: [record, --sleep, "300"], nodes: all}}]
slurm: {{nodes: 2, gpus_per_node: 1}}
"""


@pytest.mark.parametrize("how", ["scancel", "TERM to the script"])
def test_a_stopped_job_ends_its_step_on_every_node(pyxis, sandbox, tmp_path, how):  # noqa: F811
    cluster, _ = pyxis
    job_id = submit(pyxis, sandbox, tmp_path, LONG)
    cluster.wait_for(lambda: len(sandbox.records()) == 2, 60, "both tasks to start")
    if how == "scancel":
        assert cluster.run("scancel", job_id).returncode == 0
        assert cluster.wait(job_id).state == "CANCELLED"
    else:
        # What --signal=B:TERM@120 does before the time limit.
        assert cluster.run("scancel", "--batch", "--signal=TERM", job_id).returncode == 0
        job = cluster.wait(job_id)
        log = output(tmp_path, "enroot-long", job_id)
        assert job.exit_code == 143, log
        assert "obc: TERM received, stopping" in log
    for record in sandbox.records():
        cluster.wait_for(lambda pid=record["pid"]: not alive(pid), 30, "the task to end")
    assert os.path.exists(tmp_path / f"enroot-long-{job_id}.out")


def test_the_rank_that_failed_first_gives_an_enroot_job_its_exit_code(
        pyxis, sandbox, tmp_path):  # noqa: F811
    cluster, _ = pyxis
    job_id = submit(pyxis, sandbox, tmp_path, FAILING_RANK.format(
        id="enroot-ranks", runtime=f"{{kind: enroot, image: {IMAGE}}}", rank=1, code=9,
        retry=""))
    job = cluster.wait(job_id)
    log = output(tmp_path, "enroot-ranks", job_id)
    # srun stopped rank 0 with TERM (143): its shell waited for the step, and recorded
    # nothing, rank 1 having been first.
    assert job.exit_code == 9, log
    assert "obc: step 1/1 train: rank 1 failed first, on node n2, with exit code 9" \
        in untimed(log)
