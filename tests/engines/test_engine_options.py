"""What obc adds to every container for the job's sake, proven on the real engines: the IPC
namespace or a /dev/shm of a given size, the time a step has to stop, and who it runs as."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import compile_text, container_name, start_script, write_script
from tests.engines.test_engines import engine_env, job_id, run_file
from tests.support.engines import wait_until


def shm_kilobytes(run_dir) -> int:
    return int((run_dir / "shm.txt").read_text().split()[1])


@pytest.mark.parametrize("engine_name", ["podman", "docker"])
def test_shm_size_gives_a_private_dev_shm_of_that_size(tmp_path, sandbox, cleanup, request,
                                                      engine_name):
    # podman refuses --shm-size beside --ipc=host (every step exited 125), and docker
    # ignored the size: a shm_size means a private IPC namespace, on both engines.
    engine = request.getfixturevalue(engine_name)
    job = job_id()
    cleanup.append((engine, container_name(job, tmp_path / "run dir")))
    text = compile_text(tmp_path, run_file(engine, job, tmp_path, """\
steps: [{name: s, run: [sh, -c, "df -k /dev/shm | tail -n 1 > shm.txt"]}]
""").replace("  extra_args:", "  shm_size: 64m\n  extra_args:"))
    assert "--ipc=host" not in text
    run = sandbox.run(write_script(tmp_path, text), env=engine_env(sandbox, engine))
    assert run.returncode == 0, run.stderr
    assert shm_kilobytes(tmp_path / "run dir") == 64 * 1024


# On TERM the step takes 12 s to save, more than the engines' own 10 s default.
SLOW_SAVE = """\
steps:
  - name: train
    run: [sh, -c, 'trap "sleep 12; echo saved > saved.txt; exit 0" TERM; echo up > up.txt;
                   while :; do sleep 1; done']
"""


@pytest.mark.parametrize("engine_name", ["podman", "docker"])
def test_a_stopped_step_gets_the_whole_stop_timeout(tmp_path, sandbox, cleanup, request,
                                                   engine_name):
    engine = request.getfixturevalue(engine_name)
    job = job_id()
    cleanup.append((engine, container_name(job, tmp_path / "run dir")))
    text = compile_text(tmp_path, run_file(engine, job, tmp_path, SLOW_SAVE).replace(
        "  extra_args:", "  stop_timeout: 40\n  extra_args:"))
    script = start_script(write_script(tmp_path, text), shell="dash",
                          env=engine_env(sandbox, engine))
    wait_until((tmp_path / "run dir" / "up.txt").exists, "the step to start")
    script.terminate()
    _, stderr = script.communicate(timeout=90)
    assert script.returncode == 143, stderr
    assert (tmp_path / "run dir" / "saved.txt").read_text() == "saved\n"
    assert not engine.container_exists(container_name(job, tmp_path / "run dir"))


def test_a_step_that_ignores_term_is_killed_after_the_stop_timeout(tmp_path, sandbox, podman,
                                                                   cleanup):
    job = job_id()
    cleanup.append((podman, container_name(job, tmp_path / "run dir")))
    text = compile_text(tmp_path, run_file(podman, job, tmp_path, """\
steps:
  - {name: s, run: [sh, -c, 'trap "" TERM; echo up > up.txt; while :; do sleep 1; done']}
""").replace("  extra_args:", "  stop_timeout: 1\n  extra_args:"))
    script = start_script(write_script(tmp_path, text), shell="dash",
                          env=engine_env(sandbox, podman))
    wait_until((tmp_path / "run dir" / "up.txt").exists, "the step to start")
    script.terminate()
    _, stderr = script.communicate(timeout=60)
    assert script.returncode == 143, stderr
    assert not podman.container_exists(container_name(job, tmp_path / "run dir"))


def test_an_explicit_user_owns_what_the_steps_write(tmp_path, sandbox, docker, cleanup):
    job = job_id()
    run_dir = tmp_path / "run dir"
    run_dir.mkdir(mode=0o1777)
    run_dir.chmod(0o1777)  # sticky: the job accepts it, and uid 4321 can write there
    cleanup.append((docker, container_name(job, run_dir)))
    text = compile_text(tmp_path, run_file(docker, job, tmp_path, """\
steps: [{name: s, run: [sh, -c, "id -u > uid.txt"]}]
""").replace("  extra_args:", '  user: "4321:4321"\n  extra_args:'))
    run = sandbox.run(write_script(tmp_path, text), env=engine_env(sandbox, docker))
    assert run.returncode == 0, run.stderr
    assert (run_dir / "uid.txt").read_text() == "4321\n"
    assert (run_dir / "uid.txt").stat().st_uid == 4321


# A stand-in engine for a job started by an ordinary user: it records its arguments.
RECORDING_ENGINE = """\
#!/bin/sh
[ "$1" = run ] && printf '%s\\n' "$@" > "$OBC_TEST_ARGV"
exit 0
"""


@pytest.mark.parametrize(("engine", "expected"), [
    ("docker", ["--user", "4321:4321"]),
    ("podman", ["--userns=keep-id"]),
])
def test_by_default_the_steps_run_as_the_user_who_starts_the_job(engine, expected):
    # pytest's temporary folders are root's alone: the ordinary user gets a folder of its own.
    root = Path(tempfile.mkdtemp(prefix="obc-user-"))
    try:
        root.chmod(0o755)
        script = write_script(root, compile_text(root, f"""\
version: 1
id: u1
runtime: {{kind: {engine}}}
steps: [{{name: s, run: [record]}}]
"""))
        (root / "bin").mkdir()
        (root / "bin" / engine).write_text(RECORDING_ENGINE)
        (root / "bin" / engine).chmod(0o755)
        for path in (root, root / "bin", root / "bin" / engine, script):
            os.chown(path, 4321, 4321)
        run = subprocess.run(
            ["setpriv", "--reuid=4321", "--regid=4321", "--clear-groups", "dash", str(script),
             "--run-dir", str(root / "run")],
            env={"PATH": f"{root / 'bin'}:/usr/bin:/bin", "HOME": str(root),
                 "OBC_TEST_ARGV": str(root / "argv.txt")},
            capture_output=True, text=True, timeout=60, check=False)
        assert run.returncode == 0, run.stderr
        argv = (root / "argv.txt").read_text().splitlines()
        position = argv.index(expected[0])
        assert argv[position:position + len(expected)] == expected
        assert "HOME=/workspace/run/.obc/home" in argv
        assert (root / "run/.obc/home").stat().st_uid == 4321
    finally:
        shutil.rmtree(root)
