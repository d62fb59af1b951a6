"""A job.sh killed with KILL cannot trap it: its step runs on, in a session of its own. The run
dir stays in use (exit 4) until nothing the killed run started runs any more, natively and
in a real container, so that two trainers never write one run dir; a killed job.sh that its
parent never reaps (a zombie) does not keep it. Each test waits for what it needs (a line
written, a process gone), never for a time."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.conftest import SHELLS, compile_text, container_name, start_script, write_script
from tests.engines.test_engines import engine_env, job_id, run_file
from tests.support.engines import Engine, trainer_records, wait_until
from tests.support.processes import alive, command_lines, group_members, stat_fields

# The review's step: it writes its own pid into the run dir every second, for ever.
WRITER = "while :; do echo $$ >> shared-output.txt; sleep 1; done"
# A step that leaves the writer running in a session of its own (as a daemon would) and
# waits for it; its own pid goes to step.pid.
ESCAPING = 'echo $$ > step.pid; setsid sh -c "$1" & wait'
# A run dir whose name would run a command, split, glob or read as an option if the lock's
# paths were not quoted.
HOSTILE_RUN_DIR = "-run $(touch PWNED) 'x'\n* lock.take"


def native_job(folder: Path, argv: list[str]) -> Path:
    return write_script(folder, compile_text(folder, f"""\
version: 1
id: killed
runtime: {{kind: native}}
steps: [{{name: write, run: {json.dumps(argv)}}}]
"""))


@pytest.fixture(scope="module")
def writer(tmp_path_factory) -> Path:
    return native_job(tmp_path_factory.mktemp("writer"), ["sh", "-c", WRITER])


@pytest.fixture
def groups() -> Iterator[list[int]]:
    """Process groups to kill after the test, whatever happened in it."""
    pgids: list[int] = []
    yield pgids
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def writers(run_dir: Path) -> list[int]:
    """The pids in shared-output.txt, line by line."""
    output = run_dir / "shared-output.txt"
    return [int(line) for line in output.read_text().split()] if output.exists() else []


def start_writing(script: Path, run_dir: Path, shell: str, env: dict[str, str],
                  groups: list[int]) -> tuple[subprocess.Popen, int]:
    """Start a run and wait until its step has written; return the run and the step's pid
    (setsid made it the leader of its process group)."""
    before = set(writers(run_dir))
    run = start_script(script, "--run-dir", str(run_dir), shell=shell, env=env)
    groups.append(run.pid)
    wait_until(lambda: set(writers(run_dir)) - before or run.poll() is not None,
               "the step to write")
    assert run.poll() is None, run.communicate()
    (step,) = set(writers(run_dir)) - before
    groups.append(step)
    return run, step


def kill_job(run: subprocess.Popen) -> None:
    """KILL the job.sh itself (not what it started), as `kill -9 PID` does."""
    os.kill(run.pid, signal.SIGKILL)


def wait_gone(*pgids: int) -> None:
    wait_until(lambda: not any(group_members(pgid) for pgid in pgids),
               f"process groups {pgids} to end")


def stop_run(run: subprocess.Popen) -> None:
    run.terminate()
    run.communicate(timeout=90)
    assert run.returncode == 143


@pytest.mark.parametrize("shell", SHELLS)
def test_the_step_of_a_killed_job_keeps_the_run_dir_until_it_ends(writer, tmp_path, sandbox,
                                                                 shell, groups):
    run_dir = tmp_path / "run"
    first, step = start_writing(writer, run_dir, shell, sandbox.env(), groups)
    kill_job(first)
    first.wait()

    second = sandbox.run(writer, "--run-dir", str(run_dir), shell=shell)

    assert second.returncode == 4, second.stderr
    assert f"obc: the run dir {run_dir} is in use by another run of this job, or by what " \
           "it started (host, pid, Slurm job, restart: " in second.stderr
    assert set(writers(run_dir)) == {step}
    assert group_members(step)  # the killed run's step writes on, alone
    # Once it has ended, the next run takes the run dir over.
    os.killpg(step, signal.SIGKILL)
    wait_gone(step, first.pid)
    third, new_step = start_writing(writer, run_dir, shell, sandbox.env(), groups)
    stop_run(third)
    lines = writers(run_dir)
    assert lines == [step] * lines.count(step) + [new_step] * lines.count(new_step)


def test_a_killed_job_that_its_parent_never_reaps_does_not_keep_the_run_dir(
        writer, tmp_path, sandbox, groups):
    run_dir = tmp_path / "run"
    first, step = start_writing(writer, run_dir, "dash", sandbox.env(), groups)
    kill_job(first)
    wait_until(lambda: not alive(first.pid), "the killed job.sh to become a zombie")
    os.killpg(step, signal.SIGKILL)
    wait_gone(step, first.pid)
    assert Path(f"/proc/{first.pid}").exists()  # still not reaped

    second, _ = start_writing(writer, run_dir, "dash", sandbox.env(), groups)

    stop_run(second)
    first.wait()


def test_a_process_a_killed_step_started_in_a_session_of_its_own_keeps_the_run_dir(
        tmp_path, sandbox, groups):
    script = native_job(tmp_path, ["sh", "-c", ESCAPING, "sh", WRITER])
    run_dir = tmp_path / "run"
    first, escaped = start_writing(script, run_dir, "dash", sandbox.env(), groups)
    step = int((run_dir / "step.pid").read_text())
    groups.append(step)
    os.killpg(first.pid, signal.SIGKILL)  # job.sh, and its log's tees
    first.wait()
    os.killpg(step, signal.SIGKILL)  # the step itself ends; what it left does not
    wait_gone(step, first.pid)

    second = sandbox.run(script, "--run-dir", str(run_dir), shell="dash", timeout=30)

    assert second.returncode == 4, second.stderr
    assert set(writers(run_dir)) == {escaped} and group_members(escaped)


def lock_takers(runs: list[subprocess.Popen]) -> list[subprocess.Popen]:
    """The runs that wait for their turn to take over the run dir's lock (`flock 8`)."""
    takers = [pid for pid, line in command_lines().items() if line == b"flock\x008\x00"]
    parents = {fields[1] for pid in takers if (fields := stat_fields(pid))}  # their ppid
    return [run for run in runs if str(run.pid) in parents]


