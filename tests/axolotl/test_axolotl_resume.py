"""Real Axolotl loses no training when its job is stopped: on the real Slurm cluster, the
time-limit signal makes train checkpoint, the job requeues itself, and the next attempt
resumes from that checkpoint; natively, a partial newest checkpoint is moved aside and train
resumes from the whole one before it, and the newest release obc supports resumes as the
oldest does. (tests/script/test_resume.py covers the script's paths in
every shell with a stand-in trainer.)"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess

import pytest

from tests.axolotl.test_axolotl_real import JOB_TIMEOUT, dump, home, last_lines, native
from tests.conftest import compile_text, untimed, write_script
from tests.support.axolotl import OUTPUT_DIR, PROGRAMS, clean_env, lora_config
from tests.support.engines import wait_until

pytestmark = pytest.mark.slow

STEPS = 20


def train_only(job_id: str, venv, config: dict, run_dir, env: dict | None = None,
               preprocess: bool = False, merge: bool = False, **more: object) -> str:
    return dump({"version": 1, "id": job_id, "runtime": {**native(venv), "stop_timeout": 20},
                 "paths": {"run_dir": str(run_dir)},
                 "trainer": {"axolotl": {"config": config, "preprocess": preprocess,
                                         "merge": merge}},
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
    # saving it until it is stopped (tests/support/programs/obc_pause.py): signalled in the
    # middle of train however fast the machine is.
    config = lora_config(tiny_model, max_steps=STEPS, save_steps=100_000,
                         plugins=["obc_pause.PausePlugin"])
    text = train_only("resumed", axolotl_venv, config, run_dir,
                      env={"PYTHONPATH": str(PROGRAMS)}, preprocess=True,
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
    # The second went straight back to train (preprocess had finished for these inputs) and
    # resumed from it: it took only the steps that were left.
    assert "obc: step 1/2 preprocess: finished before for these inputs, skipped" in \
        untimed(log)
    assert not (run_dir / ".obc/logs/preprocess.2.log").exists()
    assert f"obc: step 2/2 train: resumes from {OUTPUT_DIR}/checkpoint-{step}" in untimed(log)
    assert losses(run_dir / ".obc/logs/train.2.log") == STEPS - step
    record = json.loads((run_dir / ".obc/status.json").read_text())
    assert (record["attempt"], record["state"], record["slurm_restarts"],
            record["resumed_from"]) == (2, "succeeded", 1, f"{OUTPUT_DIR}/checkpoint-{step}")


def logged_steps(checkpoint) -> list[int]:
    """The step of each loss in the checkpoint's trainer_state.json, in order."""
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    return [entry["step"] for entry in state["log_history"] if "loss" in entry]


