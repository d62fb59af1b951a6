"""Nothing a job reads or writes where it runs is taken from, or written through, another
user: its env file and venv must be the user's or root's and unchangeable by others, an
output_dir outside the run dir is checked as the run dir is, and the checkpoint trigger
file is created new, never through a link (docs/security.md). Another user is uid 65534
(nobody): the tests run as root and hand files to it with chown."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from compiler.pipeline.pipeline import compile_files
from tests.conftest import SHELLS, compile_text, install_stub, start_script, write_script
from tests.support.engines import wait_until

NOBODY = 65534
# A stand-in trainer that says it started and then trains until it is stopped.
SLEEPER = "#!/bin/sh\necho started\nexec sleep 120\n"


def give_away(*paths: Path) -> None:
    """Make each path (a link itself, not what it leads to) another user's."""
    for path in paths:
        os.lchown(path, NOBODY, NOBODY)


def shared_folder(tmp_path: Path, name: str = "shared") -> Path:
    """A folder every user can write, as /tmp: the sticky bit keeps each one's names."""
    folder = tmp_path / name
    folder.mkdir()
    folder.chmod(0o1777)
    return folder


def trainer_job(run_dir: Path, output_dir: str = "output", shared: bool = True) -> str:
    return f"""\
version: 1
id: shr
runtime: {{kind: native, stop_timeout: 3}}
paths: {{run_dir: {run_dir}, shared: {str(shared).lower()}}}
trainer: {{axolotl: {{config: {{output_dir: {output_dir}}}}}}}
checkpoint: {{grace: 3}}
"""


def stop_while_training(sandbox, tmp_path: Path, text: str, run_dir: Path,
                        shell: str = "dash", checkpointer: bool = False) -> tuple[int, str]:
    """Run the job, TERM it once train has said something (or let it end if it never
    starts); return its exit code and stderr. The trainer sleeps, or with `checkpointer`
    checkpoints as Axolotl does (stubs/checkpointer.py), a step every half second."""
    env = sandbox.env(OBC_STUB_STEP_SECONDS="0.5")
    if checkpointer:
        install_stub(sandbox.bin / "axolotl", "checkpointer")
    else:
        (sandbox.bin / "axolotl").write_text(SLEEPER)
    script = write_script(tmp_path, compile_text(tmp_path, text))
    job = start_script(script, shell=shell, env=env)
    log = run_dir / ".obc/logs/train.1.log"
    try:
        wait_until(lambda: job.poll() is not None or (log.exists() and log.stat().st_size),
                   "train to start")
        if job.poll() is None:
            job.send_signal(signal.SIGTERM)
        _, stderr = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.communicate()
    return job.returncode, stderr


def planted_output(team: Path) -> Path:
    """What another member of the team made: the run dir, and Axolotl's output_dir in it."""
    output = team / "shr" / "output"
    output.mkdir(parents=True)
    for folder in (output.parent, output):
        folder.chmod(0o777)
        give_away(folder)
    return output


# Another user's link where the trigger goes, in every shell.
@pytest.mark.parametrize("shell", SHELLS)
def test_the_checkpoint_trigger_is_not_written_through_another_users_link(
        sandbox, tmp_path, shell):
    victim = tmp_path / "victim.txt"
    victim.write_text("the victim's work\n")
    team = shared_folder(tmp_path)
    output = planted_output(team)
    (output / "axolotl_checkpoint.save").symlink_to(victim)
    give_away(output / "axolotl_checkpoint.save")

    code, stderr = stop_while_training(sandbox, tmp_path, trainer_job(team / "shr"),
                                       team / "shr", shell=shell)

    assert code == 143, stderr
    assert victim.read_text() == "the victim's work\n"
    assert f"obc: cannot ask Axolotl for a checkpoint: {output}/axolotl_checkpoint.save " \
           "is there already" in stderr
    assert (output / "axolotl_checkpoint.save").is_symlink()  # theirs, left alone


