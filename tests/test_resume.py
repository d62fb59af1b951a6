"""Preemption loses no training: train checkpoints when the job is told to stop and resumes
from the newest whole checkpoint, every attempt is recorded, and a failing step is retried,
in every shell, with a stand-in trainer that checkpoints as Axolotl does
(stubs/checkpointer.py). tests/test_axolotl_resume.py proves the same with real Axolotl on
the real Slurm cluster."""

from __future__ import annotations

import json
import signal

import pytest

from tests.conftest import SHELLS, compile_text, install_stub, start_script, write_script
from tests.engines import wait_until

CANARY = "hf_CANARY_resume_7e1d"


def resumable(max_steps: int, save_steps: int = 1000, more: str = "") -> str:
    return f"""\
version: 1
id: res
runtime: {{kind: native, stop_timeout: 5}}
trainer:
  axolotl:
    config: {{output_dir: out, max_steps: {max_steps}, save_steps: {save_steps}}}
checkpoint: {{grace: 30}}
secrets: [HF_TOKEN]
{more}"""


@pytest.fixture
def checkpointer(sandbox):
    install_stub(sandbox.bin / "axolotl", "checkpointer")
    return sandbox


def status(run_dir) -> dict:
    return json.loads((run_dir / ".obc/status.json").read_text())


def trains(sandbox) -> list[list[str]]:
    return [r["argv"] for r in sandbox.records() if r["argv"][:1] == ["train"]]


def started_training(run_dir, attempt: int = 1):
    log = run_dir / f".obc/logs/train.{attempt}.log"
    return lambda: log.exists() and "step 3\n" in log.read_text()


@pytest.mark.parametrize("shell", SHELLS)
def test_a_stopped_train_checkpoints_first_and_the_next_run_resumes_there(
        checkpointer, tmp_path, shell):
    sandbox, run_dir = checkpointer, tmp_path / "run"
    script = write_script(tmp_path, compile_text(tmp_path, resumable(max_steps=100)))
    # Slow steps while the job is stopped, fast ones to finish.
    env = sandbox.env(HF_TOKEN=CANARY, OBC_STUB_STEP_SECONDS="0.1")
    first = start_script(script, "--run-dir", str(run_dir), shell=shell, env=env)
    wait_until(started_training(run_dir), "train to start")
    first.send_signal(signal.SIGTERM)
    _, stderr = first.communicate(timeout=60)
    assert first.returncode == 143, stderr
    (saved,) = [p.name for p in (run_dir / "out").iterdir()]
    assert f"obc: {saved} saved" in stderr
    assert not (run_dir / "out/axolotl_checkpoint.save").exists()
    assert status(run_dir) | {"started_at": 0, "ended_at": 0} == {
        "job": "res", "attempt": 1, "state": "stopped", "step": "train", "exit_code": 143,
        "started_at": 0, "ended_at": 0, "slurm_job_id": None, "slurm_restarts": None,
        "resumed_from": None}

    env["OBC_STUB_STEP_SECONDS"] = "0.001"
    second = sandbox.run(script, "--run-dir", str(run_dir), shell=shell, env=env)
    assert second.returncode == 0, second.stderr
    assert trains(sandbox)[-1] == ["train", "axolotl.yaml", "--resume-from-checkpoint",
                                   f"out/{saved}"]
    assert f"obc: step 1/1 train: resumes from out/{saved}" in second.messages
    record = status(run_dir)
    assert (record["attempt"], record["state"], record["exit_code"], record["resumed_from"]) \
        == (2, "succeeded", 0, f"out/{saved}")
    step = int(saved.split("-")[1])
    second_log = (run_dir / ".obc/logs/train.2.log").read_text()
    assert second_log.startswith(f"step {step + 1}\n") and second_log.endswith("step 100\n")
    assert "step 3\n" in (run_dir / ".obc/logs/train.1.log").read_text()
    for path in (run_dir / ".obc").rglob("*"):
        assert not path.is_file() or CANARY not in path.read_text(), path

    fresh = sandbox.run(script, "--run-dir", str(run_dir), "--fresh", shell=shell, env=env)
    assert fresh.returncode == 0, fresh.stderr
    assert trains(sandbox)[-1] == ["train", "axolotl.yaml"]
    assert "obc: step 1/1 train: starts over (--fresh)" in fresh.messages