def test_runs_killed_while_they_take_over_a_lock_leave_it_to_exactly_one(
        writer, tmp_path, sandbox, groups):
    run_dir = tmp_path / HOSTILE_RUN_DIR
    first, step = start_writing(writer, run_dir, "dash", sandbox.env(), groups)
    kill_job(first)
    first.wait()
    os.killpg(step, signal.SIGKILL)
    wait_gone(step, first.pid)
    # The killed run's lock is left; three runs come to take it over while the test holds
    # their turn, and one of them is killed as it waits.
    with open(run_dir / ".obc" / "lock.take", "a") as turn:
        fcntl.flock(turn, fcntl.LOCK_EX)
        runs = [start_script(writer, "--run-dir", str(run_dir), shell="dash",
                             env=sandbox.env()) for _ in range(3)]
        groups.extend(run.pid for run in runs)
        wait_until(lambda: len(lock_takers(runs)) == 3, "three runs waiting for their turn")
        os.killpg(runs[0].pid, signal.SIGKILL)
        runs[0].wait()

    wait_until(lambda: len(set(writers(run_dir))) == 2 and
               [run.poll() for run in runs[1:]].count(None) == 1 or
               all(run.poll() is not None for run in runs[1:]),
               "one run to write and the other to end")
    (ran,) = [run for run in runs[1:] if run.poll() is None]
    (refused,) = [run for run in runs[1:] if run is not ran]
    assert refused.returncode == 4
    assert "is in use by another run of this job" in refused.communicate()[1]
    stop_run(ran)
    assert len(set(writers(run_dir))) == 2
    assert not list(tmp_path.rglob("PWNED"))


