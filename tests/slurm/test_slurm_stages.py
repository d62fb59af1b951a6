"""A job's stages on the real cluster (docs/stages.md): submit.sh submits each stage's
job.sh after the one before it (scontrol shows Dependency=afterok:ID), and a stage that
fails cancels the ones after it rather than leaving them pending forever. The stages are
held (slurm.extra --hold) until the test has read their dependencies, then released.
tests/axolotl/test_axolotl_stages.py runs a whole pipeline with real Axolotl."""

from __future__ import annotations

import os

from tests.support.stages import (
    compile_out,
    dependencies,
    each_after_the_one_before,
    release,
    submit_stages,
)

PIPELINE = """\
version: 1
id: failing
runtime: {kind: native}
paths: {run_dir: %(run_dir)s}
steps:
  - {name: prepare, run: [sh, -c, "exit 1"]}
  - {name: train, run: ["true"]}
  - {name: report, run: ["true"]}
slurm:
  time: 5
  extra: [--hold]
  stages:
    prepare: {gpus_per_node: 0}
    report: {gpus_per_node: 0}
"""


def test_a_stage_that_fails_cancels_the_stages_after_it(slurm, tmp_path):
    compile_out(tmp_path, PIPELINE % {"run_dir": tmp_path / "run"})
    ids = submit_stages(slurm, tmp_path, "failing")
    assert list(ids) == ["prepare", "train", "report"]
    assert dependencies(slurm, ids) == each_after_the_one_before(ids)
    release(slurm, ids)
    assert slurm.wait(ids["prepare"], timeout=120).state == "FAILED"
    for stage in ("train", "report"):
        job = slurm.wait(ids[stage], timeout=120)
        assert (job.state, job.fields["Reason"]) == ("CANCELLED", "DependencyNeverSatisfied")
    assert not (tmp_path / "run/.obc/done/prepare").exists()
    assert os.listdir(tmp_path / "run/.obc/logs") == ["prepare.1.log"]
