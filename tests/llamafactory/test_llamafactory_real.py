"""Real LLaMA-Factory as the judge: obc's trainer.llamafactory jobs fine-tune a tiny model on
the CPU with `llamafactory-cli train` (which starts torchrun itself, FORCE_TORCHRUN), export
the merged model with `llamafactory-cli export`, save a checkpoint where train is when a
real TERM stops it (transformers' JIT checkpoint, which obc turns on) and resume from it,
natively and under Slurm, and train across the two emulated Slurm nodes.

Each job is compiled from a run file exactly as a user's, and started as an admin, cron or
sbatch would: `env -i PATH=/usr/bin:/bin HOME=...`, no venv active, offline
(HF_HUB_OFFLINE). tests/support/llamafactory.py has the venv, the tiny model, its dataset
folder and the configs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.axolotl.test_axolotl_real import dump, free_port, home, last_lines, nodes_resolve
from tests.conftest import compile_text, untimed, write_script
from tests.support.axolotl import clean_env
from tests.support.engines import wait_until
from tests.support.llamafactory import (
    EXPORT_DIR,
    OUTPUT_DIR,
    TinyFactory,
    export_config,
    lora_config,
)
from tests.support.trl import global_step
from tests.trl.test_trl_real import (
    RESUME_STEPS,
    assert_each_step_logged_once,
    hold_train_for_its_checkpoint,
    losses,
    saved_on_term,
    trained_a_few_steps,
)

pytestmark = pytest.mark.slow

__all__ = ["nodes_resolve"]  # a fixture of the two-node test

# Long enough for LLaMA-Factory's start (its imports, then torchrun's worker's: about a
# minute on a busy two-core machine), train and export.
JOB_TIMEOUT = 900


def llamafactory_run_file(job_id: str, venv: Path, config: dict, run_dir: Path, *,
                          export: dict | None = None, **more: object) -> str:
    """A run file that trains (and exports) with `config`, natively from the venv. On a CPU
    LLaMA-Factory counts no devices, so the run file gives the ranks of a node, unless Slurm's
    gpus_per_node does."""
    factory: dict = {"config": config, **({"export": export} if export else {})}
    if "gpus_per_node" not in more.get("slurm", {}):
        factory["nproc_per_node"] = 1
    return dump({"version": 1, "id": job_id,
                 "runtime": {"kind": "native", "venv": str(venv), "stop_timeout": 20},
                 "paths": {"run_dir": str(run_dir)},
                 "trainer": {"llamafactory": factory},
                 # Unbuffered: the log shows a step when it is taken.
                 "env": {"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}, **more})


def run(script: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(script)], env=clean_env(home(tmp_path)),
                          capture_output=True, text=True, timeout=JOB_TIMEOUT, check=False)


def test_a_native_llamafactory_job_trains_with_checkpoints_and_exports(
        llamafactory_venv, tiny_factory: TinyFactory, tmp_path):
    run_dir = tmp_path / "run"
    script = write_script(tmp_path, compile_text(tmp_path, llamafactory_run_file(
        "native-llamafactory", llamafactory_venv, lora_config(tiny_factory, max_steps=3),
        run_dir, export=export_config(tiny_factory))))
    result = run(script, tmp_path)
    assert result.returncode == 0, last_lines(result.stderr)
    outputs = run_dir / OUTPUT_DIR
    assert [global_step(outputs / f"checkpoint-{n}") for n in (1, 2, 3)] == [1, 2, 3]
    assert (outputs / "adapter_model.safetensors").is_file()
    # The adapter merged into a whole model, with the tokenizer, that transformers loads.
    merged = run_dir / EXPORT_DIR
    assert (merged / "model.safetensors").is_file() and (merged / "tokenizer.json").is_file()
    config = json.loads((merged / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]


def resumable(job_id: str, venv: Path, tiny: TinyFactory, run_dir: Path, **more: object) -> str:
    """A run file whose train takes RESUME_STEPS steps, and saves a checkpoint at the last
    (obc turns LLaMA-Factory's checkpoint on TERM on: the job is native)."""
    return llamafactory_run_file(job_id, venv, lora_config(tiny, max_steps=RESUME_STEPS,
                                                           save_steps=RESUME_STEPS),
                                 run_dir, **more)


def assert_resumed(run_dir: Path, stderr: str, newest: int) -> None:
    """The second attempt resumed from checkpoint `newest` (LLaMA-Factory's override
    resume_from_checkpoint=PATH), took only the steps that were left, and ended at the last
    one with every step logged once."""
    outputs = run_dir / OUTPUT_DIR
    assert f"obc: step 1/1 train: resumes from {OUTPUT_DIR}/checkpoint-{newest}" in \
        untimed(stderr), last_lines(stderr)
    assert f"resume_from_checkpoint={OUTPUT_DIR}/checkpoint-{newest}" in stderr
    assert losses(run_dir / ".obc/logs/train.2.log") == RESUME_STEPS - newest
    assert global_step(outputs / f"checkpoint-{RESUME_STEPS}") == RESUME_STEPS
    state = json.loads((outputs / f"checkpoint-{RESUME_STEPS}" / "trainer_state.json")
                       .read_text())
    assert_each_step_logged_once(state, RESUME_STEPS, newest)
    record = json.loads((run_dir / ".obc/status.json").read_text())
    assert (record["attempt"], record["state"], record["resumed_from"]) == \
        (2, "succeeded", f"{OUTPUT_DIR}/checkpoint-{newest}")


def test_a_term_during_train_saves_where_train_is_and_the_next_run_resumes_there(
        llamafactory_venv, tiny_factory: TinyFactory, tmp_path):
    run_dir = tmp_path / "run"
    script = write_script(tmp_path, compile_text(tmp_path, resumable(
        "resumed-llamafactory", llamafactory_venv, tiny_factory, run_dir)))
    job = subprocess.Popen(["sh", str(script)], env=clean_env(home(tmp_path)),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    try:
        wait_until(lambda: trained_a_few_steps(run_dir) or job.poll() is not None,
                   "train's first steps", JOB_TIMEOUT)
        job.send_signal(signal.SIGTERM)  # as scancel or a ^C would
        hold_train_for_its_checkpoint(run_dir)
        _, stderr = job.communicate(timeout=JOB_TIMEOUT)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    assert job.returncode == 143, last_lines(stderr)
    # llamafactory-cli ends at the TERM; the job waited for its torchrun, which passed the
    # TERM on to train, and for the checkpoint train then saved.
    assert "obc: train has the signal; it has 65 s to save a checkpoint and end" in stderr
    newest = saved_on_term(run_dir, run_dir / OUTPUT_DIR, RESUME_STEPS)
    again = run(script, tmp_path)
    assert again.returncode == 0, last_lines(again.stderr)
    assert_resumed(run_dir, again.stderr, newest)


def test_a_slurm_job_stopped_during_train_resumes_in_the_next_job(
        slurm, llamafactory_venv, tiny_factory: TinyFactory, tmp_path):
    run_dir = tmp_path / "run"
    script = write_script(tmp_path, compile_text(tmp_path, resumable(
        "slurm-resumed-llamafactory", llamafactory_venv, tiny_factory, run_dir,
        slurm={"time": 30})))
    first = slurm.submit(script, cwd=tmp_path, env=clean_env(home(tmp_path)))
    slurm.wait_for(lambda: trained_a_few_steps(run_dir), JOB_TIMEOUT, "train's first steps")
    # What Slurm sends the script at the time limit's lead time, or scancel --signal.
    assert slurm.run("scancel", "--batch", "--signal=TERM", first).returncode == 0
    hold_train_for_its_checkpoint(run_dir)
    job = slurm.wait(first, timeout=JOB_TIMEOUT)
    log = (tmp_path / f"slurm-resumed-llamafactory-{first}.out").read_text()
    assert job.exit_code == 143, last_lines(log)
    newest = saved_on_term(run_dir, run_dir / OUTPUT_DIR, RESUME_STEPS)
    second = slurm.submit(script, cwd=tmp_path, env=clean_env(home(tmp_path)))
    job = slurm.wait(second, timeout=JOB_TIMEOUT)
    log = (tmp_path / f"slurm-resumed-llamafactory-{second}.out").read_text()
    assert (job.state, job.exit_code) == ("COMPLETED", 0), last_lines(log)
    assert_resumed(run_dir, log, newest)


def test_llamafactory_trains_one_model_across_two_nodes_with_its_torchrun(
        slurm, nodes_resolve, llamafactory_venv, tiny_factory: TinyFactory, tmp_path):
    run_dir = tmp_path / "run"
    steps, batch = 2, 2
    text = llamafactory_run_file(
        "multinode-llamafactory", llamafactory_venv,
        lora_config(tiny_factory, max_steps=steps, per_device_train_batch_size=batch), run_dir,
        slurm={"nodes": 2, "gpus_per_node": 1, "time": 30, "rendezvous_port": free_port()})
    script = write_script(tmp_path, compile_text(tmp_path, text))
    slurm_id = slurm.submit(script, cwd=tmp_path, env=clean_env(home(tmp_path)))
    job = slurm.wait(slurm_id, timeout=JOB_TIMEOUT)
    log = (tmp_path / f"multinode-llamafactory-{slurm_id}.out").read_text()
    assert (job.state, job.exit_code) == ("COMPLETED", 0), last_lines(log)
    # LLaMA-Factory's launcher started torchrun on each node with obc's rendezvous, one rank
    # a node, into one data-parallel group of two ranks (gloo, on CPU): each step took a
    # batch on each node, so the steps covered twice the rows one process would have.
    rows = len((tiny_factory.data / "tiny.jsonl").read_text().splitlines())
    state = json.loads((run_dir / OUTPUT_DIR / f"checkpoint-{steps}" / "trainer_state.json")
                       .read_text())
    assert state["epoch"] == steps * batch * 2 / rows
