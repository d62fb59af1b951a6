"""Real torch as the judge of trainer.torchrun: a user's own DDP script
(tests/support/programs/ddp_train.py, gloo on the CPU) under the real torchrun and accelerate
of the Axolotl venv, compiled from a run file as a user's and started as an admin would.

A job stopped by a real TERM in the middle of train has its script save a checkpoint (its
launcher passes the signal on, obc gives the grace), and the next run resumes from it, the
newest whole one, with the flag the run file names: the last checkpoint's trainer_state.json
then lists every step once. Natively, under the real Slurm cluster, and across its two
emulated nodes as one data-parallel group.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.axolotl.test_axolotl_real import (
    JOB_TIMEOUT,
    dump,
    home,
    last_lines,
    native,
    nodes_resolve,  # noqa: F401 -- a fixture, used by name
    sbatch_job,
    two_nodes,
)
from tests.conftest import compile_text, untimed, write_script
from tests.support.axolotl import PROGRAMS, clean_env
from tests.support.engines import wait_until

pytestmark = pytest.mark.slow

MAX_STEPS = 10
SAVE_STEPS = 3
PAUSE_AFTER = 5
OUTPUT_DIR = "output"


def torchrun_run_file(job_id: str, venv: Path, run_dir: Path, **more: object) -> str:
    """A run file that trains ddp_train.py for MAX_STEPS steps, two ranks a node, a first
    attempt pausing after step PAUSE_AFTER (so that a test stops it there), and resumes."""
    torchrun = {"script": "ddp_train.py", "nproc_per_node": 2, "output_dir": OUTPUT_DIR,
                "args": ["--output_dir", OUTPUT_DIR, "--max_steps", str(MAX_STEPS),
                         "--save_steps", str(SAVE_STEPS), "--pause_after", str(PAUSE_AFTER)],
                "resume": {"flag": "--resume_from_checkpoint"}, **more.pop("torchrun", {})}
    return dump({"version": 1, "id": job_id,
                 "runtime": {**native(venv), "stop_timeout": 20},
                 "paths": {"run_dir": str(run_dir)}, "trainer": {"torchrun": torchrun},
                 "checkpoint": {"grace": 30}, "env": {"PYTHONUNBUFFERED": "1"}, **more})


def compiled(tmp_path: Path, text: str) -> Path:
    shutil.copy(PROGRAMS / "ddp_train.py", tmp_path / "ddp_train.py")
    return write_script(tmp_path, compile_text(tmp_path, text))


def steps_of(checkpoint: Path) -> list[int]:
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    assert state["global_step"] == int(checkpoint.name.removeprefix("checkpoint-"))
    return [entry["step"] for entry in state["log_history"]]


def paused(log: Path) -> bool:
    return log.exists() and log.read_text().count("paused after step") == 2


def assert_resumed_and_finished(run_dir: Path, log: str) -> None:
    """The stopped attempt saved checkpoint-PAUSE_AFTER, the newest whole one; the next
    resumed from it with the run file's flag and took each remaining step once."""
    output = run_dir / OUTPUT_DIR
    assert steps_of(output / f"checkpoint-{PAUSE_AFTER}") == list(range(1, PAUSE_AFTER + 1))
    assert f"obc: step 1/1 train: resumes from {OUTPUT_DIR}/checkpoint-{PAUSE_AFTER}" in \
        untimed(log), last_lines(log)
    second = (run_dir / ".obc/logs/train.2.log").read_text()
    assert f"--resume_from_checkpoint {OUTPUT_DIR}/checkpoint-{PAUSE_AFTER}" in log
    assert second.count(f"resumed from {OUTPUT_DIR}/checkpoint-{PAUSE_AFTER} at step "
                        f"{PAUSE_AFTER + 1}") == 2
    assert steps_of(output / f"checkpoint-{MAX_STEPS}") == list(range(1, MAX_STEPS + 1))


