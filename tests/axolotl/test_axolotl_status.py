"""`obc status` of a sweep of two tiny real Axolotl runs on the CPU, one run to the end and
one stopped half way (its train checkpoints first): the table says one done and one
stopped, each with the newest checkpoint and the last loss Axolotl logged, and the JSON is
what each `job.sh --status` prints. (tests/script/test_status_runs.py covers the same with
a stand-in trainer, in every shell.)"""

from __future__ import annotations

import json
import re
import signal
import subprocess

import pytest

from compiler.status.progress import read_progress
from tests.axolotl.test_axolotl_real import JOB_TIMEOUT, dump, home, last_lines, native
from tests.compile.test_report import curves
from tests.script.test_sweep_script import compile_out
from tests.support.axolotl import OUTPUT_DIR, PROGRAMS, clean_env, lora_config
from tests.support.engines import wait_until

pytestmark = pytest.mark.slow


def sweep(venv, tiny_model) -> str:
    """Two runs of one LoRA config: `done` takes 3 steps, `stopped` pauses after its second
    until it is asked for a checkpoint (tests/support/programs/obc_pause.py)."""
    paused = {"max_steps": 20, "save_steps": 100_000, "plugins": ["obc_pause.PausePlugin"]}
    return dump({
        "version": 1, "id": "st", "runtime": {**native(venv), "stop_timeout": 20},
        "trainer": {"axolotl": {"config": lora_config(tiny_model, max_steps=3,
                                                      save_steps=1)}},
        "checkpoint": {"grace": 600},
        "env": {"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(PROGRAMS)},
        "matrix": {"axes": {"run": {
            "done": {},
            "stopped": {"trainer": {"axolotl": {"config": paused}}}}}}})


def last_loss(checkpoint) -> tuple[int, float]:
    """The step and loss of the last loss Axolotl logged in the checkpoint."""
    history = json.loads((checkpoint / "trainer_state.json").read_text())["log_history"]
    logged = [entry for entry in history if "loss" in entry][-1]
    return logged["step"], logged["loss"]


def losses(output_dir) -> tuple:
    return read_progress(output_dir).losses


def test_obc_status_shows_a_done_and_a_stopped_run_with_their_last_losses(
        axolotl_venv, tiny_model, tmp_path, obc, monkeypatch):
    out = compile_out(tmp_path, sweep(axolotl_venv, tiny_model))
    env = clean_env(home(tmp_path))
    runs = home(tmp_path) / "overbrainer/runs"
    done = subprocess.run(["sh", str(out / "st-done/job.sh")], env=env, capture_output=True,
                          text=True, timeout=JOB_TIMEOUT, check=False)
    assert done.returncode == 0, last_lines(done.stderr)
    job = subprocess.Popen(["sh", str(out / "st-stopped/job.sh")], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        log = runs / "st-stopped/.obc/logs/train.1.log"
        wait_until(lambda: (log.exists() and "'loss'" in log.read_text()) or
                   job.poll() is not None, "train to take a step", JOB_TIMEOUT)
        job.send_signal(signal.SIGTERM)
        _, stderr = job.communicate(timeout=JOB_TIMEOUT)
    finally:
        job.kill()
    assert job.returncode == 143, last_lines(stderr)
    saved = re.findall(r"obc: (checkpoint-\d+) saved$", stderr, re.MULTILINE)
    assert len(saved) == 1, last_lines(stderr)
    saved = saved[0]
    monkeypatch.setenv("HOME", str(home(tmp_path)))

    shown = obc("status", "--format", "json", str(out / "st"))

    rows = [json.loads(line) for line in shown.stdout.splitlines()]
    statuses = [subprocess.run(["sh", str(out / f"{run}/job.sh"), "--status"], env=env,
                               capture_output=True, text=True, timeout=60, check=True).stdout
                for run in ("st-done", "st-stopped")]
    assert [row["record"] for row in rows] == [json.loads(line) for line in statuses]
    expected = [("done", "checkpoint-3", *last_loss(runs / "st-done" / OUTPUT_DIR /
                                                     "checkpoint-3")),
                ("stopped", saved, *last_loss(runs / "st-stopped" / OUTPUT_DIR / saved))]
    assert [(row["state"], row["checkpoint"], row["trained_step"], row["loss"])
            for row in rows] == expected
    assert 0 < expected[1][2] < 20
    table = obc("status", str(out / "st")).stdout.splitlines()
    assert [line.split()[:2] for line in table[1:]] == [["st-done", "done"],
                                                        ["st-stopped", "stopped"]]

    page = tmp_path / "report.html"
    assert obc("report", str(out / "st"), "-o", str(page)).code == 0
    # The sweep's plot overlays both runs, labelled by their axis values, each run's line
    # through as many points as it logged losses (the legend draws each again, one stroke).
    (overlay,) = re.findall(r'<figure class="sweep">\n(<svg .*?</svg>)', page.read_text(), re.S)
    assert re.findall(r">run=(\w+)<", overlay) == ["done", "stopped"]
    lines = curves(overlay)
    assert [colour for _, colour in lines] == ["#1f77b4", "#ff7f0e", "#1f77b4", "#ff7f0e"]
    logged = [len(losses(runs / run / OUTPUT_DIR)) for run in ("st-done", "st-stopped")]
    assert [path.count("L") + 1 for path, _ in lines[:2]] == logged
