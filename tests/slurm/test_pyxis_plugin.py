"""The fake pyxis (tests/support/pyxis) on the real test cluster: the real sbatch and srun take the
`--container-*` options of pyxis, refuse what a cluster with pyxis refuses, and slurmstepd
hands them to the plugin, which records them with each task's argv and environment before
the task runs natively. This is what obc's `runtime.kind: enroot` is tested on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.processes import alive
from tests.support.pyxis import fake_pyxis_cluster, read_records
from tests.support.slurm_cluster import NODES

pytestmark = pytest.mark.slow

# Values that a comma-splitting or shell-parsing layer would damage.
HOSTILE = {"A": 'one,two "three" $HOME `x`\n\ttab', "B": "b=c:d;e*"}

# The step obc renders, with the options it uses.
CONTAINER_OPTIONS = {
    "container-image": "nvcr.io#nvidia/pytorch:24.01-py3",
    "container-mounts": "/etc:/workspace/run:ro,/tmp:/cache",
    "container-workdir": "/workspace/run",
    "no-container-mount-home": True,
    "container-env": "A,B",
}


def srun_options() -> str:
    return " ".join(f"--{name}" if value is True else f"--{name}='{value}'"
                    for name, value in CONTAINER_OPTIONS.items())


@pytest.fixture(scope="module")
def pyxis(tmp_path_factory: pytest.TempPathFactory):
    """The cluster with the fake pyxis, and the file its tasks are recorded in."""
    with fake_pyxis_cluster(tmp_path_factory.mktemp("pyxis")) as running:
        yield running


def sbatch(pyxis, tmp_path: Path, body: str, *options: str) -> str:
    """Submit a POSIX sh job script from tmp_path, with HOSTILE in its environment; return
    the job id."""
    cluster, _ = pyxis
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\n{body}")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), **HOSTILE}
    return cluster.submit(script, *options, cwd=tmp_path, env=env)


def step_records(pyxis, job_id: str, step: str = "0") -> list[dict]:
    _, records = pyxis
    return sorted((r for r in read_records(records) if r["job"] == int(job_id)
                   and r["step"] == step), key=lambda r: r["task"])


@pytest.mark.parametrize("nodes", [1, 2])
def test_srun_takes_the_container_options_and_each_task_sees_them(pyxis, tmp_path, nodes):
    cluster, _ = pyxis
    job_id = sbatch(pyxis, tmp_path, f"srun {srun_options()} sh -c 'echo \"$SLURM_PROCID\"'\n",
                    f"--nodes={nodes}", "--ntasks-per-node=1")
    job = cluster.wait(job_id)
    log = (tmp_path / f"slurm-{job_id}.out").read_text()
    assert (job.state, job.exit_code) == ("COMPLETED", 0), log
    # The tasks ran, natively, once per node.
    assert sorted(log.split()) == [str(task) for task in range(nodes)]
    records = step_records(pyxis, job_id)
    assert [r["task"] for r in records] == list(range(nodes))
    assert sorted(r["env"]["SLURMD_NODENAME"] for r in records) == list(NODES[:nodes])
    for record in records:
        assert record["options"] == CONTAINER_OPTIONS
        assert record["argv"] == ["sh", "-c", 'echo "$SLURM_PROCID"']
        assert {name: record["env"][name] for name in HOSTILE} == HOSTILE


def test_a_task_without_container_options_is_recorded_with_none(pyxis, tmp_path):
    cluster, _ = pyxis
    job_id = sbatch(pyxis, tmp_path, "srun true\n")
    assert cluster.wait(job_id).exit_code == 0
    (record,) = step_records(pyxis, job_id)
    assert record["options"] == {}
    assert record["argv"] == ["true"]


@pytest.mark.parametrize(("option", "message"), [
    ("--container-mount=/etc:/etc", "is ambiguous"),  # --container-mounts or -mount-home
    ("--container-envs=A", "unrecognized option"),
    ("--container-workdirs=/x", "unrecognized option"),
    ("--no-container-mount-homes", "unrecognized option"),
    ("--container-mounts=etc:/etc", "Invalid --container-mounts argument"),  # not a path
    ("--container-mounts=/etc:etc", "Invalid --container-mounts argument"),
    ("--container-env=A,,B", "Invalid --container-env argument"),
    ("--container-env=A,", "Invalid --container-env argument"),
    ("--container-image=", "Invalid --container-image argument"),
])
def test_srun_refuses_what_pyxis_does_not_take(pyxis, option, message):
    cluster, records = pyxis
    before = read_records(records)
    result = cluster.run("srun", "--nodes=1", option, "true")
    assert result.returncode != 0
    assert message in result.stderr
    assert read_records(records) == before


def test_options_given_to_sbatch_reach_the_batch_script_and_every_step(pyxis, tmp_path):
    # Slurm passes a job's SPANK options to its steps through the environment
    # (SLURM_SPANK__SLURM_SPANK_OPTION_<plugin>_<option>); an option given to srun replaces
    # that one only.
    cluster, _ = pyxis
    job_id = sbatch(pyxis, tmp_path, """\
#SBATCH --container-image=batch-image
#SBATCH --container-mounts=/etc:/etc
srun true
srun --container-image=step-image true
""")
    assert cluster.wait(job_id).exit_code == 0
    (batch,) = step_records(pyxis, job_id, "batch")
    (first,) = step_records(pyxis, job_id, "0")
    (second,) = step_records(pyxis, job_id, "1")
    assert batch["options"] == first["options"] == {
        "container-image": "batch-image", "container-mounts": "/etc:/etc"}
    assert second["options"] == {"container-image": "step-image",
                                 "container-mounts": "/etc:/etc"}
    assert batch["env"]["SLURM_SPANK__SLURM_SPANK_OPTION_fake_pyxis_container_image"] == \
        "batch-image"


def test_scancel_ends_a_container_step_on_every_node(pyxis, tmp_path):
    cluster, _ = pyxis
    job_id = sbatch(pyxis, tmp_path, f"srun {srun_options()} sleep 300\n",
                    "--nodes=2", "--ntasks-per-node=1")
    cluster.wait_for(lambda: len(step_records(pyxis, job_id)) == len(NODES), 60,
                     "both tasks to start")
    assert cluster.run("scancel", job_id).returncode == 0
    assert cluster.wait(job_id).state == "CANCELLED"
    for record in step_records(pyxis, job_id):
        cluster.wait_for(lambda pid=record["pid"]: not alive(pid), 30, "the task to end")