def running(engine: Engine, name: str) -> bool:
    done = engine("container", "inspect", "--format", "{{.State.Running}}", name, check=False)
    return done.stdout.strip() == "true"


def processes_naming(word: str) -> dict[int, list[bytes]]:
    """The arguments of the processes whose command line has `word` (a container's client
    and monitor), by pid."""
    return {pid: line.split(b"\0") for pid, line in command_lines().items()
            if word.encode() in line}


class ContainerRun(NamedTuple):
    """A job whose one step runs a sleeping trainer in a container of `engine`, started."""

    engine: Engine
    name: str
    run_dir: Path
    script: Path
    env: dict[str, str]
    first: subprocess.Popen


def start_container_trainer(request, tmp_path, sandbox, cleanup, groups,
                            engine_name: str) -> ContainerRun:
    """Start a job whose step sleeps in a container of `engine_name`; return once it runs."""
    engine: Engine = request.getfixturevalue(engine_name)
    job = job_id()
    run_dir = tmp_path / "run dir"
    name = container_name(job, run_dir)
    cleanup.append((engine, name))
    script = write_script(tmp_path, compile_text(tmp_path, run_file(engine, job, tmp_path, """\
steps: [{name: train, run: [record, --sleep, "300"]}]
""")))
    env = engine_env(sandbox, engine)
    first = start_script(script, shell="dash", env=env)
    groups.append(first.pid)
    wait_until(lambda: trainer_records(run_dir), "the first trainer to start")
    return ContainerRun(engine, name, run_dir, script, env, first)


@pytest.mark.parametrize("engine_name", ["podman", "docker"])
def test_the_container_of_a_killed_job_keeps_the_run_dir_until_it_ends(
        request, tmp_path, sandbox, cleanup, groups, engine_name):
    engine, name, run_dir, script, env, first = start_container_trainer(
        request, tmp_path, sandbox, cleanup, groups, engine_name)
    kill_job(first)
    first.wait()

    second = sandbox.run(script, env=env)

    assert second.returncode == 4, second.stderr
    assert "is in use by another run of this job" in second.stderr
    assert len(trainer_records(run_dir)) == 1 and running(engine, name)
    # Once its container has ended, with its client, the next run takes the run dir over.
    engine("stop", "-t", "0", name)
    wait_until(lambda: not processes_naming(name), "the container and its client to end")
    third = start_script(script, shell="dash", env=env)
    groups.append(third.pid)
    wait_until(lambda: len(trainer_records(run_dir)) == 2 or third.poll() is not None,
               "the next trainer to start")
    stop_run(third)


def client_of(engine: Engine, name: str) -> int:
    """The pid of the `ENGINE run` that started container `name`."""
    for pid, argv in processes_naming(name).items():
        if argv[0].endswith(engine.name.encode()) and b"run" in argv:
            return pid
    pytest.fail(f"no {engine.name} run for {name}")


@pytest.mark.parametrize("engine_name", ["podman", "docker"])
def test_a_container_whose_client_was_killed_with_the_job_keeps_the_run_dir(
        request, tmp_path, sandbox, cleanup, groups, engine_name):
    engine, name, run_dir, script, env, first = start_container_trainer(
        request, tmp_path, sandbox, cleanup, groups, engine_name)
    client = client_of(engine, name)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    os.killpg(os.getpgid(client), signal.SIGKILL)
    wait_gone(client, first.pid)

    second = sandbox.run(script, env=env)

    # (podman's conmon, which watches the container, holds the run dir's lock still; docker
    # has no such process here, and the container is found by its name.)
    assert second.returncode == 4, second.stderr
    assert f"obc: the run dir {run_dir} is in use by " in second.stderr
    assert len(trainer_records(run_dir)) == 1 and running(engine, name)