@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_a_native_job_stopped_by_term_saves_and_resumes_there(axolotl_venv, tmp_path,
                                                              launcher):
    """The launcher, torchrun or `accelerate launch`, passes the TERM on to both ranks,
    which save in the grace obc gives; the rerun resumes there, as one group of two."""
    run_dir = tmp_path / "run"
    script = compiled(tmp_path, torchrun_run_file(f"native-{launcher}", axolotl_venv, run_dir,
                                                  torchrun={"launcher": launcher}))
    env = clean_env(home(tmp_path))
    with (tmp_path / "stderr").open("w") as stderr, \
            subprocess.Popen(["sh", str(script)], env=env, stdout=subprocess.DEVNULL,
                             stderr=stderr) as job:
        wait_until(lambda: paused(run_dir / ".obc/logs/train.1.log"),
                   "both ranks to pause in train", timeout=JOB_TIMEOUT)
        job.send_signal(signal.SIGTERM)
        job.wait(timeout=JOB_TIMEOUT)
    stopped = (tmp_path / "stderr").read_text()
    assert job.returncode == 143, last_lines(stopped)
    assert "obc: train has the signal; it has 50 s to save a checkpoint and end" in stopped
    first = (run_dir / ".obc/logs/train.1.log").read_text()
    assert re.findall(r"rank \d: stopped at step (\d+)", first) == [str(PAUSE_AFTER)] * 2

    result = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True,
                            timeout=JOB_TIMEOUT, check=False)
    assert result.returncode == 0, last_lines(result.stderr)
    assert_resumed_and_finished(run_dir, result.stderr)
    ranks = [json.loads((run_dir / OUTPUT_DIR / f"rank-{rank}.json").read_text())
             for rank in (0, 1)]
    assert [(r["rank"], r["world_size"]) for r in ranks] == [(0, 2), (1, 2)]
    # The launcher waits for its ranks as long as the job does: 20 s + the grace.
    assert [r["shutdown_timeout"] for r in ranks] == ["50", "50"]


def test_a_torchrun_job_under_slurm_stopped_by_term_resumes_in_the_next_job(
        slurm, axolotl_venv, tmp_path):
    run_dir = tmp_path / "run"
    script = compiled(tmp_path, torchrun_run_file("slurm-torchrun", axolotl_venv, run_dir,
                                                  slurm={"time": 30}))
    env = clean_env(home(tmp_path))
    first = slurm.submit(script, cwd=tmp_path, env=env)
    slurm.wait_for(lambda: paused(run_dir / ".obc/logs/train.1.log"), JOB_TIMEOUT,
                   "both ranks to pause in train")
    # What Slurm sends before the time limit, and scancel --batch: TERM to job.sh.
    assert slurm.run("scancel", "--batch", "--signal=TERM", first).returncode == 0
    job = slurm.wait(first, timeout=JOB_TIMEOUT)
    log = (tmp_path / f"slurm-torchrun-{first}.out").read_text()
    assert job.exit_code == 143, last_lines(log)
    assert (run_dir / OUTPUT_DIR / f"checkpoint-{PAUSE_AFTER}/trainer_state.json").is_file()

    second = slurm.submit(script, cwd=tmp_path, env=env)
    job = slurm.wait(second, timeout=JOB_TIMEOUT)
    log = (tmp_path / f"slurm-torchrun-{second}.out").read_text()
    assert (job.state, job.exit_code) == ("COMPLETED", 0), last_lines(log)
    assert_resumed_and_finished(run_dir, log)


@pytest.mark.usefixtures("nodes_resolve")
@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_the_script_trains_across_two_slurm_nodes_as_one_group(
        slurm, axolotl_venv, tmp_path, launcher):
    run_dir = tmp_path / "run"
    job_id = f"multinode-{launcher}"
    shutil.copy(PROGRAMS / "ddp_train.py", tmp_path / "ddp_train.py")
    sbatch_job(slurm, tmp_path, job_id, torchrun_run_file(
        job_id, axolotl_venv, run_dir, slurm=two_nodes(),
        torchrun={"launcher": launcher, "nproc_per_node": 1,
                  "args": ["--output_dir", OUTPUT_DIR, "--max_steps", str(MAX_STEPS)]}))
    ranks = [json.loads((run_dir / OUTPUT_DIR / f"rank-{rank}.json").read_text())
             for rank in (0, 1)]
    assert [(r["rank"], r["world_size"]) for r in ranks] == [(0, 2), (1, 2)]
    assert sorted(r["node"] for r in ranks) == ["n1", "n2"]
    assert steps_of(run_dir / OUTPUT_DIR / f"checkpoint-{MAX_STEPS}") == \
        list(range(1, MAX_STEPS + 1))
