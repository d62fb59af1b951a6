"""health: (docs/preflight.md) in the shells: the library's checks of a node called directly,
with an nvidia-smi stub (no GPU exists here), and the job that runs them natively: a node
with too few GPUs, or one with uncorrectable ECC errors, ends the job with exit 3 before
its first step, naming the node."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from tests.conftest import SHELLS, compile_text, write_script
from tests.script.test_library_functions import NO_STEP_YET, run_library

# What each GPU's line says: `INDEX, ECC_ERRORS` as nvidia-smi's csv,noheader,nounits has it.
HEALTHY = "0, 0\n1, [N/A]\n"


def nvidia_smi(folder: Path, lines: str, code: int = 0) -> Path:
    """A stub nvidia-smi in `folder` that prints `lines` for the query health makes, and
    exits with `code`; it records its arguments."""
    folder.mkdir(exist_ok=True)
    stub = folder / "nvidia-smi"
    stub.write_text("#!/bin/sh\n"
                    f"printf '%s\\n' \"$*\" > '{folder}/asked'\n"
                    f"cat <<'EOF'\n{lines}EOF\n"
                    f"exit {code}\n")
    stub.chmod(0o755)
    return folder


def check_gpus(shell: str, expected: int, path: str) -> tuple[str, str]:
    """obc_check_gpus EXPECTED with PATH `path`: `pass` or `fail: PROBLEM`."""
    done = run_library(shell, ["core", "health"], NO_STEP_YET + f"""\
if obc_check_gpus {expected}; then echo pass; else echo "fail: $OBC_HEALTH_PROBLEM"; fi
""", path=path)
    assert (done.returncode, done.stderr) == (0, ""), done
    return done.stdout.strip()


@pytest.mark.parametrize("shell", SHELLS)
def test_a_node_passes_with_the_gpus_it_was_asked_for_and_ecc_not_reported(shell, tmp_path):
    stubs = nvidia_smi(tmp_path / "bin", HEALTHY)
    assert check_gpus(shell, 2, f"{stubs}:{os.environ['PATH']}") == "pass"
    assert (stubs / "asked").read_text() == (
        "--query-gpu=index,ecc.errors.uncorrected.volatile.total "
        "--format=csv,noheader,nounits\n")


@pytest.mark.parametrize("shell", SHELLS)
def test_a_node_fails_with_too_few_gpus_or_uncorrectable_ecc_errors(shell, tmp_path):
    path = f"{nvidia_smi(tmp_path / 'bin', HEALTHY)}:{os.environ['PATH']}"
    assert check_gpus(shell, 3, path) == "fail: expected 3 GPUs, nvidia-smi lists 2"
    nvidia_smi(tmp_path / "bin", "0, 0\n1, 2\n2, 0\n3, 1\n")
    assert check_gpus(shell, 4, path) == (
        "fail: GPU 1 has 2 uncorrectable ECC errors; GPU 3 has 1 uncorrectable ECC errors")
    # What nvidia-smi says where the driver finds no GPU.
    nvidia_smi(tmp_path / "bin", "No devices were found\n", code=6)
    assert check_gpus(shell, 1, path) == \
        "fail: expected 1 GPU, nvidia-smi lists 0 (it exited with 6)"


@pytest.mark.parametrize("shell", SHELLS)
def test_no_gpu_asked_for_needs_no_nvidia_smi_but_one_asked_for_does(shell, tmp_path):
    # A PATH of the shell alone.
    only_shell = tmp_path / "shell"
    only_shell.mkdir()
    (only_shell / SHELLS[shell][0]).symlink_to(shutil.which(SHELLS[shell][0]))
    assert check_gpus(shell, 0, str(only_shell)) == "pass"
    assert check_gpus(shell, 1, str(only_shell)) == \
        "fail: expected 1 GPU, but nvidia-smi is not on PATH"


@pytest.mark.parametrize("shell", SHELLS)
def test_an_all_reduce_killed_at_its_time_limit_is_said_to_be_late(shell):
    # The program's own SIGALRM ends it at health.timeout (tests/axolotl/test_health_real.py
    # runs the real one); the node says so, naming itself.
    done = run_library(shell, ["core", "rundir", "health"], NO_STEP_YET + """\
