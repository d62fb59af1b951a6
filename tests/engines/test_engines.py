"""Compiled scripts run for real: rootful podman (with a fake GPU) and docker (no GPU).

Each step runs the stub trainer of stubs/trainer.sh in the busybox test image, which
records what it got into the run dir (see tests/support/engines.py).
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest

from tests.conftest import compile_text, container_name, start_script, write_script
from tests.support.engines import FAKE_GPU_ENV, Engine, trainer_records, wait_until
from tests.support.processes import command_lines

CANARY_MARK = "hf_CANARY_5f0c1b2e"  # unlike anything another process on the machine has
CANARY = CANARY_MARK + "'\"$(touch PWNED)`id` \\n"
_ids = itertools.count()


def job_id() -> str:
    """A container name no other test, nor another test session, uses at the same time."""
    return f"obc-test-{os.getpid()}-{next(_ids)}"


def run_file(engine: Engine, job: str, root: Path, body: str) -> str:
    return f"""\
version: 1
id: {job}
runtime:
  kind: {engine.name}
  image: {engine.image}
  gpus: {"all" if engine.name == "podman" else "none"}
  extra_args: [--network=none]
paths: {{run_dir: {json.dumps(str(root / "run dir"))}, cache_dir: {root / "cache"}}}
{body}"""


def engine_env(sandbox, engine: Engine, **extra: str) -> dict[str, str]:
    """The sandbox's environment with the real engines first on PATH, not the stubs."""
    return sandbox.env(PATH="/usr/local/bin:/usr/bin:/bin", **engine.env, **extra)


@pytest.fixture(params=["podman", "docker"])
def engine(request) -> Engine:
    return request.getfixturevalue(request.param)


def test_steps_run_in_the_container_and_a_failure_stops_the_job(tmp_path, sandbox, engine,
                                                                  cleanup):
    job = job_id()
    cleanup.append((engine, container_name(job, tmp_path / "run dir")))
    (tmp_path / "in.txt").write_text("from the run file's folder\n")
    text = compile_text(tmp_path, run_file(engine, job, tmp_path, """\
steps:
  - {name: first, run: [record, "it's a b", --touch, made.txt,
                        --touch, /workspace/hf-cache/cached.txt]}
  - {name: copy, run: [sh, -c, "cat data/in.txt > copy.txt"]}
  - {name: fail, run: [record, --exit, "7"]}
  - {name: never, run: [record]}
files: {data/in.txt: in.txt}
env: {WANDB_PROJECT: "v 'w' $x"}
secrets: [HF_TOKEN]
"""))
    run = sandbox.run(write_script(tmp_path, text), env=engine_env(sandbox, engine,
                                                                   HF_TOKEN=CANARY))
    assert run.returncode == 7, run.stderr
    assert run.messages[-1] == "obc: step 3/4 fail failed with exit code 7"
    run_dir = tmp_path / "run dir"
    first, fail = trainer_records(run_dir)
    assert (first.program, first.argv, first.cwd) == (
        "record", ["it's a b", "--touch", "made.txt", "--touch",
                   "/workspace/hf-cache/cached.txt"], "/workspace/run")
    assert fail.argv == ["--exit", "7"]
    assert (run_dir / "made.txt").read_text() == "made by a step\n"
    assert (tmp_path / "cache" / "cached.txt").read_text() == "made by a step\n"
    assert (run_dir / "copy.txt").read_text() == "from the run file's folder\n"
    expected_env = {"HF_HOME": "/workspace/hf-cache", "WANDB_PROJECT": "v 'w' $x",
                    "HF_TOKEN": CANARY}
    if engine.name == "podman":  # gpus: all, through the fake CDI spec
        expected_env[FAKE_GPU_ENV[0]] = FAKE_GPU_ENV[1]
    assert {k: first.env.get(k) for k in expected_env} == expected_env
    assert not engine.container_exists(container_name(job, tmp_path / "run dir"))