# Links to what is not a regular file: every shell's noclobber (`set -C`) opens a link to a
# pipe (and waits for a reader: the stop would never end) or a device, and yash's loops for
# ever on a dangling link; the old `: >` created a dangling link's target.
@pytest.mark.parametrize("target", ["pipe", "missing", "folder"])
@pytest.mark.parametrize("shell", ["dash", "yash"])
def test_the_trigger_goes_through_no_link_to_a_pipe_a_new_file_or_a_folder(
        sandbox, tmp_path, target, shell):
    team = shared_folder(tmp_path)
    output = planted_output(team)
    victim = tmp_path / "victim"
    victim.mkdir()
    aim = victim / target
    if target == "pipe":
        os.mkfifo(aim)
    elif target == "folder":
        aim.mkdir()
    (output / "axolotl_checkpoint.save").symlink_to(aim)
    give_away(output / "axolotl_checkpoint.save")

    code, stderr = stop_while_training(sandbox, tmp_path, trainer_job(team / "shr"),
                                       team / "shr", shell=shell)

    assert code == 143, stderr
    assert "is there already" in stderr
    assert sorted(p.name for p in victim.iterdir()) == ([] if target == "missing" else [target])
    if target == "folder":
        assert list(aim.iterdir()) == []


def test_the_trigger_is_still_made_when_nothing_is_in_the_way(sandbox, tmp_path):
    team = shared_folder(tmp_path)
    output = planted_output(team)
    code, stderr = stop_while_training(sandbox, tmp_path, trainer_job(team / "shr"),
                                       team / "shr", checkpointer=True)
    assert code == 143, stderr
    (saved,) = [p.name for p in output.iterdir()]  # no trigger left, nor anything of obc's
    assert f"obc: {saved} saved" in stderr


def test_an_output_dir_outside_the_run_dir_is_checked_as_the_run_dir_is(sandbox, tmp_path):
    theirs = tmp_path / "elsewhere"
    theirs.mkdir()
    theirs.chmod(0o777)
    give_away(theirs)
    run_dir = tmp_path / "run"
    text = trainer_job(run_dir, output_dir=str(theirs / "out"), shared=False)

    code, stderr = stop_while_training(sandbox, tmp_path, text, run_dir)

    assert code == 3, stderr
    assert f"obc: preflight: Axolotl's output_dir would be created in {theirs}, which another " \
           "user can change (a directory owned by nobody (uid 65534), mode 777; " \
           "paths.shared allows a team's folder)" in stderr
    assert not run_dir.exists() and list(theirs.iterdir()) == []
    # When it exists it must be the user's own, as the run dir must.
    (theirs / "out").mkdir()
    give_away(theirs / "out")
    code, stderr = stop_while_training(sandbox, tmp_path, text, run_dir)
    assert code == 3
    assert f"obc: preflight: Axolotl's output_dir {theirs}/out is not a folder of yours " \
           "that only you can write (a directory owned by nobody (uid 65534), mode 755; " \
           "paths.shared allows a team's folder)" in stderr
    # paths.shared allows it.
    shared = trainer_job(run_dir, output_dir=str(theirs / "out"), shared=True)
    assert stop_while_training(sandbox, tmp_path, shared, run_dir)[0] == 143


def test_a_mounted_output_dir_is_checked_on_the_machine(sandbox, tmp_path):
    # In a container, output_dir /data/out is the mount's source on the machine.
    theirs = tmp_path / "data"
    theirs.mkdir()
    give_away(theirs)
    (tmp_path / "run.yaml").write_text(f"""\
version: 1
id: mounted
runtime:
  kind: docker
  image: busybox@sha256:{"0" * 64}
  mounts: [{{source: {theirs}, target: /data}}]
paths: {{run_dir: {tmp_path / "run"}}}
trainer: {{axolotl: {{config: {{output_dir: /data/out}}}}}}
""")
    result = compile_files([tmp_path / "run.yaml"], out=tmp_path / "out")
    (script,) = result.scripts

    run = sandbox.run(write_script(tmp_path, script.text))

    assert run.returncode == 3, run.stderr
    assert f"obc: preflight: Axolotl's output_dir would be created in {theirs}, which another " \
           "user can change (a directory owned by nobody (uid 65534), mode 755" in run.stderr
    assert run.engine_runs == []


