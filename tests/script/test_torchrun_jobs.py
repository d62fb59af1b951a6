"""trainer.torchrun's job in every shell, with a stand-in launcher and script
(stubs/launcher.py): told to stop during train, the job passes TERM on and gives the script
the grace to save, and the next run resumes from that checkpoint with the run file's flag.
tests/axolotl/test_torchrun_real.py proves the same with real torch, torchrun and Slurm."""

from __future__ import annotations

import signal

import pytest

from tests.conftest import SHELLS, compile_text, install_stub, start_script, write_script
from tests.script.test_resume import started_training
from tests.support.engines import wait_until

RUN_FILE = """\
version: 1
id: tr
runtime: {kind: native, stop_timeout: 1}
trainer:
  torchrun:
    script: train.py
    args: [--output_dir, out]
    output_dir: out
    resume: {flag: --resume_from_checkpoint}
checkpoint: {grace: 30}
"""


@pytest.mark.parametrize("shell", SHELLS)
def test_a_stopped_script_gets_the_grace_to_save_and_resumes_with_its_flag(
        sandbox, tmp_path, shell):
    install_stub(sandbox.bin / "torchrun", "launcher")
    (tmp_path / "train.py").write_text("print('trains')\n")
    run_dir = tmp_path / "run"
    script = write_script(tmp_path, compile_text(tmp_path, RUN_FILE))
    # Saving takes longer than the stop timeout: only the grace lets it finish.
    env = sandbox.env(OBC_STUB_STEP_SECONDS="0.1", OBC_STUB_SAVE_SECONDS="2")
    first = start_script(script, "--run-dir", str(run_dir), shell=shell, env=env)
    wait_until(started_training(run_dir), "train to start")
    first.send_signal(signal.SIGTERM)
    _, stderr = first.communicate(timeout=60)
    assert first.returncode == 143, stderr
    assert "obc: train has the signal; it has 31 s to save a checkpoint and end" \
        in stderr
    (saved,) = [p.name for p in (run_dir / "out").iterdir()]
    assert (run_dir / "out" / saved / "trainer_state.json").is_file()

    env["OBC_STUB_STEP_SECONDS"] = "0.001"
    second = sandbox.run(script, "--run-dir", str(run_dir), shell=shell, env=env)
    assert second.returncode == 0, second.stderr
    launches = [r["argv"] for r in sandbox.records() if r["program"] == "torchrun"]
    assert launches == [
        ["--standalone", "--nproc_per_node", "1", "train.py", "--output_dir", "out"],
        ["--standalone", "--nproc_per_node", "1", "train.py", "--output_dir", "out",
         "--resume_from_checkpoint", f"out/{saved}"]]
    assert f"obc: step 1/1 train: resumes from out/{saved}" in second.messages