def test_a_container_left_in_the_run_dir_by_a_killed_run_is_removed(tmp_path, sandbox, podman,
                                                                   cleanup):
    job = job_id()
    name = container_name(job, tmp_path / "run dir")
    cleanup.append((podman, name))
    podman("create", "--name", name, podman.image, "sleep", "300")
    text = compile_text(tmp_path, run_file(podman, job, tmp_path,
                                           "steps: [{name: s, run: [record]}]\n"))
    run = sandbox.run(write_script(tmp_path, text), env=engine_env(sandbox, podman))
    assert run.returncode == 0, run.stderr
    assert f"obc: removing container {name}, left by an earlier run in this run dir" in \
        run.stderr
    assert len(trainer_records(tmp_path / "run dir")) == 1


def test_a_container_that_still_runs_in_the_run_dir_is_left_alone_and_the_run_exits_4(
        tmp_path, sandbox, podman, cleanup):
    # An earlier run killed with its client: the container runs on, with no lock to say so.
    job = job_id()
    name = container_name(job, tmp_path / "run dir")
    cleanup.append((podman, name))
    podman("run", "-d", "--name", name, podman.image, "sleep", "300")
    text = compile_text(tmp_path, run_file(podman, job, tmp_path,
                                           "steps: [{name: s, run: [record]}]\n"))
    run = sandbox.run(write_script(tmp_path, text), env=engine_env(sandbox, podman))
    assert run.returncode == 4
    assert f"obc: the run dir {tmp_path / 'run dir'} is in use by container {name}, which " \
           "an earlier run of this job started and which still runs" in run.stderr
    assert " rm " not in run.stderr  # never a hint to remove a running container
    assert trainer_records(tmp_path / "run dir") == []
    assert podman("container", "inspect", "--format", "{{.State.Running}}",
                  name).stdout.strip() == "true"


def test_two_runs_of_one_job_in_two_run_dirs_run_side_by_side(tmp_path, sandbox, podman,
                                                              cleanup):
    job = job_id()
    text = compile_text(tmp_path, run_file(podman, job, tmp_path, """\
steps: [{name: wait, run: [record, --sleep, "300"]}]
"""))
    script = write_script(tmp_path, text)
    runs = [tmp_path / "first", tmp_path / "second"]
    cleanup.extend((podman, container_name(job, run_dir)) for run_dir in runs)
    started = [start_script(script, "--run-dir", str(run_dir), shell="dash",
                            env=engine_env(sandbox, podman)) for run_dir in runs]
    try:
        for run_dir in runs:
            wait_until(lambda run_dir=run_dir: trainer_records(run_dir), "both steps to start")
        assert all(podman.container_exists(container_name(job, run_dir)) for run_dir in runs)
    finally:
        for process in started:
            process.terminate()
            process.communicate(timeout=60)
    assert [process.returncode for process in started] == [143, 143]


def test_a_secret_is_in_no_process_argv_while_a_container_step_runs(tmp_path, sandbox,
                                                                     podman, cleanup):
    job = job_id()
    cleanup.append((podman, container_name(job, tmp_path / "run dir")))
    text = compile_text(tmp_path, run_file(podman, job, tmp_path, """\
steps: [{name: wait, run: [record, --sleep, "300"]}]
secrets: [HF_TOKEN]
"""))
    script = start_script(write_script(tmp_path, text), shell="dash",
                          env=engine_env(sandbox, podman, HF_TOKEN=CANARY))
    try:
        wait_until(lambda: len(trainer_records(tmp_path / "run dir")) == 1, "the step to start")
        (record,) = trainer_records(tmp_path / "run dir")
        assert record.env["HF_TOKEN"] == CANARY
        argvs = command_lines()
        name = container_name(job, tmp_path / "run dir").encode()
        assert any(name in argv for argv in argvs.values())  # the client
        assert [pid for pid, argv in argvs.items() if CANARY_MARK.encode() in argv] == []
    finally:
        script.terminate()
        stdout, stderr = script.communicate(timeout=60)
    assert script.returncode == 143
    assert CANARY_MARK not in stdout + stderr
