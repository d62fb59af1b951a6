"""slurm.stages (docs/stages.md): a job whose steps run as Slurm jobs of their own compiles to
its job.sh, one job.sh per stage and a submit.sh, which --check, plan and the bill see like
any other; and each rule of slurm.stages is reported once, at its place."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.compile.diagnostics.corpus import case, reported_once_test

PIPELINE = """\
version: 1
id: pipe
runtime: {kind: native}
trainer: {axolotl: {config: {base_model: m}, preprocess: true}}
steps:
  - {name: eval, run: [python3, eval.py]}
slurm:
  partition: gpu
  time: "04:00:00"
  gpus_per_node: 8
  max_restarts: 2
  stages:
    preprocess: {partition: cpu, gpus_per_node: 0, cpus_per_task: 16, mem: 64G, time: "01:00:00"}
    eval: {gpus_per_node: 1, time: 30}
"""
STAGES = ("preprocess", "train", "eval")


@pytest.fixture
def compiled(obc, tmp_path, monkeypatch) -> Path:
    """OUT of the pipeline, compiled as `obc compile` does."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.yaml").write_text(PIPELINE)
    outcome = obc("compile", "run.yaml", "-o", "out")
    assert outcome.code == 0, outcome
    return tmp_path / "out"


def sbatch_lines(script: Path) -> list[str]:
    return re.findall(r"^#SBATCH (.*)$", script.read_text(), re.MULTILINE)


def test_a_job_with_stages_compiles_to_its_script_each_stages_and_a_submit_script(compiled):
    assert sorted(str(p.relative_to(compiled)) for p in compiled.rglob("*.sh")) == [
        "pipe-eval/job.sh", "pipe-preprocess/job.sh", "pipe-train/job.sh", "pipe/job.sh",
        "pipe/submit.sh"]
    assert sbatch_lines(compiled / "pipe-preprocess/job.sh") == [
        "--job-name=pipe-preprocess", "--output=%x-%j.out", "--partition=cpu",
        "--time=01:00:00", "--nodes=1", "--ntasks-per-node=1", "--gpus-per-node=0",
        "--cpus-per-task=16", "--mem=64G", "--signal=B:USR1@120", "--requeue",
        "--open-mode=append"]
    assert "--gpus-per-node=8" in sbatch_lines(compiled / "pipe-train/job.sh")
    assert "--time=30" in sbatch_lines(compiled / "pipe-eval/job.sh")
    # The whole job still runs every step in one allocation, with the job's own resources.
    assert sbatch_lines(compiled / "pipe/job.sh")[:3] == [
        "--job-name=pipe", "--output=%x-%j.out", "--partition=gpu"]


def test_each_stage_runs_its_steps_with_the_whole_jobs_identity_in_its_run_dir(compiled):
    settings = {name: re.search(r"^OBC_JOB=(\S+) OBC_INPUTS=(\S+)\nOBC_RUNTIME=\S+ "
                                r"OBC_STEPS=(.*)$", (compiled / name / "job.sh").read_text(),
                                re.MULTILINE).groups()
                for name in ("pipe", "pipe-preprocess", "pipe-train", "pipe-eval")}
    assert {name: (job, steps) for name, (job, _, steps) in settings.items()} == {
        "pipe": ("pipe", "'preprocess train eval'"), "pipe-preprocess": ("pipe-preprocess",
                                                                        "preprocess"),
        "pipe-train": ("pipe-train", "train"), "pipe-eval": ("pipe-eval", "eval")}
    assert len({inputs for _, inputs, _ in settings.values()}) == 1
    # The job's run dir, whichever stage (the whole job writes it as runs/"$OBC_JOB").
    for name in ("pipe-preprocess", "pipe-train", "pipe-eval"):
        assert 'OBC_RUN_DIR="${HOME-}"/overbrainer/runs/pipe; }\n' in \
            (compiled / name / "job.sh").read_text()


