"""A job's stages (docs/stages.md) without a cluster: submit.sh --dry-run and its checks in
every shell, and the stages' scripts run one after the other in the job's run dir, each
finding the steps of the ones before it done, as the job's own job.sh does. The stub
trainer stands in for Axolotl (tests/axolotl/test_axolotl_stages.py and
tests/slurm/test_slurm_stages.py prove the same on the real cluster)."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import SHELLS, Sandbox, make_sandbox
from tests.support.stages import compile_out, pipeline

PIPELINE = pipeline("[record, eval]")
STAGES = ("preprocess", "train", "eval")


def run(argv: list[str], box: Sandbox) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=box.env(), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120, check=False)


@pytest.mark.parametrize("shell", SHELLS)
def test_dry_run_prints_each_stages_sbatch_after_the_one_before(tmp_path, shell):
    out = compile_out(tmp_path, PIPELINE)
    box = make_sandbox(tmp_path / "box")
    dry = run([*SHELLS[shell], str(out / "pipe/submit.sh"), "--dry-run"], box)
    assert (dry.returncode, dry.stderr) == (0, "")
    assert dry.stdout.splitlines() == [
        f"sbatch --parsable '--export=ALL,OBC_STAGE_JOB_IDS=' {out}/pipe-preprocess/job.sh",
        "sbatch --parsable '--dependency=afterok:<job id of preprocess>' "
        "'--kill-on-invalid-dep=yes' "
        f"'--export=ALL,OBC_STAGE_JOB_IDS=<job id of preprocess>' {out}/pipe-train/job.sh",
        "sbatch --parsable '--dependency=afterok:<job id of train>' "
        "'--kill-on-invalid-dep=yes' '--export=ALL,OBC_STAGE_JOB_IDS=<job id of preprocess>:"
        f"<job id of train>' {out}/pipe-eval/job.sh"]


@pytest.mark.parametrize("shell", SHELLS)
def test_a_stage_script_edited_after_compile_stops_submit_before_anything(tmp_path, shell):
    out = compile_out(tmp_path, PIPELINE)
    box = make_sandbox(tmp_path / "box")
    with (out / "pipe-eval/job.sh").open("a") as script:
        script.write("# edited\n")
    refused = run([*SHELLS[shell], str(out / "pipe/submit.sh"), "--dry-run"], box)
    assert (refused.returncode, refused.stdout) == (3, "")
    assert refused.stderr == f"obc: {out}/pipe-eval/job.sh is not the job.sh obc compiled " \
        "for stage eval (its sha256 differs): compile again, or restore the file\n"


def test_submit_takes_no_other_option_and_says_what_it_does(tmp_path):
    out = compile_out(tmp_path, PIPELINE)
    box = make_sandbox(tmp_path / "box")
    wrong = run(["sh", str(out / "pipe/submit.sh"), "--from", "train"], box)
    assert (wrong.returncode, wrong.stdout) == (2, "")
    assert wrong.stderr == "submit.sh: unknown option: --from\n" \
        "usage: submit.sh [--dry-run] | --help\n"
    helped = run(["sh", str(out / "pipe/submit.sh"), "--help"], box)
    assert helped.returncode == 0
    assert helped.stdout.startswith("submit      the stages of job pipe, each a Slurm job")


def test_the_stages_run_in_order_in_the_jobs_run_dir_and_skip_what_is_done(tmp_path):
    out = compile_out(tmp_path, PIPELINE)
    box = make_sandbox(tmp_path / "box")
    for stage in STAGES:
        done = run(["sh", str(out / f"pipe-{stage}/job.sh")], box)
        assert done.returncode == 0, done.stderr
    assert [record["argv"] for record in box.records()] == [
        ["preprocess", "axolotl.yaml"], ["train", "axolotl.yaml"], ["eval"]]
    assert {record["cwd"] for record in box.records()} == \
        {str(box.home / "overbrainer/runs/pipe")}
    # A stage run again, or the whole job, finds every step done for the same inputs.
    for script in ("pipe-train/job.sh", "pipe/job.sh"):
        again = run(["sh", str(out / script)], box)
        assert again.returncode == 0, again.stderr
        assert "nothing to do" in again.stderr
    assert len(box.records()) == 3
