"""apptainer jobs on the real test cluster (tests/support/slurm_cluster.py), with the stub apptainer
of the sandbox on every node: --cleanenv drops what Slurm sets, so the GPUs Slurm picked and
the rendezvous reach each node's container by name, with that node's rank."""

from __future__ import annotations

import pytest

from tests.script.test_apptainer_jobs import run_file
from tests.slurm.test_slurm import output, submit

pytestmark = pytest.mark.slow


def test_each_nodes_container_gets_its_gpus_rank_and_the_rendezvous_by_name(
        slurm, sandbox, tmp_path):
    job_id = submit(slurm, sandbox, tmp_path, run_file(tmp_path, rest="""\
steps:
  - {name: everywhere, run: [record, rank], nodes: all}
  - {name: once, run: [record, once]}
secrets: [HF_TOKEN]
slurm: {nodes: 2, gpus_per_node: 2, rendezvous_port: 29613}
"""), HF_TOKEN="t0ken")
    job = slurm.wait(job_id)
    assert (job.state, job.exit_code) == ("COMPLETED", 0), output(tmp_path, "app", job_id)
    records = [r for r in sandbox.records() if "apptainer" in r]
    containers = sorted((r["container_env"] for r in records), key=lambda env: env["NODE_RANK"])
    assert [env["NODE_RANK"] for env in containers] == ["0", "0", "1"]
    for env in containers:
        assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["NNODES"]) == ("n1", "29613", "2")
        assert (env["GPUS_PER_NODE"], env["CUDA_VISIBLE_DEVICES"]) == ("2", "0,1")
        assert env["HF_TOKEN"] == "t0ken"
        assert not [name for name in env if name.startswith("SLURM")]  # --cleanenv
    steps = sorted((r["argv"], r["env"]["NODE_RANK"]) for r in sandbox.records()
                   if "program" in r)
    assert steps == [(["once"], "0"), (["rank"], "0"), (["rank"], "1")]
    assert "t0ken" not in output(tmp_path, "app", job_id)
