"""A pipeline of three stages on the real cluster (docs/stages.md), with real Axolotl on the
CPU: preprocess as a Slurm job without GPUs, then train and merge, then an evaluation, each
submitted by submit.sh after the one before it. Held (slurm.extra --hold) until the test has
read the dependencies in `scontrol show job`, then released; each stage runs in the job's
run dir and finds the work of the ones before it there. It is also the test of a native
Axolotl job on one node under Slurm."""

from __future__ import annotations

import os

import pytest

from tests.axolotl.test_axolotl_real import dump, last_lines, native
from tests.support.axolotl import OUTPUT_DIR, lora_config, missing_outputs
from tests.support.stages import (
    compile_out,
    dependencies,
    each_after_the_one_before,
    release,
    submit_stages,
)

pytestmark = pytest.mark.slow

STAGE_TIMEOUT = 300
# The evaluation: the merged model train's stage left, and the ids of the stages before it.
EVAL = 'printf "%s\\n" "$OBC_STAGE_JOB_IDS" > stage-ids && ' \
    f"test -f {OUTPUT_DIR}/merged/model.safetensors"


def test_preprocess_train_and_eval_run_as_three_slurm_jobs_in_order(
        slurm, axolotl_venv, tiny_model, tmp_path):
    run_dir = tmp_path / "run"
    compile_out(tmp_path, dump({
        "version": 1, "id": "stages", "runtime": native(axolotl_venv),
        "paths": {"run_dir": str(run_dir)},
        "trainer": {"axolotl": {"config": lora_config(tiny_model), "preprocess": True,
                                "merge": True}},
        "steps": [{"name": "eval", "run": ["sh", "-c", EVAL]}],
        "env": {"HF_HUB_OFFLINE": "1"},
        "slurm": {"time": 30, "extra": ["--hold"], "stages": {
            "preprocess": {"gpus_per_node": 0, "cpus_per_task": 1},
            "eval": {"gpus_per_node": 0, "time": 5}}}}))
    ids = submit_stages(slurm, tmp_path, "stages")
    assert list(ids) == ["preprocess", "train", "eval"]
    assert dependencies(slurm, ids) == each_after_the_one_before(ids)
    release(slurm, ids)
    for stage, job_id in ids.items():
        job = slurm.wait(job_id, timeout=STAGE_TIMEOUT)
        log = (tmp_path / f"stages-{stage}-{job_id}.out").read_text()
        assert (job.state, job.exit_code) == ("COMPLETED", 0), last_lines(log)
    # One attempt a stage, each of its own steps only, in the one run dir.
    assert sorted(os.listdir(run_dir / ".obc/logs")) == [
        "eval.3.log", "merge.2.log", "preprocess.1.log", "train.2.log"]
    assert sorted(os.listdir(run_dir / ".obc/done")) == ["eval", "merge", "preprocess", "train"]
    assert missing_outputs(run_dir) == []
    assert (run_dir / "stage-ids").read_text() == f"{ids['preprocess']}:{ids['train']}\n"
    assert slurm.show(ids["preprocess"]).fields["TRES"].count("gres/gpu") == 0