def test_a_partial_newest_checkpoint_is_moved_aside_and_the_whole_one_before_it_used(
        checkpointer, tmp_path):
    sandbox, run_dir = checkpointer, tmp_path / "run"
    script = write_script(tmp_path, compile_text(tmp_path, resumable(max_steps=8)))
    for step, whole in ((2, True), (5, True), (7, False)):
        folder = run_dir / "out" / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "adapter_model.safetensors").write_text("w\n")
        if whole:
            (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    run = sandbox.run(script, "--run-dir", str(run_dir), env=sandbox.env(HF_TOKEN="t"))
    assert run.returncode == 0, run.stderr
    assert trains(sandbox) == [["train", "axolotl.yaml", "--resume-from-checkpoint",
                                "out/checkpoint-5"]]
    assert "obc: checkpoint-7 is incomplete, moved aside as checkpoint-7.incomplete" in \
        run.stderr
    assert sorted(p.name for p in (run_dir / "out").iterdir()) == [
        "checkpoint-2", "checkpoint-5", "checkpoint-7.incomplete"]


def test_from_and_only_resume_train_too_and_dry_run_moves_nothing(checkpointer, tmp_path):
    sandbox, run_dir = checkpointer, tmp_path / "run"
    script = write_script(tmp_path, compile_text(tmp_path, resumable(max_steps=4)).replace(
        "    config:", "    preprocess: true\n    merge: true\n    config:"))
    (run_dir / "out/checkpoint-3").mkdir(parents=True)
    (run_dir / "out/checkpoint-3/trainer_state.json").write_text('{"global_step": 3}')
    (run_dir / "out/checkpoint-3/adapter_model.bin").write_text("w\n")
    (run_dir / "out/checkpoint-4").mkdir()  # partial
    dry = sandbox.run(script, "--run-dir", str(run_dir), "--dry-run")
    assert dry.returncode == 0 and (run_dir / "out/checkpoint-4").is_dir()
    assert "--resume-from-checkpoint out/checkpoint-3" in dry.stdout
    for option in ("--from", "--only"):
        run = sandbox.run(script, "--run-dir", str(run_dir), option, "train",
                          env=sandbox.env(HF_TOKEN="t"))
        assert run.returncode == 0, run.stderr
        assert trains(sandbox)[-1][-2:] == ["--resume-from-checkpoint", "out/checkpoint-3"]
    assert status(run_dir)["attempt"] == 2


def test_only_the_checkpoint_step_is_given_the_checkpoint_it_resumes_from(checkpointer,
                                                                           tmp_path):
    sandbox, run_dir = checkpointer, tmp_path / "run"
    script = write_script(tmp_path, compile_text(tmp_path, resumable(max_steps=4).replace(
        "    config:", "    merge: true\n    config:")))
    (run_dir / "out/checkpoint-3").mkdir(parents=True)
    (run_dir / "out/checkpoint-3/trainer_state.json").write_text('{"global_step": 3}')
    (run_dir / "out/checkpoint-3/adapter_model.bin").write_text("w\n")
    run = sandbox.run(script, "--run-dir", str(run_dir), env=sandbox.env(HF_TOKEN="t"))
    assert run.returncode == 0, run.stderr
    assert [r["argv"] for r in sandbox.records()] == [
        ["train", "axolotl.yaml", "--resume-from-checkpoint", "out/checkpoint-3"],
        ["merge-lora", "axolotl.yaml"]]
    assert status(run_dir)["resumed_from"] == "out/checkpoint-3"


RETRIED = """\
version: 1
id: retried
runtime: {kind: native}
steps:
  - {name: flaky, run: [sh, -c, 'n=$(cat tries 2>/dev/null || echo 0); echo $((n + 1)) > tries;
                          [ "$n" -ge 2 ] || exit 75']}
  - {name: broken, run: [sh, -c, 'exit 3']}
retry: {on_exit_codes: [75, 76], max: 2}
"""


# A job without a slurm block retries locally even inside an allocation (salloc, srun):
# it has no requeue of its own.
@pytest.mark.parametrize(("shell", "inherited"), [
    *((shell, {}) for shell in SHELLS), ("dash", {"SLURM_JOB_ID": "1"})])
def test_a_step_that_fails_with_a_listed_code_is_run_again(sandbox, tmp_path, shell,
                                                            inherited):
    script = write_script(tmp_path, compile_text(tmp_path, RETRIED))
    run_dir = tmp_path / "run"
    run = sandbox.run(script, "--run-dir", str(run_dir), shell=shell,
                      env=sandbox.env(**inherited))
    assert run.returncode == 3
    assert (run_dir / "tries").read_text() == "3\n"
    assert [line for line in run.messages if "again" in line or "failed" in line] == [
        "obc: step 1/2 flaky: exited with 75; trying again (1 of 2)",
        "obc: step 1/2 flaky: exited with 75; trying again (2 of 2)",
        "obc: step 2/2 broken failed with exit code 3",  # 3 is not listed
    ]
    assert status(run_dir)["state"] == "failed" and status(run_dir)["exit_code"] == 3