def test_the_headers_say_which_stage_each_script_is_and_name_submit_sh(compiled):
    whole = (compiled / "pipe/job.sh").read_text()
    assert "# stages      ../pipe/submit.sh submits each as a Slurm job of its own, in " \
           "order;\n#             this script runs them all in one:\n" \
           "#             1. preprocess: preprocess  (../pipe-preprocess/job.sh)\n" \
           "#             2. train: train  (../pipe-train/job.sh)\n" \
           "#             3. eval: eval  (../pipe-eval/job.sh)\n" in whole
    train = (compiled / "pipe-train/job.sh").read_text()
    assert "# stage       train, 2 of 3 of job pipe: ../pipe/submit.sh submits it after " \
           "preprocess;\n#             ../pipe/job.sh runs every stage's steps in one job\n" \
           in train
    submit = (compiled / "pipe/submit.sh").read_text()
    assert "# stages      1. preprocess: ../pipe-preprocess/job.sh  (steps preprocess)\n" \
           "#                0 GPUs × 1 node × 1 h × 3 runs (slurm.max_restarts 2) = " \
           "0 GPU-hours\n" in submit
    assert "8 GPUs × 1 node × 4 h × 3 runs (slurm.max_restarts 2) = 96 GPU-hours" in submit


def test_check_passes_on_what_compile_wrote_and_fails_when_a_stage_is_gone(obc, compiled):
    # Every script as written passes shellcheck, submit.sh and the stages' included.
    assert obc("compile", "run.yaml", "-o", "out", "--check", "--full-check",
               "--no-cache").code == 0
    (compiled / "pipe-eval/job.sh").unlink()
    assert obc("compile", "run.yaml", "-o", "out", "--check").code == 1
    assert obc("compile", "run.yaml", "-o", "out").code == 0
    assert obc("verify", "out/pipe-eval/job.sh").code == 0


def test_a_stage_of_a_step_removed_from_the_run_file_is_stale(obc, compiled, tmp_path):
    (tmp_path / "run.yaml").write_text(PIPELINE.replace(
        "    eval: {gpus_per_node: 1, time: 30}\n", ""))
    outcome = obc("compile", "run.yaml", "-o", "out", "--check")
    assert outcome.code == 1
    assert "out/pipe-eval/job.sh" in outcome.stdout + outcome.stderr


def bill_row(bill: str, label: str) -> str:
    """The lines of one row of a bill as plan shows it: its label's, and those after it
    that have none."""
    lines = bill.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"  {label} "))
    end = next((i for i in range(start + 1, len(lines)) if lines[i][2:3] != " "), len(lines))
    return "\n".join(lines[start:end])


