"""Run records are trustworthy: .obc/status.json and .obc/attempt are never replaced by an
empty or partial file, on a full disk or a read-only one (a real tmpfs of 64 KiB), and
`job.sh --status` says so, and exits 1, when the record cannot be read or is not whole."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import SHELLS, compile_text, write_script

# A step that fills the disk its run dir is on (cat fails, the step goes on).
FILLER = "cat /dev/zero > filler 2>/dev/null; echo filled"


def job(tmp_path: Path, command: str) -> Path:
    return write_script(tmp_path, compile_text(tmp_path, f"""\
version: 1
id: rec
runtime: {{kind: native}}
steps: [{{name: s, run: [sh, -c, '{command}']}}]
"""))


@pytest.fixture
def small_disk(tmp_path):
    """A real 64 KiB tmpfs, unmounted after the test."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], check=True)
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=True)


def record(run_dir: Path) -> dict:
    return json.loads((run_dir / ".obc/status.json").read_text())


# A disk that fills while a record is written, in every shell.
@pytest.mark.parametrize("shell", SHELLS)
def test_a_full_disk_leaves_the_last_whole_record(sandbox, tmp_path, small_disk, shell):
    run_dir = small_disk / "run"
    script = job(tmp_path, FILLER)

    run = sandbox.run(script, "--run-dir", str(run_dir), shell=shell)

    assert run.returncode == 0, run.stderr
    assert f"obc: cannot record the status in {run_dir}/.obc" in run.stderr
    last = record(run_dir)
    assert (last["attempt"], last["state"], last["step"]) == (1, "running", "s")
    # The run has gone without recording its end: --status judges it killed.
    status = sandbox.run(script, "--run-dir", str(run_dir), "--status", shell=shell)
    assert status.returncode == 0 and json.loads(status.stdout) == {**last, "state": "killed"}
    assert (run_dir / ".obc/attempt").read_text() == "1\n"


def test_a_full_disk_at_the_start_leaves_the_attempts_count(sandbox, tmp_path, small_disk):
    run_dir = small_disk / "run"
    script = job(tmp_path, "true")
    assert sandbox.run(script, "--run-dir", str(run_dir)).returncode == 0
    subprocess.run(f"cat /dev/zero > {small_disk}/filler", shell=True, check=False)

    run = sandbox.run(script, "--run-dir", str(run_dir))

    assert run.returncode == 1
    assert (run_dir / ".obc/attempt").read_text() == "1\n"
    assert record(run_dir)["state"] == "succeeded"
    (small_disk / "filler").unlink()
    assert sandbox.run(script, "--run-dir", str(run_dir)).returncode == 0
    assert record(run_dir)["attempt"] == 2


def test_a_disk_made_read_only_mid_run_leaves_the_last_whole_record(sandbox, tmp_path,
                                                                     small_disk):
    run_dir = small_disk / "run"
    # The log is open for writing, so the tmpfs itself cannot be made read-only: the run dir
    # is mounted read-only over itself (the step's files stay open on the mount below).
    script = job(tmp_path, "mount --bind . . && mount -o remount,bind,ro . && exit 7")

    run = sandbox.run(script, "--run-dir", str(run_dir))

    assert run.returncode == 7, run.stderr
    assert f"obc: cannot record the status in {run_dir}/.obc" in run.stderr
    assert record(run_dir)["state"] == "running"
    assert sandbox.run(script, "--run-dir", str(run_dir), "--status").returncode == 0


@pytest.mark.parametrize("content", [
    "",
    '{"job": "rec", "attempt": 1, "state": "runn',
    '{"job": "rec", "attempt": 1, "state": "running", "step": "s", "exit_code": null}\n',
    "\0\0\0\0",
])
def test_status_says_when_the_record_is_not_whole(sandbox, tmp_path, content):
    run_dir = tmp_path / "run"
    script = job(tmp_path, "true")
    (run_dir / ".obc").mkdir(parents=True)
    (run_dir / ".obc/status.json").write_text(content)

    status = sandbox.run(script, "--run-dir", str(run_dir), "--status")

    assert (status.returncode, status.stdout) == (1, "")
    assert status.stderr == f"obc: the record {run_dir}/.obc/status.json is empty or cut " \
                            "short (a full disk?): no state to show\n"


def test_status_says_when_the_record_cannot_be_read(sandbox, tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / ".obc/status.json").mkdir(parents=True)  # in the way

    status = sandbox.run(job(tmp_path, "true"), "--run-dir", str(run_dir), "--status")

    assert (status.returncode, status.stdout) == (1, "")
    assert status.stderr.endswith(f"obc: cannot read the record {run_dir}/.obc/status.json\n")
