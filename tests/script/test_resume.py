"""Preemption loses no training: train checkpoints when the job is told to stop and resumes
from the newest whole checkpoint, every attempt is recorded, and a failing step is retried,
in every shell, with a stand-in trainer that checkpoints as Axolotl does
(stubs/checkpointer.py). tests/axolotl/test_axolotl_resume.py proves the same with real Axolotl on
the real Slurm cluster."""

from __future__ import annotations

import json
import os
import signal

import pytest

from compiler.pipeline.pipeline import compile_files
from tests.conftest import SHELLS, compile_text, install_stub, start_script, write_script
from tests.support.engines import wait_until

CANARY = "hf_CANARY_resume_7e1d"


def resumable(max_steps: int, save_steps: int = 1000, more: str = "", *,
              resume: str = "same-inputs", config: str = "") -> str:
    return f"""\
version: 1
id: res
runtime: {{kind: native, stop_timeout: 5}}
trainer:
  axolotl:
    resume: {resume}
    config: {{output_dir: out, max_steps: {max_steps}, save_steps: {save_steps}{config}}}
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
        "inputs": status(run_dir)["inputs"], "resumed_from": None, "resumed_from_inputs": None}
    assert status(run_dir)["inputs"].startswith("sha256:")

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

    again = sandbox.run(script, "--run-dir", str(run_dir), shell=shell, env=env)
    assert again.returncode == 0 and len(trains(sandbox)) == 2  # train finished: not again
    assert "obc: every step finished before for these inputs" in again.stderr
    fresh = sandbox.run(script, "--run-dir", str(run_dir), "--fresh", shell=shell, env=env)
    assert fresh.returncode == 0, fresh.stderr
    assert trains(sandbox)[-1] == ["train", "axolotl.yaml"]
    assert "obc: step 1/1 train: starts over (--fresh)" in fresh.messages


def test_a_partial_newest_checkpoint_is_moved_aside_and_the_whole_one_before_it_used(
        checkpointer, tmp_path):
    sandbox, run_dir = checkpointer, tmp_path / "run"
    script = write_script(tmp_path, compile_text(tmp_path, resumable(max_steps=8,
                                                                      resume="any")))
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
    script = write_script(tmp_path, compile_text(tmp_path, resumable(
        max_steps=4, resume="any").replace(
        "    config:", "    preprocess: true\n    merge: true\n    config:")))
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
    script = write_script(tmp_path, compile_text(tmp_path, resumable(
        max_steps=4, resume="any").replace("    config:", "    merge: true\n    config:")))
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


# --- checkpoint identity (issue 19) ------------------------------------------------------

def checkpoints(run_dir) -> list[str]:
    return sorted((p.name for p in (run_dir / "out").glob("checkpoint-*")),
                  key=lambda name: int(name.split("-")[1]))


def set_aside(run_dir) -> list[str]:
    """What the job set aside, as paths under run_dir/set-aside/ without the dated folder."""
    return sorted(str(p.relative_to(folder)) for folder in (run_dir / "set-aside").glob("*")
                  for p in folder.glob("*/checkpoint-*"))


def compiled(tmp_path, text: str):
    return write_script(tmp_path, compile_text(tmp_path, text))


@pytest.mark.parametrize("shell", SHELLS)
def test_a_changed_config_refuses_the_old_checkpoints_and_fresh_sets_them_aside(
        checkpointer, tmp_path, shell):
    sandbox, run_dir = checkpointer, tmp_path / "run"
    env = sandbox.env(HF_TOKEN="t")
    first = sandbox.run(compiled(tmp_path, resumable(max_steps=6, save_steps=2)),
                        "--run-dir", str(run_dir), shell=shell, env=env)
    assert first.returncode == 0, first.stderr
    old_inputs = status(run_dir)["inputs"]

    script = compiled(tmp_path, resumable(max_steps=6, save_steps=2,
                                          config=", learning_rate: 0.002"))
    refused = sandbox.run(script, "--run-dir", str(run_dir), shell=shell, env=env)
    assert refused.returncode == 3, refused.stderr
    assert len(trains(sandbox)) == 1  # nothing trained
    new_inputs = status(run_dir)["inputs"]
    assert new_inputs != old_inputs
    assert (f"obc: checkpoint-6 in out was made by other training inputs ({old_inputs}), "
            f"not these ({new_inputs})") in refused.stderr
    for choice in ("job.sh --fresh", "job.sh --resume-from checkpoint-6",
                   "trainer.axolotl.resume: any", "takes save_steps and logging_steps from "
                   "its trainer_state.json: logging_steps 1 save_steps 2, not from the config"):
        assert choice in refused.stderr

    fresh = sandbox.run(script, "--run-dir", str(run_dir), "--fresh", shell=shell, env=env)
    assert fresh.returncode == 0, fresh.stderr
    assert trains(sandbox)[-1] == ["train", "axolotl.yaml"]  # from step 0
    assert set_aside(run_dir) == ["out/checkpoint-2", "out/checkpoint-4", "out/checkpoint-6"]
    assert checkpoints(run_dir) == ["checkpoint-2", "checkpoint-4", "checkpoint-6"]
    assert (run_dir / ".obc/logs/train.3.log").read_text().startswith("step 1\n")
    again = sandbox.run(script, "--run-dir", str(run_dir), shell=shell, env=env)
    assert again.returncode == 0 and len(trains(sandbox)) == 2


def test_resume_from_continues_deliberately_from_a_checkpoint_of_other_inputs(checkpointer,
                                                                              tmp_path):
    sandbox, run_dir = checkpointer, tmp_path / "run"
    env = sandbox.env(HF_TOKEN="t")
    assert sandbox.run(compiled(tmp_path, resumable(max_steps=6, save_steps=2)),
                       "--run-dir", str(run_dir), env=env).returncode == 0
    old_inputs = status(run_dir)["inputs"]
    script = compiled(tmp_path, resumable(max_steps=8, save_steps=2,
                                          config=", learning_rate: 0.003"))
    run = sandbox.run(script, "--run-dir", str(run_dir), "--resume-from", "checkpoint-4",
                      env=env)
    assert run.returncode == 0, run.stderr
    assert trains(sandbox)[-1] == ["train", "axolotl.yaml", "--resume-from-checkpoint",
                                   "out/checkpoint-4"]
    assert ("obc: step 1/1 train: resumes from out/checkpoint-4, of other inputs "
            "(--resume-from)") in run.messages
    # checkpoint-6, which train would have written over, is set aside; 6 and 8 are new.
    assert set_aside(run_dir) == [] and checkpoints(run_dir) == [
        "checkpoint-2", "checkpoint-4", "checkpoint-6", "checkpoint-8"]
    assert list((run_dir / "set-aside").glob("*/checkpoint-6"))
    shown = json.loads(sandbox.run(script, "--run-dir", str(run_dir), "--status").stdout)
    assert (shown["resumed_from"], shown["resumed_from_inputs"]) == ("out/checkpoint-4",
                                                                     old_inputs)
    assert shown["inputs"] != old_inputs
    # Its own checkpoints are this run's now: --from train resumes from the newest, no
    # question asked, although checkpoint-2 and -4 are of the old inputs.
    again = sandbox.run(script, "--run-dir", str(run_dir), "--from", "train", env=env)
    assert again.returncode == 0, again.stderr
    assert trains(sandbox)[-1][-1] == "out/checkpoint-8"
    wrong = sandbox.run(script, "--run-dir", str(run_dir), "--resume-from", "checkpoint-5",
                        env=env)
    assert wrong.returncode == 3 and "checkpoint-5 is no whole checkpoint" in wrong.stderr
    # Only a checkpoint's name: never a path, a pattern or anything a shell would expand.
    for hostile in ("5", "checkpoint-", "checkpoint-1/../../x", "../checkpoint-1",
                    "checkpoint-1 2", "checkpoint-$(touch PWNED)", "checkpoint-*", "-1"):
        refused = sandbox.run(script, "--resume-from", hostile)
        assert refused.returncode == 2 and "--resume-from takes a checkpoint's name" in \
            refused.stderr, hostile
    assert not (run_dir / "PWNED").exists()


def test_what_is_no_training_input_keeps_the_checkpoints(checkpointer, tmp_path):
    sandbox, run_dir = checkpointer, tmp_path / "run"
    env = sandbox.env(HF_TOKEN="t")
    assert sandbox.run(compiled(tmp_path, resumable(max_steps=4, save_steps=2)),
                       "--run-dir", str(run_dir), env=env).returncode == 0
    # A longer grace, a description, a stop timeout: the same training inputs.
    text = resumable(max_steps=4, save_steps=2, more="description: longer grace\n").replace(
        "grace: 30", "grace: 40").replace("stop_timeout: 5", "stop_timeout: 9")
    script = compiled(tmp_path, text)
    same = sandbox.run(script, "--run-dir", str(run_dir), env=env)
    assert same.returncode == 0 and len(trains(sandbox)) == 1
    assert "obc: every step finished before for these inputs" in same.stderr
    resumed = sandbox.run(script, "--run-dir", str(run_dir), "--from", "train", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert trains(sandbox)[-1][-1] == "out/checkpoint-4"


@pytest.mark.parametrize("shell", SHELLS)
def test_a_checkpoint_on_a_signal_is_the_new_one_not_the_highest_numbered(
        checkpointer, tmp_path, shell):
    sandbox, run_dir = checkpointer, tmp_path / "run"
    script = compiled(tmp_path, resumable(max_steps=1000))
    env = sandbox.env(HF_TOKEN="t", OBC_STUB_STEP_SECONDS="0.1")
    job = start_script(script, "--run-dir", str(run_dir), shell=shell, env=env)
    wait_until(started_training(run_dir), "train to start")
    old = run_dir / "out/checkpoint-400"  # an old one, numbered above every new step
    old.mkdir(parents=True)
    (old / "adapter_model.safetensors").write_text("w\n")
    (old / "trainer_state.json").write_text('{"global_step": 400}')
    job.send_signal(signal.SIGTERM)
    _, stderr = job.communicate(timeout=60)
    assert job.returncode == 143, stderr
    (new,) = [name for name in checkpoints(run_dir) if name != "checkpoint-400"]
    assert int(new.split("-")[1]) < 400
    assert f"obc: {new} saved" in stderr and "no checkpoint within" not in stderr


def test_after_a_hard_kill_the_checkpoints_belong_to_the_killed_attempts_inputs(
        checkpointer, tmp_path):
    sandbox, run_dir = checkpointer, tmp_path / "run"
    script = compiled(tmp_path, resumable(max_steps=1000, save_steps=2))
    env = sandbox.env(HF_TOKEN="t", OBC_STUB_STEP_SECONDS="0.05")
    job = start_script(script, "--run-dir", str(run_dir), shell="dash", env=env)
    wait_until(lambda: len(checkpoints(run_dir)) >= 2, "two checkpoints")
    (trainer,) = [r["pid"] for r in sandbox.records()]
    job.kill()  # no trap runs: nothing is recorded at the end
    os.killpg(trainer, signal.SIGKILL)
    job.communicate(timeout=10)
    newest = checkpoints(run_dir)[-1]
    (tmp_path / "changed").mkdir()
    changed = compiled(tmp_path / "changed", resumable(max_steps=1000, save_steps=2,
                                                       config=", learning_rate: 0.5"))
    refused = sandbox.run(changed, "--run-dir", str(run_dir), "--dry-run", env=env)
    assert refused.returncode == 3 and f"obc: {newest} in out was made by other" in \
        refused.stderr
    env["OBC_STUB_STEP_SECONDS"] = "0.001"
    resumed = sandbox.run(script, "--run-dir", str(run_dir), env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert trains(sandbox)[-1][-1] == f"out/{newest}"


# --- steps finish once per inputs (issue 19) -----------------------------------------------

STEPPED = """\
version: 1
id: stepped
runtime: {kind: native}
files: {data.jsonl: data.jsonl}
trainer:
  axolotl:
    preprocess: true
    merge: true
    config: {output_dir: out, max_steps: 2, save_steps: 1, datasets: [{path: data.jsonl}]}