def test_plan_and_the_bill_show_each_stage_with_its_gpu_hours(obc, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.yaml").write_text(PIPELINE)
    plan = obc("plan", "run.yaml", "-o", "out")
    assert plan.code == 0, plan
    assert "+ out/pipe/submit.sh" in plan.stdout
    # The bills follow the list of scripts, which names each first.
    bill = plan.stdout.split("+ out/pipe/job.sh\n")[-1].split("\n+ ")[0]
    stages = bill_row(bill, "stages")
    assert [line.strip() for line in stages.splitlines()[:2]] == [
        "stages      ../pipe/submit.sh submits each as a Slurm job of its own, after the one "
        "before it succeeded; ../pipe/job.sh runs them all in one",
        "1. preprocess: steps preprocess; gpus none; 0 GPUs × 1 node × 1 h × 3 runs "
        "(slurm.max_restarts 2) = 0 GPU-hours"]
    assert "2. train: steps train; gpus all; 8 GPUs × 1 node × 4 h × 3 runs " \
           "(slurm.max_restarts 2) = 96 GPU-hours" in stages
    assert "3. eval: steps eval; gpus all; 1 GPU × 1 node × 0.5 h × 3 runs " \
           "(slurm.max_restarts 2) = 1.5 GPU-hours" in stages
    assert "#SBATCH --partition=cpu" in stages
    # Each stage's own script is billed as a job of its own.
    eval_bill = plan.stdout.split("+ out/pipe-eval/job.sh\n")[-1].split("\n+ ")[0]
    assert "1 GPU × 1 node × 0.5 h × 3 runs (slurm.max_restarts 2) = 1.5 GPU-hours" in \
        eval_bill.split("gpu-hours", 1)[1].splitlines()[0]
    assert "this script is stage eval of job pipe" in eval_bill


def test_the_site_policy_judges_each_stage_at_its_own_field(obc, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "obc-policy.yaml").write_text("version: 1\npartitions: [gpu]\n")
    (tmp_path / "run.yaml").write_text(PIPELINE)
    outcome = obc("validate", "--format", "text", "run.yaml")
    assert outcome.code == 1
    line = next(i for i, text in enumerate(PIPELINE.splitlines(), 1) if "preprocess: {" in text)
    assert outcome.stderr.startswith(f"run.yaml:{line}:29: error: slurm.stages.preprocess."
                                     "partition: partition cpu is not allowed"), outcome


def with_stage(stage: str) -> str:
    """The pipeline with `stage` in place of its eval stage (line 14)."""
    return PIPELINE.replace("eval: {gpus_per_node: 1, time: 30}", stage)



BAD = [
    case("unknown-step", with_stage("evl: {gpus_per_node: 1}"), 14, 5,
         "slurm.stages.evl", "this job has no step 'evl'; did you mean 'eval'?",
         "its steps are preprocess, train, eval"),
    case("stage-splits-the-other-steps",
         PIPELINE.replace("  - {name: eval, run: [python3, eval.py]}\n",
                          "  - {name: eval, run: [python3, eval.py]}\n"
                          "  - {name: report, run: [python3, report.py]}\n")
         .replace("preprocess: {partition", "train: {partition"),
         14, 5, "slurm.stages.train",
         "stage 'train' splits the job's other steps (preprocess, report)"),
    case("stage-time-too-short", with_stage("eval: {time: 2}"), 14, 18,
         "slurm.stages.eval.time", "a time limit of 120 s is too short"),
    case("stage-time-zero", with_stage("eval: {time: '0:0'}"), 14, 18,
         "slurm.stages.eval.time", "a time limit of zero is no limit to Slurm"),
    case("stage-takes-no-nodes", with_stage("eval: {nodes: 2}"), 14, 12,
         "slurm.stages.eval.nodes", "unknown key 'nodes'"),
    case("stage-gpus-not-negative", with_stage("eval: {gpus_per_node: -1}"),
         14, 27, "slurm.stages.eval.gpus_per_node", "at least 0, got -1"),
    case("stage-on-every-node",
         PIPELINE.replace("gpus_per_node: 8\n", "gpus_per_node: 8\n  nodes: 2\n")
         .replace("eval: {gpus_per_node", "train: {gpus_per_node"), 15, 5,
         "slurm.stages.train", "step 'train' runs on every node of this job's 2 nodes",
         "leave it in the job's own stage"),
    case("stages-in-a-sweep",
         PIPELINE + "matrix: {axes: {lr: {set: env.LR, values: [1, 2]}}}\n", 12, 3,
         "slurm.stages", "a sweep's runs cannot have stages"),
]


test_each_stage_rule_is_reported_once_at_the_exact_place = reported_once_test(BAD)


def test_each_stages_health_check_expects_the_stages_own_gpus(obc, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.yaml").write_text(PIPELINE + "health: {}\n")
    assert obc("compile", "run.yaml", "-o", "out").code == 0
    expected = {stage: re.search(r"^OBC_HEALTH_TIMEOUT=\d+ OBC_HEALTH_GPUS=(\d+)",
                                 (tmp_path / f"out/pipe-{stage}/job.sh").read_text(),
                                 re.MULTILINE).group(1)
                for stage in STAGES}
    # preprocess asks for no GPU: its node checks none (an all-reduce still).
    assert expected == {"preprocess": "0", "train": "8", "eval": "1"}