@pytest.mark.parametrize("planted", ["run dir", "output_dir"])
def test_in_a_shared_folder_another_users_link_is_not_taken_for_a_folder(sandbox, tmp_path,
                                                                          planted):
    # paths.shared lets the run dir and output_dir be a team member's folders, but not their
    # links: the job and its trainer would write where they chose, into a folder of the user's.
    mine = tmp_path / "mine"
    mine.mkdir()
    team = shared_folder(tmp_path)
    if planted == "run dir":
        link = team / "shr"
    else:
        (team / "shr").mkdir(mode=0o777)
        give_away(team / "shr")
        link = team / "shr" / "output"
    link.symlink_to(mine)
    give_away(link)
    what = "the run dir" if planted == "run dir" else "Axolotl's output_dir"

    code, stderr = stop_while_training(sandbox, tmp_path, trainer_job(team / "shr"),
                                       team / "shr")

    assert code == 3, stderr
    assert f"obc: preflight: {what} {link} is a link owned by nobody (uid 65534), to a " \
           "directory owned by root (uid 0), mode 755: the job follows no other user's link" \
        in stderr
    assert list(mine.iterdir()) == []


@pytest.mark.parametrize("output_dir", ["../elsewhere", "out/../../x", ".."])
def test_a_relative_output_dir_that_leaves_the_run_dir_is_refused(tmp_path, output_dir):
    (tmp_path / "run.yaml").write_text(trainer_job(tmp_path / "run", output_dir, False))
    result = compile_files([tmp_path / "run.yaml"], out=tmp_path / "out")
    assert [(d.field, d.message) for d in result.diagnostics] == [(
        "trainer.axolotl.config.output_dir",
        f"'{output_dir}' leaves the run dir, and no check covers where it leads")]


ENV_JOB = """\
version: 1
id: envf
runtime: {{kind: native, env_file: {env_file}{venv}}}
paths: {{shared: {shared}}}
steps: [{{name: s, run: [{program}, -c, 'print("ran")']}}]
"""


def env_job(env_file: Path, venv: Path | None = None, shared: bool = False,
            program: str = "python3") -> str:
    return ENV_JOB.format(env_file=env_file, venv=f", venv: {venv}" if venv else "",
                          shared=str(shared).lower(), program=program)


def sourced_marker(tmp_path: Path) -> tuple[Path, str]:
    marker = tmp_path / "sourced"
    return marker, f"touch {marker}\n"


# An env file another user owns, which anyone can write.
@pytest.mark.parametrize("shell", SHELLS)
def test_an_env_file_of_another_user_is_not_sourced(sandbox, tmp_path, shell):
    marker, line = sourced_marker(tmp_path)
    folder = tmp_path / "x"
    folder.mkdir()
    env_file = folder / "job.env"
    env_file.write_text(line)
    env_file.chmod(0o666)
    give_away(env_file)

    run = sandbox.run(write_script(tmp_path, compile_text(tmp_path, env_job(env_file))),
                      shell=shell)

    assert run.returncode == 3, run.stderr
    assert f"obc: preflight: runtime.env_file: {env_file} is a regular file owned by nobody " \
           "(uid 65534), mode 666: another user could change what the job runs " \
           "(paths.shared allows a team's)" in run.stderr
    assert not marker.exists()
    shared = env_job(env_file, shared=True)
    run = sandbox.run(write_script(tmp_path, compile_text(tmp_path, shared)), shell=shell)
    assert run.returncode == 0, run.stderr
    assert marker.exists()


@pytest.mark.parametrize("case", ["open-folder", "their-link"])
def test_an_env_file_another_user_could_swap_is_not_sourced(sandbox, tmp_path, case):
    marker, line = sourced_marker(tmp_path)
    mine = tmp_path / "mine.env"
    mine.write_text(line)
    if case == "open-folder":  # the user's own file, in a folder anyone can rename it in
        folder = tmp_path / "open"
        folder.mkdir()
        folder.chmod(0o777)
        env_file = folder / "job.env"
        mine.rename(env_file)
        culprit = f"{folder} is a directory owned by root (uid 0), mode 777"
    else:  # a link of another user's, in a sticky folder, to a file the user owns
        env_file = shared_folder(tmp_path) / "job.env"
        env_file.symlink_to(mine)
        give_away(env_file)
        culprit = f"{env_file} is a link owned by nobody (uid 65534), to a regular file " \
                  "owned by root (uid 0), mode 644"

    run = sandbox.run(write_script(tmp_path, compile_text(tmp_path, env_job(env_file))))

    assert run.returncode == 3, run.stderr
    assert f"obc: preflight: runtime.env_file: {culprit}: another user could change what " \
           "the job runs" in run.stderr
    assert not marker.exists()