def test_the_newest_release_preprocesses_trains_is_stopped_by_term_resumes_and_merges(
        axolotl_newest_venv, tiny_model, tmp_path):
    # The newest release obc supports, in one job (the oldest, whose venv the other tests
    # run, has a test for each): preprocess, train with checkpoints stopped by a real TERM,
    # the dynamic checkpoint's trigger file, --resume-from-checkpoint, merge-lora.
    run_dir = tmp_path / "run"
    steps = 6
    # Paused after step 2 until the job asks for a checkpoint (obc_pause.py); the resumed
    # run saves one at its last step, whose trainer_state.json holds the whole history.
    config = lora_config(tiny_model, max_steps=steps, save_steps=steps,
                         plugins=["obc_pause.PausePlugin"])
    script = write_script(tmp_path, compile_text(tmp_path, train_only(
        "newest", axolotl_newest_venv, config, run_dir, env={"PYTHONPATH": str(PROGRAMS)},
        preprocess=True, merge=True)))
    job = subprocess.Popen(["sh", str(script)], env=clean_env(home(tmp_path)),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        log = run_dir / ".obc/logs/train.1.log"
        wait_until(lambda: losses(log) >= 1 or job.poll() is not None, "train to take a step",
                   JOB_TIMEOUT)
        job.send_signal(signal.SIGTERM)
        _, stderr = job.communicate(timeout=JOB_TIMEOUT)
    finally:
        job.kill()
    assert job.returncode == 143, last_lines(stderr)
    (saved,) = re.findall(r"obc: checkpoint-(\d+) saved$", stderr, re.MULTILINE)
    step = int(saved)
    assert 0 < step < steps
    assert logged_steps(run_dir / OUTPUT_DIR / f"checkpoint-{step}") == list(range(1, step + 1))

    again = subprocess.run(["sh", str(script)], env=clean_env(home(tmp_path)),
                           capture_output=True, text=True, timeout=JOB_TIMEOUT, check=False)
    assert again.returncode == 0, last_lines(again.stderr)
    assert "obc: step 1/3 preprocess: finished before for these inputs, skipped" in \
        untimed(again.stderr)
    assert f"obc: step 2/3 train: resumes from {OUTPUT_DIR}/checkpoint-{step}" in \
        untimed(again.stderr)
    # Each step taken once: those before the checkpoint by the first run, the rest by this one.
    assert losses(run_dir / ".obc/logs/train.2.log") == steps - step
    assert logged_steps(run_dir / OUTPUT_DIR / f"checkpoint-{steps}") == \
        list(range(1, steps + 1))
    assert (run_dir / OUTPUT_DIR / "merged" / "model.safetensors").is_file()


def test_a_partial_newest_checkpoint_is_moved_aside_and_train_resumes_before_it(
        axolotl_venv, tiny_model, tmp_path):
    run_dir = tmp_path / "run"
    config = lora_config(tiny_model, max_steps=3, save_steps=1)
    script = write_script(tmp_path, compile_text(tmp_path, train_only(
        "partial", axolotl_venv, config, run_dir)))

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["sh", str(script), *args], env=clean_env(home(tmp_path)),
                              capture_output=True, text=True, timeout=JOB_TIMEOUT,
                              check=False)

    assert run().returncode == 0
    checkpoints = run_dir / OUTPUT_DIR
    (checkpoints / "checkpoint-3" / "trainer_state.json").unlink()  # a stop while it saved
    shutil.rmtree(checkpoints / "checkpoint-1")
    again = run("--from", "train")  # train finished: it runs again only when asked
    assert again.returncode == 0, last_lines(again.stderr)
    assert "obc: checkpoint-3 is incomplete, moved aside as checkpoint-3.incomplete" in \
        again.stderr
    assert f"obc: step 1/1 train: resumes from {OUTPUT_DIR}/checkpoint-2" in \
        untimed(again.stderr)
    assert losses(run_dir / ".obc/logs/train.2.log") == 1  # only the third step again
    assert (checkpoints / "checkpoint-3" / "trainer_state.json").is_file()


# --- checkpoint identity and finished steps (issue 19) -------------------------------------

def with_data(tiny_model, tmp_path, **overrides: object) -> dict:
    """The LoRA config on the tiny model's data attached as data.jsonl (files:), so that the
    data is a training input."""
    data = tmp_path / "data.jsonl"
    if not data.exists():
        shutil.copy(tiny_model.data, data)
    return lora_config(tiny_model, datasets=[{"path": "data.jsonl", "ds_type": "json",
                                              "type": "alpaca"}], **overrides)


