"""Real Axolotl loses no training when its job is stopped: on the real Slurm cluster, the
time-limit signal makes train checkpoint, the job requeues itself, and the next attempt
resumes from that checkpoint; natively, a partial newest checkpoint is moved aside and train
resumes from the whole one before it. (tests/test_resume.py covers the script's paths in
every shell with a stand-in trainer.)"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from tests.axolotl import OUTPUT_DIR, PROGRAMS, clean_env, lora_config
from tests.conftest import compile_text, untimed, write_script
from tests.test_axolotl_real import JOB_TIMEOUT, dump, home, last_lines, native

pytestmark = pytest.mark.slow

STEPS = 20


def train_only(job_id: str, venv, config: dict, run_dir, env: dict | None = None,
               **more: object) -> str:
    return dump({"version": 1, "id": job_id, "runtime": {**native(venv), "stop_timeout": 20},
                 "paths": {"run_dir": str(run_dir)},
                 "trainer": {"axolotl": {"config": config}},
                 "checkpoint": {"grace": 60},
                 # Unbuffered: the log shows a step when it is taken, not 8 KB later.
                 "env": {"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **(env or {})},
                 **more})


def losses(log) -> int:
    return log.read_text().count("'loss'") if log.exists() else 0


def test_a_stopped_job_checkpoints_requeues_itself_and_resumes_there(
        slurm, axolotl_venv, tiny_model, tmp_path):
    run_dir = tmp_path / "run"
    # The first attempt pauses after step 2 until it is asked for a checkpoint, and after
    # saving it until it is stopped (tests/programs/obc_pause.py): signalled in the middle of
    # train however fast the machine is.
    config = lora_config(tiny_model, max_steps=STEPS, save_steps=100_000,
                         plugins=["obc_pause.PausePlugin"])
    text = train_only("resumed", axolotl_venv, config, run_dir,
                      env={"PYTHONPATH": str(PROGRAMS)},
                      slurm={"time": 30, "max_restarts": 1, "signal": "B:USR1@120"})
    script = write_script(tmp_path, compile_text(tmp_path, text))
    job_id = slurm.submit(script, cwd=tmp_path, env=clean_env(home(tmp_path)))
    first_log = run_dir / ".obc/logs/train.1.log"
    slurm.wait_for(lambda: losses(first_log) >= 1, JOB_TIMEOUT, "train to take a step")
    # What Slurm sends at the time limit's lead time: the run file's signal, to job.sh.
    assert slurm.run("scancel", "--batch", "--signal=USR1", job_id).returncode == 0
    slurm.start_requeued(job_id)
    job = slurm.wait(job_id, timeout=JOB_TIMEOUT)
    log = (tmp_path / f"resumed-{job_id}.out").read_text()
    assert (job.state, job.exit_code, job.fields["Restarts"]) == ("COMPLETED", 0, "1"), \
        last_lines(log)

    # The first attempt asked for a checkpoint and got it within the grace.
    # (Anywhere in a line: Axolotl's progress bar ends its lines with a carriage return.)
    saved = re.findall(r"obc: checkpoint-(\d+) saved$", log, re.MULTILINE)
    assert len(saved) == 1, last_lines(log)
    step = int(saved[0])
    assert 0 < step < STEPS
    state = json.loads((run_dir / OUTPUT_DIR / f"checkpoint-{step}" / "trainer_state.json")
                       .read_text())
    assert state["global_step"] == step
    # The second resumed from it: it took only the steps that were left.
    assert f"obc: step 1/1 train: resumes from {OUTPUT_DIR}/checkpoint-{step}" in untimed(log)
    assert losses(run_dir / ".obc/logs/train.2.log") == STEPS - step
    record = json.loads((run_dir / ".obc/status.json").read_text())
    assert (record["attempt"], record["state"], record["slurm_restarts"],
            record["resumed_from"]) == (2, "succeeded", 1, f"{OUTPUT_DIR}/checkpoint-{step}")


def test_a_partial_newest_checkpoint_is_moved_aside_and_train_resumes_before_it(
        axolotl_venv, tiny_model, tmp_path):
    run_dir = tmp_path / "run"
    config = lora_config(tiny_model, max_steps=3, save_steps=1)
    script = write_script(tmp_path, compile_text(tmp_path, train_only(
        "partial", axolotl_venv, config, run_dir)))

    def run() -> subprocess.CompletedProcess:
        return subprocess.run(["sh", str(script)], env=clean_env(home(tmp_path)),
                              capture_output=True, text=True, timeout=JOB_TIMEOUT,
                              check=False)

    assert run().returncode == 0
    checkpoints = run_dir / OUTPUT_DIR
    (checkpoints / "checkpoint-3" / "trainer_state.json").unlink()  # a stop while it saved
    shutil.rmtree(checkpoints / "checkpoint-1")
    again = run()
    assert again.returncode == 0, last_lines(again.stderr)
    assert "obc: checkpoint-3 is incomplete, moved aside as checkpoint-3.incomplete" in \
        again.stderr
    assert f"obc: step 1/1 train: resumes from {OUTPUT_DIR}/checkpoint-2" in \
        untimed(again.stderr)
    assert losses(run_dir / ".obc/logs/train.2.log") == 1  # only the third step again
    assert (checkpoints / "checkpoint-3" / "trainer_state.json").is_file()