def make_venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path


# F6 again: a venv whose interpreter another user put there.
@pytest.mark.parametrize("shell", SHELLS)
def test_a_venv_with_another_users_python_is_not_run(sandbox, tmp_path, shell):
    marker, line = sourced_marker(tmp_path)
    env_file = tmp_path / "job.env"
    env_file.write_text("\n")
    venv = make_venv(tmp_path / "x" / "venv")
    python = venv / "bin" / "python"
    python.unlink()
    python.write_text(f"#!/bin/sh\n{line}exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    give_away(python)

    text = env_job(env_file, venv=venv, program="python")
    run = sandbox.run(write_script(tmp_path, compile_text(tmp_path, text)), shell=shell)

    assert run.returncode == 3, run.stderr
    assert f"obc: preflight: runtime.venv: {python} is a regular file owned by nobody " \
           "(uid 65534), mode 755: another user could change what the job runs" in run.stderr
    assert not marker.exists()


@pytest.mark.parametrize("case", ["group-writable-program", "their-bin", "open-parent"])
def test_a_venv_another_user_could_change_is_refused(sandbox, tmp_path, case):
    env_file = tmp_path / "job.env"
    env_file.write_text("\n")
    venv = make_venv(tmp_path / "venvs" / "v")
    if case == "group-writable-program":  # a program Axolotl starts by name
        culprit = venv / "bin" / "accelerate"
        culprit.write_text("#!/bin/sh\n")
        culprit.chmod(0o775)
        shown = f"{culprit} is a regular file owned by root (uid 0), mode 775"
    elif case == "their-bin":
        culprit = venv / "bin"
        give_away(culprit)
        shown = f"{culprit} is a directory owned by nobody (uid 65534), mode 755"
    else:
        culprit = venv.parent
        culprit.chmod(0o777)
        shown = f"{culprit} is a directory owned by root (uid 0), mode 777"

    run = sandbox.run(write_script(tmp_path, compile_text(
        tmp_path, env_job(env_file, venv=venv, program="python"))))

    assert run.returncode == 3, run.stderr
    assert f"obc: preflight: runtime.venv: {shown}: another user could change what the " \
           "job runs" in run.stderr


def test_a_venv_and_env_file_of_the_users_own_or_roots_pass(sandbox, tmp_path, venv):
    env_file = tmp_path / "job.env"
    env_file.write_text("export FROM_ENV_FILE=1\n")
    run = sandbox.run(write_script(tmp_path, compile_text(
        tmp_path, env_job(env_file, venv=venv, program="python"))))
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize(("owner", "trusted"), [(0, True), (NOBODY, True), (4321, False)])
def test_for_a_user_who_is_not_root_their_own_and_roots_files_are_trusted(tmp_path, owner,
                                                                          trusted):
    # The job runs as nobody: everything it needs must be open to them, not under the
    # test's tmp_path, which only root can enter.
    base = Path(tempfile.mkdtemp(prefix="obc-other-users-", dir="/tmp"))
    try:
        base.chmod(0o755)
        (base / "marks").mkdir()
        os.chown(base / "marks", NOBODY, NOBODY)
        marker, line = sourced_marker(base / "marks")
        env_file = base / "job.env"
        env_file.write_text(line)
        env_file.chmod(0o644)
        os.chown(env_file, owner, owner)
        script = write_script(base, compile_text(tmp_path, env_job(env_file)))
        run_dir = base / "run"
        run_dir.mkdir()
        os.chown(run_dir, NOBODY, NOBODY)
        runuser = shutil.which("runuser", path="/usr/sbin:/sbin:/usr/bin:/bin") or "runuser"
        run = subprocess.run([runuser, "-u", "nobody", "--", "sh", str(script), "--run-dir",
                              str(run_dir)], capture_output=True, text=True, check=False,
                             env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, timeout=60)
        assert (run.returncode == 0) == trusted, run.stderr
        assert marker.exists() == trusted
        if not trusted:
            assert f"runtime.env_file: {env_file} is a regular file owned by UNKNOWN " \
                   "(uid 4321), mode 644" in run.stderr
    finally:
        shutil.rmtree(base)
