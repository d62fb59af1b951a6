"""TERM, INT and HUP while a step runs: the job stops the step completely and exits 128+N.

Natively, the step's whole process group must end (the step's own child included); in a
container (real podman, and docker once), the container must be stopped and gone. Each
test waits until the step has recorded that it runs before it sends the signal.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from tests.conftest import SHELLS, compile_text, container_name, start_script, write_script
from tests.engines.test_engines import engine_env, job_id, run_file
from tests.support.engines import trainer_records, wait_until
from tests.support.processes import alive, group_members

SIGNALS = [("TERM", signal.SIGTERM), ("INT", signal.SIGINT), ("HUP", signal.SIGHUP)]
TWO_STEPS = """\
steps:
  - {name: long, run: [record, --grandchild, --sleep, "300"]}
  - {name: after, run: [record, after]}
"""


def stop_with(script, number: signal.Signals) -> tuple[str, str]:
    """Send `number` to the running script; return its output once it has ended."""
    os.kill(script.pid, number)
    try:
        return script.communicate(timeout=90)
    except BaseException:
        script.kill()
        raise


@pytest.fixture(scope="module")
def native_script(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("native")
    return write_script(folder, compile_text(folder, f"""\
version: 1
id: sig
runtime: {{kind: native}}
{TWO_STEPS}"""))


def step_records(sandbox) -> list[dict]:
    return [r for r in sandbox.records() if "program" in r]


@pytest.mark.parametrize(("name", "number"), SIGNALS)
@pytest.mark.parametrize("shell", SHELLS)
def test_a_signal_ends_the_native_step_and_everything_it_started(native_script, tmp_path,
                                                                 sandbox, shell, name, number):
    script = start_script(native_script, "--run-dir", str(tmp_path / "run"), shell=shell,
                          env=sandbox.env())
    wait_until(lambda: step_records(sandbox), "the step to start")
    (step,) = step_records(sandbox)
    assert step["pid"] == step["pgid"] and alive(step["grandchild"])
    _, stderr = stop_with(script, number)
    assert script.returncode == 128 + number, stderr
    assert stderr.splitlines()[-1] == f"obc: {name} received, stopping"
    wait_until(lambda: not group_members(step["pgid"]), "the step's process group to end")
    assert not alive(step["pid"]) and not alive(step["grandchild"])
    assert len(step_records(sandbox)) == 1  # the next step never started


@pytest.mark.parametrize(("name", "number"), SIGNALS)
@pytest.mark.parametrize("shell", SHELLS)
def test_a_signal_stops_and_removes_the_podman_container(tmp_path, sandbox, podman, cleanup,
                                                         shell, name, number):
    stop_container_step(tmp_path, sandbox, podman, cleanup, shell, name, number)


def test_a_signal_stops_and_removes_the_docker_container(tmp_path, sandbox, docker, cleanup):
    stop_container_step(tmp_path, sandbox, docker, cleanup, "dash", "TERM", signal.SIGTERM)


def stop_container_step(tmp_path, sandbox, engine, cleanup, shell, name, number) -> None:
    job = job_id()
    container = container_name(job, tmp_path / "run dir")
    cleanup.append((engine, container))
    text = compile_text(tmp_path, run_file(engine, job, tmp_path, TWO_STEPS))
    script = start_script(write_script(tmp_path, text), shell=shell,
                          env=engine_env(sandbox, engine))
    run_dir = tmp_path / "run dir"
    wait_until(lambda: trainer_records(run_dir), "the container's step to start")
    assert engine.container_exists(container)
    _, stderr = stop_with(script, number)
    assert script.returncode == 128 + number, stderr
    assert stderr.splitlines()[-1] == f"obc: {name} received, stopping"
    assert not engine.container_exists(container)
    assert len(trainer_records(run_dir)) == 1  # the next step never started


# A stand-in for an engine client that has not created the container yet (still pulling
# the image, say): `run` says it started, then waits; everything else is the real engine.
PULLING_CLIENT = """\
#!/bin/sh
if [ "$1" = run ]; then
  : > "$OBC_TEST_STARTED"
  sleep 300 &
  wait "$!"