steps:
  - {name: evaluate, run: [sh, -c, 'echo evaluated >> evaluations']}
"""


@pytest.mark.parametrize("shell", SHELLS)
def test_a_rerun_starts_at_the_first_step_not_finished_for_these_inputs(checkpointer,
                                                                        tmp_path, shell):
    sandbox, run_dir = checkpointer, tmp_path / "run"
    (tmp_path / "data.jsonl").write_text('{"text": "a"}\n')
    script = compiled(tmp_path, STEPPED)

    def run(*args: str) -> list[str]:
        before = len(sandbox.records())
        result = sandbox.run(script, "--run-dir", str(run_dir), *args, shell=shell)
        assert result.returncode == 0, result.stderr
        return [r["argv"][0] for r in sandbox.records()[before:]]

    assert run() == ["preprocess", "train", "merge-lora"]
    assert run() == []  # every step finished for these inputs
    assert (run_dir / "evaluations").read_text() == "evaluated\n"
    (run_dir / ".obc/done/merge").unlink()  # as if merge had been stopped
    assert run() == ["merge-lora"]
    assert (run_dir / "evaluations").read_text() == "evaluated\n" * 2
    assert run("--from", "train") == ["train", "merge-lora"]
    assert run("--only", "preprocess") == ["preprocess"]
    # A step after train changes: only it runs again.
    script = compiled(tmp_path, STEPPED.replace("echo evaluated", "echo again"))
    assert run() == [] and (run_dir / "evaluations").read_text().endswith("again\n")
    # The attached data changes: preprocess runs again, and train starts over.
    (tmp_path / "data.jsonl").write_text('{"text": "b"}\n')
    script = compiled(tmp_path, STEPPED)
    assert sandbox.run(script, "--run-dir", str(run_dir), shell=shell).returncode == 3
    assert run("--fresh") == ["preprocess", "train", "merge-lora"]


SWEPT = """\
version: 1
id: sw
runtime: {kind: native}
trainer: {axolotl: {config: {base_model: b, learning_rate: 0.001}}}
slurm: {time: 60}
matrix:
  axes:
    lr: {set: trainer.axolotl.config.learning_rate, values: {"1e-4": 1.0e-4, "2e-4": 2.0e-4}}
