"""Real TRL as the judge: obc's trainer.trl jobs fine-tune a tiny model on the CPU with
`trl sft`, save a checkpoint where train is when a real TERM stops it (transformers' JIT
checkpoint, which obc turns on) and resume from it, natively and under Slurm, merge the
adapter, and train across the two emulated Slurm nodes.

Each job is compiled from a run file exactly as a user's, and started as an admin, cron or
sbatch would: `env -i PATH=/usr/bin:/bin HOME=...`, no venv active, offline
(HF_HUB_OFFLINE). tests/support/trl.py has the venv, the tiny model, its dataset folder and
the config.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.axolotl.test_axolotl_real import (
    dump,
    free_port,
    home,
    last_lines,
    native,
    nodes_resolve,
    sbatch_job,
)
from tests.conftest import compile_text, untimed, write_script
from tests.support.axolotl import clean_env
from tests.support.engines import wait_until
from tests.support.processes import processes_in
from tests.support.trl import OUTPUT_DIR, TinySft, global_step, sft_config

pytestmark = pytest.mark.slow

__all__ = ["nodes_resolve"]  # a fixture of the two-node test

# Long enough for TRL's start (about 40 s on a busy two-core machine), train and merge.
JOB_TIMEOUT = 900


def trl_run_file(job_id: str, venv: Path, config: dict, run_dir: Path, *,
                 merge: bool = False, **more: object) -> str:
    """A run file that trains (and merges) with `config`, natively from the TRL venv."""
    return dump({"version": 1, "id": job_id,
                 "runtime": {"kind": "native", "venv": str(venv), "stop_timeout": 20},
                 "paths": {"run_dir": str(run_dir)},
                 "trainer": {"trl": {"config": config, "merge": merge}},
                 # Unbuffered: the log shows a step when it is taken.
                 "env": {"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}, **more})


def run(script: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(script), *args], env=clean_env(home(tmp_path)),
                          capture_output=True, text=True, timeout=JOB_TIMEOUT, check=False)


def losses(log: Path) -> int:
    """How many training steps a train log reports (logging_steps: 1)."""
    return log.read_text().count("'loss'") if log.exists() else 0


def whole(checkpoint: Path) -> bool:
    return (checkpoint / "trainer_state.json").is_file() and \
        (checkpoint / "adapter_model.safetensors").is_file()


def test_a_native_trl_job_trains_with_checkpoints_and_merges(trl_venv, tiny_sft: TinySft,
                                                             tmp_path):
    run_dir = tmp_path / "run"
    script = write_script(tmp_path, compile_text(tmp_path, trl_run_file(
        "native-trl", trl_venv, sft_config(tiny_sft, max_steps=3), run_dir, merge=True)))
    result = run(script, tmp_path)
    assert result.returncode == 0, last_lines(result.stderr)
    outputs = run_dir / OUTPUT_DIR
    assert [global_step(outputs / f"checkpoint-{n}") for n in (1, 2, 3)] == [1, 2, 3]
    assert (outputs / "adapter_model.safetensors").is_file()
    # PEFT's merge_and_unload: a whole model, with the tokenizer, that transformers loads.
    merged = outputs / "merged"
    assert (merged / "model.safetensors").is_file() and (merged / "tokenizer.json").is_file()
    config = json.loads((merged / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]


# Train's steps. The only checkpoint by save_steps is the last, so the one a stopped train
# leaves is the one the TERM asked for; hold_train_for_its_checkpoint makes sure train is
# still training when it asks.
RESUME_STEPS = 300
# The steps train takes before it is stopped.
STOP_AFTER = 5
# What transformers' Trainer logs (at level info) when the TERM reaches it, and how long it
# trains on before it asks for its checkpoint (trainer_jit_checkpoint.py: CheckpointManager,
# kill_wait, a threading.Timer).
TERM_RECEIVED = "SIGTERM received, will request JIT checkpoint"
CHECKPOINT_WAIT = 3


def resumable(job_id: str, venv: Path, tiny: TinySft, run_dir: Path, **more: object) -> str:
    """A run file whose train takes RESUME_STEPS steps, and saves a checkpoint at the last
    (obc turns TRL's checkpoint on TERM on: the job is native); it logs at level info, so
    that its log says when the TERM reached it."""
    return trl_run_file(job_id, venv, sft_config(tiny, max_steps=RESUME_STEPS,
                                                 save_steps=RESUME_STEPS, log_level="info"),
                        run_dir, **more)


def trained_a_few_steps(run_dir: Path) -> bool:
    return losses(run_dir / ".obc/logs/train.1.log") >= STOP_AFTER


def hold_train_for_its_checkpoint(run_dir: Path) -> None:
    """Once train has the TERM, stop every process of its step (they run in the run dir)
    for longer than the Trainer waits before it asks for its checkpoint, then let them go
    on: the wait is over, and train saves at the step it was at. Without the hold, a train
    of the tiny model could take all of its steps in those 3 s (it did, at 140 steps a
    second), and the test would pass or fail by the machine's speed."""
    log = run_dir / ".obc/logs/train.1.log"
    wait_until(lambda: TERM_RECEIVED in log.read_text(errors="replace"),
               "train's handler of the TERM", JOB_TIMEOUT)
    step = processes_in(run_dir)
    assert step, f"no process runs in {run_dir}"
    for pid in step:
        os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(CHECKPOINT_WAIT + 1)  # the Timer's clock runs on while they are stopped
    finally:
        for pid in step:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def saved_on_term(run_dir: Path, outputs: Path, steps: int) -> int:
    """The checkpoint train saved when the TERM reached it, at the step it was at, whole
    when the job ended: its only one, since save_steps is the last of its `steps` (the
    transformers' JIT checkpoint obc turned on)."""
    [saved] = outputs.glob("checkpoint-*")
    newest = newest_whole(outputs)
    assert saved.name == f"checkpoint-{newest}" and STOP_AFTER <= newest < steps
    assert losses(run_dir / ".obc/logs/train.1.log") in (newest, newest + 1)
    return newest


def assert_each_step_logged_once(state: dict, steps: int, saved: int) -> None:
    """Train's `steps`, each logged once in the last checkpoint's trainer_state.json. A
    checkpoint saved on TERM at the end of a step is saved before that step's loss is logged
    (transformers' JITCheckpointCallback.on_step_end comes first): its step, `saved`, may be
    missing, never repeated."""
    logged = [entry["step"] for entry in state["log_history"] if "loss" in entry]
    every = list(range(1, steps + 1))
    assert logged in (every, [step for step in every if step != saved])


def newest_whole(outputs: Path) -> int:
    """The step of the newest whole checkpoint in output_dir, as its trainer_state.json says
    (a half-written one, stopped while it saved, is not whole)."""
    newest = max(int(path.name.partition("-")[2]) for path in outputs.glob("checkpoint-*")
                 if path.name.partition("-")[2].isdigit() and whole(path))
    assert global_step(outputs / f"checkpoint-{newest}") == newest
    return newest


def assert_resumed(run_dir: Path, stderr: str, newest: int) -> None:
    """The second attempt resumed from checkpoint `newest`, took only the steps that were
    left, and ended at the last one with every step logged once."""
    outputs = run_dir / OUTPUT_DIR
    assert f"obc: step 1/1 train: resumes from {OUTPUT_DIR}/checkpoint-{newest}" in \
        untimed(stderr), last_lines(stderr)
    assert "--resume_from_checkpoint" in stderr
    assert losses(run_dir / ".obc/logs/train.2.log") == RESUME_STEPS - newest
    assert global_step(outputs / f"checkpoint-{RESUME_STEPS}") == RESUME_STEPS
    state = json.loads((outputs / f"checkpoint-{RESUME_STEPS}" / "trainer_state.json")
                       .read_text())
    assert_each_step_logged_once(state, RESUME_STEPS, newest)
    record = json.loads((run_dir / ".obc/status.json").read_text())
    assert (record["attempt"], record["state"], record["resumed_from"]) == \
        (2, "succeeded", f"{OUTPUT_DIR}/checkpoint-{newest}")


def test_a_term_during_train_saves_where_train_is_and_the_next_run_resumes_there(
        trl_venv, tiny_sft: TinySft, tmp_path):
    run_dir = tmp_path / "run"
    script = write_script(tmp_path, compile_text(tmp_path, resumable(
        "resumed-trl", trl_venv, tiny_sft, run_dir)))
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
    # trl sft ends at the TERM; the job waited for its child, which trains, had the TERM
    # too (the step's process group), and saved.
    assert "obc: train has the signal; it has 65 s to save a checkpoint and end" in stderr
    newest = saved_on_term(run_dir, run_dir / OUTPUT_DIR, RESUME_STEPS)
    again = run(script, tmp_path)
    assert again.returncode == 0, last_lines(again.stderr)
    assert_resumed(run_dir, again.stderr, newest)


def test_a_slurm_job_stopped_during_train_resumes_in_the_next_job(
        slurm, trl_venv, tiny_sft: TinySft, tmp_path):
    run_dir = tmp_path / "run"
    script = write_script(tmp_path, compile_text(tmp_path, resumable(
        "slurm-resumed-trl", trl_venv, tiny_sft, run_dir, slurm={"time": 30})))
    first = slurm.submit(script, cwd=tmp_path, env=clean_env(home(tmp_path)))
    slurm.wait_for(lambda: trained_a_few_steps(run_dir), JOB_TIMEOUT, "train's first steps")
    # What Slurm sends the script at the time limit's lead time, or scancel --signal.
    assert slurm.run("scancel", "--batch", "--signal=TERM", first).returncode == 0
    hold_train_for_its_checkpoint(run_dir)
    job = slurm.wait(first, timeout=JOB_TIMEOUT)
    log = (tmp_path / f"slurm-resumed-trl-{first}.out").read_text()
    assert job.exit_code == 143, last_lines(log)
    newest = saved_on_term(run_dir, run_dir / OUTPUT_DIR, RESUME_STEPS)
    second = slurm.submit(script, cwd=tmp_path, env=clean_env(home(tmp_path)))
    job = slurm.wait(second, timeout=JOB_TIMEOUT)
    log = (tmp_path / f"slurm-resumed-trl-{second}.out").read_text()
    assert (job.state, job.exit_code) == ("COMPLETED", 0), last_lines(log)
    assert_resumed(run_dir, log, newest)


def test_a_native_trl_job_runs_under_slurm(slurm, trl_venv, tiny_sft: TinySft, tmp_path):
    run_dir = tmp_path / "run"
    sbatch_job(slurm, tmp_path, "slurm-trl", trl_run_file(
        "slurm-trl", trl_venv, sft_config(tiny_sft, max_steps=2), run_dir, merge=True,
        slurm={"time": 30}))
    assert global_step(run_dir / OUTPUT_DIR / "checkpoint-2") == 2
    assert (run_dir / OUTPUT_DIR / "merged" / "model.safetensors").is_file()


def test_trl_trains_one_model_across_two_nodes_with_torchrun(
        slurm, nodes_resolve, trl_venv, tiny_sft: TinySft, tmp_path):
    run_dir = tmp_path / "run"
    steps, batch = 2, 2
    sbatch_job(slurm, tmp_path, "multinode-trl", trl_run_file(
        "multinode-trl", trl_venv, sft_config(tiny_sft, max_steps=steps,
                                              per_device_train_batch_size=batch), run_dir,
        slurm={"nodes": 2, "gpus_per_node": 1, "time": 30, "rendezvous_port": free_port()}))
    # One data-parallel group of two ranks (gloo, on CPU): each step took a batch on each
    # node, so the steps covered twice the rows one process would have.
    rows = len((tiny_sft.data / "train.jsonl").read_text().splitlines())
    state = json.loads((run_dir / OUTPUT_DIR / f"checkpoint-{steps}" / "trainer_state.json")
                       .read_text())
    assert state["epoch"] == steps * batch * 2 / rows


# What TRL's trainers do at start (trl/trainer/base_trainer.py, _send_telemetry): the hub
# client's send_telemetry, which starts its sending thread unless telemetry is off or the
# client is offline. Said as the step `hub` prints it.
HUB_CLIENT = ("from huggingface_hub import constants; "
              "from huggingface_hub.utils import _telemetry; "
              "_telemetry.send_telemetry('obc-test'); "
              "print('telemetry sent:', _telemetry._TELEMETRY_THREAD is not None, "
              "'offline:', constants.is_offline_mode())")


@pytest.mark.parametrize(("env", "caller", "said"), [
    # obc's HF_HUB_DISABLE_TELEMETRY=1, not offline: TRL's ping is not sent.
    ({}, {}, "telemetry sent: False offline: False"),
    # HF_HUB_OFFLINE where the job is started reaches the trainer: offline.
    ({}, {"HF_HUB_OFFLINE": "1"}, "telemetry sent: False offline: True"),
    # The run file's own env wins over obc's switch: then the ping goes (the check can fail).
    ({"HF_HUB_DISABLE_TELEMETRY": "0"}, {}, "telemetry sent: True offline: False"),
])
def test_a_trl_jobs_hub_client_sends_no_telemetry_and_is_offline_when_told(
        trl_venv, tmp_path, env, caller, said):
    """The real hub client of the TRL venv, in the environment of the job's steps (train's
    too), judges the switches: no network needed, and no training (`--only hub`)."""
    run_dir = tmp_path / "run"
    script = write_script(tmp_path, compile_text(tmp_path, dump({
        "version": 1, "id": "trl-hub", "runtime": native(trl_venv),
        "paths": {"run_dir": str(run_dir)},
        "trainer": {"trl": {"config": {"model_name_or_path": "org/model",
                                       "dataset_name": "org/data"}}},
        "steps": [{"name": "hub", "run": ["python3", "-c", HUB_CLIENT]}],
        **({"env": env} if env else {})})))
    result = subprocess.run(["sh", str(script), "--only", "hub"],
                            env=clean_env(home(tmp_path), **caller), capture_output=True,
                            text=True, timeout=JOB_TIMEOUT, check=False)
    assert result.returncode == 0, last_lines(result.stderr)
    assert said in (run_dir / ".obc/logs/hub.1.log").read_text()