def preprocessed(job_id: str, venv, config: dict, run_dir, env: dict | None = None) -> str:
    return dump({"version": 1, "id": job_id, "runtime": {**native(venv), "stop_timeout": 20},
                 "paths": {"run_dir": str(run_dir)},
                 "trainer": {"axolotl": {"config": config, "preprocess": True}},
                 "files": {"data.jsonl": "data.jsonl"},
                 # A bound, not a wait: the job goes on once the checkpoint is saved, which on
                 # a loaded machine took more than a minute once.
                 "checkpoint": {"grace": 600},
                 "env": {"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **(env or {})}})


def run_script(tmp_path, text: str, *args: str) -> subprocess.CompletedProcess:
    script = write_script(tmp_path, compile_text(tmp_path, text))
    return subprocess.run(["sh", str(script), *args], env=clean_env(home(tmp_path)),
                          capture_output=True, text=True, timeout=JOB_TIMEOUT, check=False)


def learning_rates(checkpoint) -> set[float]:
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    return {entry["learning_rate"] for entry in state["log_history"] if "learning_rate" in entry}


def test_a_changed_learning_rate_is_refused_fresh_starts_over_and_resume_from_continues(
        axolotl_venv, tiny_model, tmp_path):
    run_dir = tmp_path / "run"
    checkpoints = run_dir / OUTPUT_DIR

    def job(**overrides: object) -> str:
        config = with_data(tiny_model, tmp_path, **{"max_steps": 4, "save_steps": 1,
                                                    **overrides})
        return preprocessed("identity", axolotl_venv, config, run_dir)

    first = run_script(tmp_path, job(), "--only", "preprocess")
    assert first.returncode == 0, last_lines(first.stderr)
    # A rerun after a finished preprocess starts at train.
    second = run_script(tmp_path, job())
    assert second.returncode == 0, last_lines(second.stderr)
    assert "obc: step 1/2 preprocess: finished before for these inputs, skipped" in \
        untimed(second.stderr)
    assert losses(run_dir / ".obc/logs/train.2.log") == 4
    assert learning_rates(checkpoints / "checkpoint-4") == {0.001}

    # The learning rate changes: the checkpoints of 0.001 are not resumed.
    refused = run_script(tmp_path, job(learning_rate=0.002))
    assert refused.returncode == 3, last_lines(refused.stderr)
    assert "obc: checkpoint-4 in outputs/lora was made by other training inputs" in \
        refused.stderr
    assert "transformers then takes save_steps and logging_steps from its " \
           "trainer_state.json: logging_steps 1 save_steps 1" in refused.stderr
    assert not (run_dir / ".obc/logs/train.3.log").exists()

    fresh = run_script(tmp_path, job(learning_rate=0.002), "--fresh")
    assert fresh.returncode == 0, last_lines(fresh.stderr)
    assert losses(run_dir / ".obc/logs/train.4.log") == 4  # from step 0
    assert (run_dir / ".obc/logs/preprocess.4.log").exists()
    assert learning_rates(checkpoints / "checkpoint-4") == {0.002}
    (aside,) = (run_dir / "set-aside").iterdir()
    assert learning_rates(aside / "lora" / "checkpoint-4") == {0.001}
    assert (aside / "last_run_prepared").is_dir()

    # A changed dataset and more steps, continued deliberately from 0.002's checkpoint-4:
    # preprocess runs again (the data changed), train takes only steps 5 and 6.
    rows = (tmp_path / "data.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "data.jsonl").write_text("".join(rows[:-1]))
    resumed = run_script(tmp_path, job(learning_rate=0.002, max_steps=6), "--resume-from",
                         "checkpoint-4")
    assert resumed.returncode == 0, last_lines(resumed.stderr)
    assert (run_dir / ".obc/logs/preprocess.5.log").exists()
    assert f"obc: step 2/2 train: resumes from {OUTPUT_DIR}/checkpoint-4, of other inputs " \
           "(--resume-from)" in untimed(resumed.stderr)
    assert losses(run_dir / ".obc/logs/train.5.log") == 2
    record = json.loads((run_dir / ".obc/status.json").read_text())
    assert record["resumed_from_inputs"] not in (None, record["inputs"])


def test_a_term_after_fresh_takes_the_new_checkpoint_though_an_old_one_is_numbered_higher(
        axolotl_venv, tiny_model, tmp_path):
    run_dir = tmp_path / "run"
    checkpoints = run_dir / OUTPUT_DIR
    config = with_data(tiny_model, tmp_path, max_steps=20, save_steps=100_000,
                       plugins=["obc_pause.PausePlugin"])
    text = preprocessed("newest", axolotl_venv, config, run_dir,
                        env={"PYTHONPATH": str(PROGRAMS)})
    script = write_script(tmp_path, compile_text(tmp_path, text))
    job = subprocess.Popen(["sh", str(script), "--fresh"], env=clean_env(home(tmp_path)),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        log = run_dir / ".obc/logs/train.1.log"
        wait_until(lambda: losses(log) >= 1 or job.poll() is not None, "train to take a step",
                   JOB_TIMEOUT)
        assert losses(log) >= 1, "train took no step"
        # What an earlier run left, numbered above every step this one takes.
        old = checkpoints / "checkpoint-400"
        shutil.copytree(tiny_model.root / "model", old)
        (old / "trainer_state.json").write_text('{"global_step": 400, "log_history": []}')
        job.send_signal(signal.SIGTERM)
        _, stderr = job.communicate(timeout=JOB_TIMEOUT)
    finally:
        job.kill()
    assert job.returncode == 143, last_lines(stderr)
    saved = re.findall(r"obc: checkpoint-(\d+) saved$", stderr, re.MULTILINE)
    assert saved and int(saved[0]) < 400, last_lines(stderr)
    assert "no checkpoint within" not in stderr
    state = json.loads((checkpoints / f"checkpoint-{saved[0]}/trainer_state.json").read_text())
    assert state["global_step"] == int(saved[0])