fi
exec {engine} "$@"
"""


def test_a_signal_before_the_container_exists_stops_the_client(tmp_path, sandbox, podman,
                                                               cleanup):
    job = job_id()
    cleanup.append((podman, container_name(job, tmp_path / "run dir")))
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "podman").write_text(PULLING_CLIENT.format(engine=shutil.which("podman")))
    (shim / "podman").chmod(0o755)
    text = compile_text(tmp_path, run_file(podman, job, tmp_path, TWO_STEPS))
    env = engine_env(sandbox, podman, OBC_TEST_STARTED=str(tmp_path / "started"))
    env["PATH"] = f"{shim}:{env['PATH']}"
    script = start_script(write_script(tmp_path, text), shell="dash", env=env)
    wait_until((tmp_path / "started").exists, "the engine client to start")
    _, stderr = stop_with(script, signal.SIGTERM)
    assert script.returncode == 143, stderr
    assert stderr.splitlines()[-1] == "obc: TERM received, stopping"
    assert not podman.container_exists(container_name(job, tmp_path / "run dir"))
    assert trainer_records(tmp_path / "run dir") == []


@pytest.mark.parametrize("shell", SHELLS)
def test_a_signal_while_a_step_is_being_started_still_stops_it(tmp_path, sandbox, shell):
    # The window between `setsid ... &` and recording the step's pid, held open: the trap
    # runs only after the delay, and must find the step through $!.
    text = compile_text(tmp_path, f"""\
version: 1
id: race
runtime: {{kind: native}}
{TWO_STEPS}""")
    started = '  setsid "$@" &\n'
    assert text.count(started) == 1
    script = write_script(tmp_path, text.replace(started, started + "  sleep 3\n"))
    process = start_script(script, "--run-dir", str(tmp_path / "run"), shell=shell,
                           env=sandbox.env())
    wait_until(lambda: step_records(sandbox), "the step to start")
    (step,) = step_records(sandbox)
    _, stderr = stop_with(process, signal.SIGTERM)
    assert process.returncode == 143, stderr
    wait_until(lambda: not group_members(step["pgid"]), "the step's process group to end")


SLOW_STOP = """\
steps:
  - name: train
    run: [sh, -c, 'trap "sleep 2; echo saved > saved.txt; exit 0" TERM; echo $$ > up.txt;
                   while :; do sleep 1; done']
"""
IGNORES_TERM = """\
steps:
  - {name: train, run: [sh, -c, 'trap "" TERM; echo $$ > up.txt; while :; do sleep 1; done']}
"""


@pytest.mark.parametrize(("body", "timeout", "saved"), [
    (SLOW_STOP, 30, True),   # the step has the time it needs to save
    (IGNORES_TERM, 1, False),  # and is killed once the stop timeout has passed
])
def test_a_native_step_gets_the_stop_timeout_then_is_killed(tmp_path, sandbox, body, timeout,
                                                            saved):
    text = compile_text(tmp_path, f"""\
version: 1
id: slow
runtime: {{kind: native, stop_timeout: {timeout}}}
{body}""")
    run_dir = tmp_path / "run"
    process = start_script(write_script(tmp_path, text), "--run-dir", str(run_dir),
                           shell="dash", env=sandbox.env())
    wait_until(lambda: (run_dir / "up.txt").exists() and (run_dir / "up.txt").read_text(),
               "the step to start")
    step = int((run_dir / "up.txt").read_text())
    _, stderr = stop_with(process, signal.SIGTERM)
    assert process.returncode == 143, stderr
    assert (run_dir / "saved.txt").exists() == saved
    wait_until(lambda: not group_members(step), "the step's process group to end")


@pytest.mark.parametrize("shell", ["dash", "bash", "yash"])
def test_the_signal_slurm_is_told_to_send_stops_the_step_too(tmp_path, sandbox, shell):
    # A run file's B:USR1@300 (without max_restarts): USR1 is trapped like TERM, so the step
    # is stopped rather than left running by a script that USR1 killed.
    text = compile_text(tmp_path, f"""\
version: 1
id: usr1
runtime: {{kind: native}}
{TWO_STEPS}slurm: {{signal: "B:USR1@300"}}
""")
    script = start_script(write_script(tmp_path, text), "--run-dir", str(tmp_path / "run"),
                          shell=shell, env=sandbox.env())
    wait_until(lambda: step_records(sandbox), "the step to start")
    (step,) = step_records(sandbox)
    _, stderr = stop_with(script, signal.SIGUSR1)
    assert script.returncode == 128 + 10, stderr
    assert "obc: USR1 received, stopping" in stderr
    wait_until(lambda: not group_members(step["pgid"]), "the step's process group to end")
