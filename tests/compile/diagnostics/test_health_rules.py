"""health: (docs/preflight.md): a check that requeues needs Slurm and slurm.max_restarts, and
an enroot job on several nodes cannot run it; each bad file is reported once, at its place."""

from __future__ import annotations

import pytest

from tests.compile.diagnostics.corpus import BASE, STEPS, case, reported_once_test
from tests.compile.diagnostics.harness import run_obc

ENROOT = ("version: 1\nid: r\nruntime: {kind: enroot, image: 'nvcr.io/x:1'}\n" + STEPS
          + "slurm: {nodes: 2, gpus_per_node: 1}\n")

BAD = [
    case("requeue-without-slurm", BASE + "health: {on_failure: requeue}\n", 5, 22,
         "health.on_failure", "requeue needs Slurm", "add slurm:"),
    case("requeue-without-max-restarts",
         BASE + "slurm: {time: 30}\nhealth: {on_failure: requeue}\n", 6, 22,
         "health.on_failure", "requeue needs slurm.max_restarts"),
    case("enroot-on-several-nodes", ENROOT + "health: {}\n", 6, 1, "health",
         "a copy of job.sh", "enroot"),
]


test_each_health_rule_is_reported_once_at_the_exact_place = reported_once_test(BAD)


@pytest.mark.parametrize("text", [
    BASE + "health: {}\n",
    BASE + "slurm: {time: 30, max_restarts: 2}\nhealth: {timeout: 30, on_failure: requeue}\n",
    ENROOT.replace("nodes: 2", "nodes: 1") + "health: {}\n",
])
def test_a_health_check_the_job_can_run_is_accepted(text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.yaml").write_text(text)
    outcome = run_obc("validate", "run.yaml")
    assert outcome.code == 0, outcome