OBC_JOB=j OBC_HEALTH_GPUS=0 OBC_HEALTH_TIMEOUT=7 SLURMD_NODENAME=n2
obc_step_command() { shift; obc_start sh -c 'kill -s ALRM $$'; }
obc_check_node 1 0
echo "returned $?"
obc_step_command() { shift; obc_start sh -c 'exit 9'; }
obc_check_node 1 0
echo "returned $?"
""")
    assert done.stdout == "returned 3\nreturned 3\n"
    # Most shells also report the signal that ended a background job (`Alarm clock`).
    assert "".join(line for line in done.stderr.splitlines(keepends=True)
                   if line.startswith("obc: ")) == (
        "obc: j: health check failed on n2: the all-reduce did not end within 7 s "
        "(health.timeout)\n"
        "obc: j: health check failed on n2: the all-reduce failed with exit code 9\n")


@pytest.mark.parametrize("shell", SHELLS)
def test_a_requeued_job_excludes_the_node_besides_those_it_excluded(shell, tmp_path):
    folder = tmp_path / "bin"
    folder.mkdir()
    scontrol = folder / "scontrol"
    scontrol.write_text("#!/bin/sh\n"
                        f"printf '%s\\n' \"$*\" >> '{folder}/calls'\n"
                        "[ \"$1\" = show ] || exit 0\n"
                        "echo \"JobId=7 JobName=j ExcNodeList=$EXCLUDED NodeList=n1\"\n")
    scontrol.chmod(0o755)
    for excluded, expected in [("(null)", "n1"), ("n3", "n3,n1")]:
        done = run_library(shell, ["core", "requeue"], NO_STEP_YET + f"""\
EXCLUDED='{excluded}' OBC_ID=7
export EXCLUDED
obc_exclude_node n1
""", path=f"{folder}:{os.environ['PATH']}")
        assert (done.returncode, done.stderr) == (
            0, f"obc: excluded node n1 (ExcNodeList={expected})\n")
        assert (folder / "calls").read_text().splitlines()[-1] == \
            f"update JobId=7 ExcNodeList={expected}"


def native_job(tmp_path: Path, gpus: str) -> Path:
    """A native job with the health check, runtime.gpus `gpus`, and one step that would say
    it ran."""
    return write_script(tmp_path, compile_text(tmp_path, f"""\
version: 1
id: checked
runtime: {{kind: native, gpus: {gpus}}}
paths: {{run_dir: {tmp_path}/run}}
steps: [{{name: hello, run: [echo, the step ran]}}]
health: {{timeout: 30}}
"""))


@pytest.mark.parametrize(("lines", "problem"), [
    ("0, 0\n", "expected 2 GPUs, nvidia-smi lists 1"),
    ("0, [N/A]\n1, 3\n", "GPU 1 has 3 uncorrectable ECC errors"),
])
def test_a_native_job_on_a_sick_node_exits_3_before_its_first_step(lines, problem, tmp_path):
    stubs = nvidia_smi(tmp_path / "bin", lines)
    script = native_job(tmp_path, "[0, 1]")
    done = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{stubs}:/usr/bin:/bin", "HOME": str(tmp_path)},
                          check=False)
    assert done.returncode == 3, done.stderr
    assert f"obc: checked: health check failed on {socket.gethostname()}: {problem}\n" \
        in done.stderr
    assert "the step ran" not in done.stdout
    status = json.loads((tmp_path / "run" / ".obc" / "status.json").read_text())
    assert (status["state"], status["exit_code"]) == ("failed", 3)


def test_a_dry_run_says_what_the_check_would_run(tmp_path):
    done = subprocess.run(["sh", str(native_job(tmp_path, "[0, 1]")), "--dry-run"],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert "obc: health check on every node: nvidia-smi lists at least 2 GPUs, none with " \
        "uncorrectable ECC errors; an all-reduce across every rank within 30 s (python3 " \
        ".obc/health.py)\n" in done.stderr
    assert not (tmp_path / "run").exists()
