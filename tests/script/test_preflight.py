"""Preflight names the cause of what would stop a job: a venv that is missing or whose Python
is gone, a step's script whose #! interpreter is missing, and a run dir (or cache dir) that
the user cannot create; each is exit 3 before anything is created, with real shells, a real
venv and a real unwritable folder (docs/running.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import SHELLS, compile_text, write_script

NOBODY = 65534
RUNUSER = shutil.which("runuser", path="/usr/sbin:/sbin:/usr/bin:/bin") or "runuser"


def native_job(tmp_path: Path, runtime: str, steps: str, paths: str = "{}") -> Path:
    return write_script(tmp_path, compile_text(tmp_path, f"""\
version: 1
id: pre
runtime: {runtime}
paths: {paths}
steps: {steps}
"""))


def venv_without_its_python(folder: Path) -> Path:
    """A real venv made by a Python that was then removed: its bin/python leads nowhere."""
    base = folder / "python-base" / "bin"
    base.mkdir(parents=True)
    shutil.copy2(os.path.realpath("/usr/bin/python3"), base / "python3")
    venv = folder / "venv"
    subprocess.run([base / "python3", "-m", "venv", "--without-pip", venv], check=True)
    shutil.rmtree(folder / "python-base")
    return venv


def script(path: Path, first_line: str) -> Path:
    path.write_text(f"{first_line}\necho ran\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("shell", SHELLS)
def test_a_missing_venv_fails_preflight_instead_of_running_the_systems_python(
        tmp_path, sandbox, shell):
    venv = tmp_path / "does-not-exist" / "venv"
    job = native_job(tmp_path, f"{{kind: native, venv: {venv}}}",
                     '[{name: a, run: [python3, -c, "open(\'ran\', \'w\')"]}]')

    run = sandbox.run(job, "--run-dir", str(tmp_path / "run"), shell=shell)

    assert run.returncode == 3, run.stderr
    assert run.stderr.splitlines() == [
        f"obc: preflight: runtime.venv {venv} is nothing, not a venv"]
    assert not (tmp_path / "run").exists()


def test_a_folder_without_bin_python_is_not_a_venv(tmp_path, sandbox):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    job = native_job(tmp_path, f"{{kind: native, venv: {venv}}}", "[{name: a, run: [record]}]")

    run = sandbox.run(job, "--run-dir", str(tmp_path / "run"))

    assert run.returncode == 3, run.stderr
    assert run.stderr.splitlines() == [
        f"obc: preflight: runtime.venv {venv} is not a venv: it has no bin/python"]


@pytest.mark.parametrize("shell", ["dash", "posh", "zsh"])
def test_a_venv_whose_python_was_removed_fails_preflight_with_its_programs(
        tmp_path, sandbox, shell):
    venv = venv_without_its_python(tmp_path)
    script(venv / "bin" / "axolotl", f"#!{venv}/bin/python")
    job = native_job(tmp_path, f"{{kind: native, venv: {venv}}}", "[{name: a, run: [axolotl]}]")

    run = sandbox.run(job, "--run-dir", str(tmp_path / "run"), shell=shell)

    assert run.returncode == 3, run.stderr
    assert run.stderr.splitlines() == [
        f"obc: preflight: runtime.venv {venv}: its bin/python is a link owned by root (uid 0), "
        "to nothing: the Python it was made from is gone? make the venv again",
        f"obc: preflight: program axolotl ({venv}/bin/axolotl) is a script for "
        f"{venv}/bin/python, which is a link owned by root (uid 0), to nothing "
        "(#! in its first line)"]


@pytest.mark.parametrize("shell", SHELLS)
def test_a_script_whose_interpreter_is_missing_fails_preflight(tmp_path, sandbox, shell):
    tools = tmp_path / "tools"
    tools.mkdir()
    script(tools / "gone", "#!/opt/removed/python3 -u")
    script(tools / "by-name", "#!/usr/bin/env no-such-python")
    script(tools / "windows", "#!/bin/sh\r")
    script(tools / "fine", "#! /bin/sh")
    job = native_job(tmp_path, "{kind: native}", f"""[
  {{name: a, run: [{tools}/gone]}}, {{name: b, run: [by-name]}},
  {{name: c, run: [{tools}/windows]}}, {{name: d, run: [fine]}}, {{name: e, run: [\"true\"]}}]""")

    run = sandbox.run(job, "--run-dir", str(tmp_path / "run"), shell=shell,
                      env=sandbox.env(PATH=f"{tools}:{sandbox.env()['PATH']}"))

    assert run.returncode == 3, run.stderr
    assert run.stderr.splitlines() == [
        f"obc: preflight: program {tools}/gone ({tools}/gone) is a script for "
        "/opt/removed/python3, which is nothing (#! in its first line)",
        f"obc: preflight: program by-name ({tools}/by-name) is a script for no-such-python "
        "(#!/usr/bin/env no-such-python), which is not found on the steps' PATH",
        f"obc: preflight: program {tools}/windows ({tools}/windows) is a script with Windows "
        "line ends (CR LF): the interpreter its #! line names ends in a carriage return"]
    assert not (tmp_path / "run").exists()


def test_a_script_found_by_env_in_the_venv_passes_preflight(tmp_path, sandbox, venv):
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "uses-venv").write_text("#!/usr/bin/env python\nopen('ran', 'w')\n")
    (tools / "uses-venv").chmod(0o755)
    job = native_job(tmp_path, f"{{kind: native, venv: {venv}}}",
                     f"[{{name: a, run: [{tools}/uses-venv]}}]")

    run = sandbox.run(job, "--run-dir", str(tmp_path / "run"),
                      env=sandbox.env(PATH="/usr/bin:/bin"))

    # python is the venv's alone: the system has python3 only.
    assert not Path("/usr/bin/python").exists()
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "run" / "ran").exists()


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder in /tmp that every user can enter: a job run as nobody cannot enter the
    test's tmp_path, which is root's."""
    base = Path(tempfile.mkdtemp(prefix="obc-preflight-", dir="/tmp"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base)


def run_as_nobody(job: Path, shell: str) -> subprocess.CompletedProcess:
    program, *options = SHELLS[shell]
    return subprocess.run([RUNUSER, "-u", "nobody", "--", shutil.which(program) or program,
                           *options, str(job)], capture_output=True, text=True, check=False,
                          env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, timeout=60)


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("shared", [False, True])
def test_a_run_dir_in_a_folder_the_user_cannot_write_fails_preflight(open_folder, shell,
                                                                     shared):
    roots = open_folder / "roots"
    roots.mkdir(mode=0o755)
    run_dir = roots / "runs" / "r1"
    job = native_job(open_folder, "{kind: native}", "[{name: a, run: [\"true\"]}]",
                     f"{{run_dir: {run_dir}, shared: {str(shared).lower()}}}")

    done = run_as_nobody(job, shell)

    assert done.returncode == 3, done.stderr
    assert done.stderr.splitlines() == [
        f"obc: preflight: the run dir {run_dir} cannot be created: {roots} is a directory "
        "owned by root (uid 0), mode 755, not a folder you can write into"]


@pytest.mark.parametrize("shell", ["dash", "yash", "mksh"])
def test_a_run_dir_and_cache_dir_the_user_cannot_write_fail_preflight_together(
        open_folder, shell):
    run_dir = open_folder / "run"
    run_dir.mkdir(mode=0o555)
    os.chown(run_dir, NOBODY, NOBODY)
    in_the_way = open_folder / "a-file"
    in_the_way.write_text("")
    os.chown(in_the_way, NOBODY, NOBODY)
    job = native_job(open_folder, "{kind: native}", "[{name: a, run: [\"true\"]}]",
                     f"{{run_dir: {run_dir}, cache_dir: {in_the_way}/hf, shared: true}}")

    done = run_as_nobody(job, shell)

    assert done.returncode == 3, done.stderr
    assert done.stderr.splitlines() == [
        f"obc: preflight: the run dir {run_dir} cannot be written by you: it is a directory "
        "owned by nobody (uid 65534), mode 555",
        f"obc: preflight: the cache dir {in_the_way}/hf cannot be created: {in_the_way} is a "
        "regular empty file owned by nobody (uid 65534), mode 644, not a folder you can write "
        "into"]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("which", ["run dir", "cache dir"])
def test_a_folder_whose_mkdir_fails_after_preflight_is_an_obc_failure(
        tmp_path, sandbox, shell, which):
    # A name longer than any filesystem takes: preflight sees a folder it can write into,
    # and only mkdir finds out.
    too_long = tmp_path / ("x" * 300) / "r"
    paths = {"run dir": f"{{run_dir: {too_long}}}",
             "cache dir": f"{{run_dir: {tmp_path}/run, cache_dir: {too_long}}}"}[which]
    job = native_job(tmp_path, "{kind: native}", "[{name: a, run: [record]}]", paths)

    run = sandbox.run(job, shell=shell)

    assert run.returncode == 3, run.stderr
    assert run.stderr.splitlines()[-1] == \
        f"obc: cannot create the {which} {too_long}: File name too long"
    assert not sandbox.records()  # the step never ran