"""


def training_inputs(tmp_path, text: str) -> dict[str, str]:
    """Each job's training inputs, as the model derives them (what header, plan and script
    show)."""
    (tmp_path / "run.yaml").write_text(text, encoding="utf-8")
    result = compile_files([tmp_path / "run.yaml"])
    assert not result.diagnostics, [d.text() for d in result.diagnostics]
    return {script.job.id: script.job.training_inputs for script in result.scripts}


@pytest.mark.parametrize(("before", "after", "changed"), [
    ('"2e-4": 2.0e-4', '"2e-4": 3.0e-4', {"sw-2e-4"}),  # another run of the sweep
    ("time: 60", "time: 120", set()),
    ("time: 60", "time: 60, extra: [--mail-type=END]", set()),  # a notification
    ("id: sw\n", "id: sw\ndescription: d\ncheckpoint: {grace: 30}\n", set()),
    ("learning_rate: 0.001", "learning_rate: 0.002, seed: 1", {"sw-1e-4", "sw-2e-4"}),
    ("{kind: native}", "{kind: native, venv: /v}", {"sw-1e-4", "sw-2e-4"}),
    ("0.001}", "0.001}, args: [--seed, '2']", {"sw-1e-4", "sw-2e-4"}),  # train's command
])
def test_the_training_inputs_change_with_what_training_depends_on_only(tmp_path, before,
                                                                       after, changed):
    old = training_inputs(tmp_path, SWEPT)
    new = training_inputs(tmp_path, SWEPT.replace(before, after))
    assert {job for job in old if old[job] != new[job]} == changed


def test_an_inherited_variable_does_not_move_what_fresh_sets_aside(checkpointer, tmp_path):
    sandbox, run_dir = checkpointer, tmp_path / "run"
    script = compiled(tmp_path, resumable(max_steps=2, save_steps=1))
    assert sandbox.run(script, "--run-dir", str(run_dir),
                       env=sandbox.env(HF_TOKEN="t")).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    fresh = sandbox.run(script, "--run-dir", str(run_dir), "--fresh",
                        env=sandbox.env(HF_TOKEN="t", OBC_ASIDE=str(elsewhere)))
    assert fresh.returncode == 0, fresh.stderr
    assert not elsewhere.exists()
    assert set_aside(run_dir) == ["out/checkpoint-1", "out/checkpoint-2"]


def test_fresh_sets_aside_only_the_checkpoints_when_output_dir_is_the_run_dir(checkpointer,
                                                                           tmp_path):
    sandbox, run_dir = checkpointer, tmp_path / "run"
    script = compiled(tmp_path, resumable(max_steps=2, save_steps=1).replace(
        "output_dir: out", "output_dir: ."))
    env = sandbox.env(HF_TOKEN="t")
    first = sandbox.run(script, "--run-dir", str(run_dir), env=env)
    assert first.returncode == 0, first.stderr
    assert (run_dir / "checkpoint-2").is_dir()
    (run_dir / "notes.txt").write_text("mine")
    fresh = sandbox.run(script, "--run-dir", str(run_dir), "--fresh", env=env)
    assert fresh.returncode == 0, fresh.stderr
    (folder,) = (run_dir / "set-aside").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == [
        ".obc-done", "checkpoint-1", "checkpoint-2"]
    assert (run_dir / "notes.txt").read_text() == "mine"
