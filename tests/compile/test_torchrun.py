"""trainer.torchrun at compile time: the user's script is a file of the project, embedded in
the run dir; its launch (torchrun or accelerate, so many ranks a node), its opt-in resume
flag and its output_dir are what the run file says, and what is wrong is located."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compile.diagnostics.harness import run_obc

SCRIPT = "import torch\n"


def problems(tmp_path: Path, trainer: str, more: str = "", kind: str = "native") -> \
        list[tuple[int, int, str, str]]:
    """validate's diagnostics of a run file with `trainer` (a flow mapping's inside)."""
    (tmp_path / "train.py").write_text(SCRIPT)
    run_file = tmp_path / "run.yaml"
    run_file.write_text(f"version: 1\nid: r\nruntime: {{kind: {kind}}}\n"
                        f"trainer: {{{trainer}}}\n{more}")
    outcome = run_obc("validate", str(run_file), "--format", "json")
    return [(d["line"], d["column"], d["field"], d["message"])
            for d in outcome.diagnostics()]


def compiled(tmp_path: Path, torchrun: str, more: str = "") -> str:
    (tmp_path / "train.py").write_text(SCRIPT)
    run_file = tmp_path / "run.yaml"
    run_file.write_text("version: 1\nid: r\nruntime: {kind: native}\n"
                        f"trainer: {{torchrun: {{script: train.py, {torchrun}}}}}\n{more}")
    outcome = run_obc("compile", str(run_file), "-o", str(tmp_path / "out"))
    assert outcome.code == 0, outcome.stderr
    return (tmp_path / "out" / "r" / "job.sh").read_text()


def test_a_missing_script_is_an_error_at_its_field(tmp_path):
    found = problems(tmp_path, "torchrun: {script: nothere.py}")
    assert [(line, column, field) for line, column, field, _ in found] == \
        [(4, 30, "trainer.torchrun.script")]
    assert "nothere.py" in found[0][3]


@pytest.mark.parametrize(("trainer", "column", "field", "message"), [
    ("torchrun: {script: train.sh}", 30, "trainer.torchrun.script", "is no Python file"),
    ("torchrun: {script: /abs/train.py}", 30, "trainer.torchrun.script",
     "is a file relative to this run file"),
    ("torchrun: {script: train.py, launcher: deepspeed}", 50, "trainer.torchrun.launcher",
     "is not one of"),
    ("torchrun: {script: train.py, resume: {flag: resume}}", 55,
     "trainer.torchrun.resume.flag", "is an option such as --resume_from_checkpoint"),
    ("torchrun: {script: train.py, output_dir: ../x, resume: {flag: --r}}", 52,
     "trainer.torchrun.output_dir", "leaves the run dir"),
    ("torchrun: {script: train.py, nproc_per_node: 0}", 56, "trainer.torchrun.nproc_per_node",
     "minimum"),
])
def test_what_is_wrong_with_trainer_torchrun_is_located(tmp_path, trainer, column, field,
                                                        message):
    found = problems(tmp_path, trainer)
    assert [(line, col, f) for line, col, f, _ in found] == [(4, column, field)], found
    assert message in found[0][3] or message == "minimum"


def test_one_trainer_at_a_time(tmp_path):
    found = problems(tmp_path, "torchrun: {script: train.py}, axolotl: {config: {}}")
    assert [(line, field, message) for line, _, field, message in found] == [
        (4, "trainer.axolotl", "a job has one trainer (one of axolotl, trl, torchrun, "
         "llamafactory), and this one names 2")]


def test_an_absolute_output_dir_must_be_in_a_mount_of_the_container(tmp_path):
    found = problems(tmp_path, "torchrun: {script: train.py, output_dir: /data/out, "
                     "resume: {flag: --r}}", kind="docker")
    assert [(f, m.partition(" is ")[2]) for _, _, f, m in found] == [
        ("trainer.torchrun.output_dir", "in no folder the container mounts, so the job cannot "
         "find its checkpoints")]


def test_the_script_and_the_files_take_different_names(tmp_path):
    found = problems(tmp_path, "torchrun: {script: train.py}", "files: {train.py: train.py}\n")
    assert [(line, field) for line, _, field, _ in found] == [(5, 'files["train.py"]')]


def test_the_step_train_is_the_trainers(tmp_path):
    found = problems(tmp_path, "torchrun: {script: train.py}",
                     "steps: [{name: train, run: [x]}]\n")
    assert [m for _, _, _, m in found] == \
        ["step name 'train' is taken by trainer.torchrun, whose steps come first"]


@pytest.mark.parametrize(("torchrun", "more", "launch"), [
    ("args: [--lr, '1e-4']", "",
     "  obc_step 1 train torchrun --standalone --nproc_per_node 1 train.py --lr 1e-4"),
    ("nproc_per_node: 4", "",
     "  obc_step 1 train torchrun --standalone --nproc_per_node 4 train.py"),
    ("launcher: torchrun", "slurm: {nodes: 2, gpus_per_node: 8}\n",
     "  obc_step 1 train torchrun --standalone --nproc_per_node 8 train.py"),
    ("launcher: accelerate", "",
     "  obc_step 1 train accelerate launch --multi_gpu --num_machines 1 --num_processes 1 "
     "train.py"),
])
def test_train_launches_the_script_with_its_ranks(tmp_path, torchrun, more, launch):
    script = compiled(tmp_path, torchrun, more)
    assert launch in script.splitlines()
    assert "# files       train.py  (from train.py)" in script


def test_the_ranks_default_to_the_gpus_listed(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "run.yaml").write_text(
        "version: 1\nid: r\nruntime: {kind: docker, gpus: [0, 1, 2]}\n"
        "trainer: {torchrun: {script: train.py}}\n")
    assert run_obc("compile", str(tmp_path / "run.yaml"), "-o", str(tmp_path / "out")).code == 0
    assert "  obc_step 1 train torchrun --standalone --nproc_per_node 3 train.py" in \
        (tmp_path / "out/r/job.sh").read_text().splitlines()


def test_resume_is_opt_in_and_takes_the_run_files_flag(tmp_path):
    without = compiled(tmp_path, "output_dir: out")
    assert "OBC_RESUME=''" in without and "obc's library: checkpoints" not in without
    script = compiled(tmp_path, "output_dir: out, resume: {flag: --resume_from_checkpoint}")
    assert "OBC_RESUME=same-inputs OBC_RESUME_FIELD=trainer.torchrun.resume.from " \
        "OBC_TRAINER_OUTPUT_DIR=out OBC_RESUME_FLAG=--resume_from_checkpoint" in \
        script.splitlines()
    assert "  OBC_CHECKPOINTS=$OBC_RUN_DIR/out" in script.splitlines()


def test_on_a_stop_signal_train_gets_the_grace_more(tmp_path):
    script = compiled(tmp_path, "launcher: torchrun", "checkpoint: {grace: 30}\n")
    assert "OBC_CHECKPOINT_TRIGGER='' OBC_GIVE_GRACE=train OBC_CHECKPOINT_GRACE=30" in \
        script.splitlines()
    assert "# stop        during train: TERM, passed on by torchrun to the script's ranks, " \
        "then KILL after 30 s (grace) + 60 s" in script.splitlines()
    # torchrun waits for its ranks as long as the job does (60 s + the grace), not 30 s.
    assert "    'TORCH_ELASTIC_SHUTDOWN_TIMEOUT=90' \\" in script.splitlines()
    without = compiled(tmp_path, "launcher: torchrun", "checkpoint: {on_signal: false}\n")
    assert "OBC_GIVE_GRACE=''" in without and "OBC_CHECKPOINT_GRACE=" not in without
    assert "TORCH_ELASTIC_SHUTDOWN_TIMEOUT" not in without
    own = compiled(tmp_path, "launcher: torchrun",
                   "env: {TORCH_ELASTIC_SHUTDOWN_TIMEOUT: '7'}\n")
    assert [line for line in own.splitlines() if "TORCH_ELASTIC_SHUTDOWN_TIMEOUT=" in line] \
        == ["#             TORCH_ELASTIC_SHUTDOWN_TIMEOUT=7",
            "    'TORCH_ELASTIC_SHUTDOWN_TIMEOUT=7' \\"]


SLURM_NODES = "slurm: {nodes: 2, gpus_per_node: 4}\n"


@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_across_nodes_train_is_the_launchers_step_alone(tmp_path, launcher):
    """One name, one thing: the script's train is the launcher's step (OBC_LAUNCHER_STEP),
    not also Axolotl's torchrun step; the summary and the plan name the launcher that
    starts it across the nodes, accelerate's too."""
    script = compiled(tmp_path, f"launcher: {launcher}", SLURM_NODES)
    lines = script.splitlines()
    assert f"OBC_LAUNCHER_STEP=train OBC_LAUNCHER={launcher} OBC_NPROC_PER_NODE=4 " \
        f"OBC_LOCAL_WORDS={3 if launcher == 'torchrun' else 6}" in lines
    assert "OBC_NODE_STEPS=train OBC_MASTER_PORT=29500 OBC_GPUS_PER_NODE=4 "\
        "OBC_TORCHRUN_STEP='' OBC_TORCHRUN_PROGRAM_STEP=''" in lines
    said = f"train launched with {launcher} across the nodes"
    assert [line for line in lines if line.endswith("across the nodes")] == \
        [f"#             {said}"]
    planned = run_obc("plan", str(tmp_path / "run.yaml"), "-o", str(tmp_path / "none"))
    assert [line.strip() for line in planned.stdout.splitlines()
            if line.endswith("across the nodes")] == [said]
