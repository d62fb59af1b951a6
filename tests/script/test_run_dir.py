"""A run dir that others can write cannot turn the job against its user: the job refuses a
run dir (or a folder to create it in) that another user could change, unless the run file
shares it with a team, and even then never writes through a link it did not make. One run
at a time takes a run dir; a lock left by a run that has ended is taken over."""

from __future__ import annotations

import fcntl
import json
import os

import pytest

from tests.conftest import compile_text, write_script

PLUGIN = "\"\"\"a plugin\"\"\"\n"
OTHER_USER = 65534


def job(tmp_path, shared: bool = False) -> str:
    (tmp_path / "plugin.py").write_text(PLUGIN)
    return compile_text(tmp_path, f"""\
version: 1
id: rd
runtime: {{kind: native}}
paths: {{shared: {str(shared).lower()}}}
trainer: {{axolotl: {{config: {{base_model: x}}}}}}
files: {{plugins/metrics.py: plugin.py}}
""")


def run_in(sandbox, tmp_path, run_dir, *args: str, shared: bool = False):
    return sandbox.run(write_script(tmp_path, job(tmp_path, shared)), "--run-dir", str(run_dir),
                       *args)


@pytest.mark.parametrize(("mode", "owner", "refused"), [
    (0o755, None, False),
    (0o700, None, False),
    (0o1777, None, False),       # sticky, as /tmp: others cannot touch what the job makes
    (0o775, None, True),         # group-writable
    (0o757, None, True),         # writable by others
    (0o755, OTHER_USER, True),   # another user's
])
def test_a_run_dir_another_user_could_change_is_refused(sandbox, tmp_path, mode, owner,
                                                        refused):
    run_dir = tmp_path / "team" / "run"
    run_dir.mkdir(parents=True)
    run_dir.chmod(mode)
    if owner:
        os.chown(run_dir, owner, owner)
    run = run_in(sandbox, tmp_path, run_dir)
    if refused:
        assert run.returncode == 3
        owner = "nobody (uid 65534)" if owner else "root (uid 0)"
        assert f"obc: preflight: the run dir {run_dir} is not a folder of yours that only " \
               f"you can write (a directory owned by {owner}, mode {mode:o}; paths.shared " \
               "allows a team's folder)" in run.stderr
        assert run.steps == [] and sorted(p.name for p in run_dir.iterdir()) == []
        assert run_in(sandbox, tmp_path, run_dir, shared=True).returncode == 0
    else:
        assert run.returncode == 0, run.stderr


@pytest.mark.parametrize(("mode", "refused"), [(0o775, True), (0o1777, False), (0o755, False)])
def test_a_folder_the_run_dir_is_created_in_must_be_safe_too(sandbox, tmp_path, mode,
                                                             refused):
    parent = tmp_path / "shared"
    parent.mkdir()
    parent.chmod(mode)
    run = run_in(sandbox, tmp_path, parent / "new" / "run")
    assert (run.returncode == 3) == refused, run.stderr
    if refused:
        assert f"the run dir would be created in {parent}, which another user can change" \
            in run.stderr
        assert not (parent / "new").exists()


def test_in_a_shared_folder_the_job_writes_through_no_link_it_did_not_make(sandbox,
                                                                          tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / ".bashrc").write_text("mine\n")
    run_dir = tmp_path / "team"
    run_dir.mkdir()
    run_dir.chmod(0o777)
    # What another member of the team planted: the config's name linked to the victim's
    # file, and the plugin's folder to a folder of theirs.
    (run_dir / "axolotl.yaml").symlink_to(victim / ".bashrc")
    run = run_in(sandbox, tmp_path, run_dir, shared=True)
    assert run.returncode == 0, run.stderr
    assert (victim / ".bashrc").read_text() == "mine\n"
    assert not (run_dir / "axolotl.yaml").is_symlink()  # replaced, not followed
    (run_dir / "plugins" / "metrics.py").unlink()
    (run_dir / "plugins").rmdir()
    (run_dir / "plugins").symlink_to(victim)
    # (--from train: train finished for these inputs, and a rerun would have nothing to do.)
    run = run_in(sandbox, tmp_path, run_dir, "--from", "train", shared=True)
    assert run.returncode == 1
    assert "cannot create the folder plugins in the run dir: something else is in the way" \
        in run.stderr
    assert sorted(p.name for p in victim.iterdir()) == [".bashrc"]


def test_records_in_a_link_planted_as_obc_are_refused(sandbox, tmp_path):
    run_dir = tmp_path / "team"
    run_dir.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run_dir / ".obc").symlink_to(elsewhere)
    run = run_in(sandbox, tmp_path, run_dir, shared=True)
    assert run.returncode == 3
    assert f"{run_dir}/.obc is not a folder of yours that only you can write" in run.stderr
    assert list(elsewhere.iterdir()) == []


def test_a_folder_where_a_file_must_go_fails_the_job_rather_than_swallow_the_file(
        sandbox, tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "axolotl.yaml").mkdir(parents=True)
    run = run_in(sandbox, tmp_path, run_dir)
    assert run.returncode == 1
    assert "obc: cannot write axolotl.yaml in the run dir" in run.stderr
    assert list((run_dir / "axolotl.yaml").iterdir()) == []


def leave_lock(run_dir, owner: str):
    """A lock as a run that was killed leaves it: its owner line and its file `held`."""
    lock = run_dir / ".obc" / "lock"
    lock.mkdir(parents=True)
    (run_dir / ".obc").chmod(0o755)
    (lock / "owner").write_text(owner)
    (lock / "held").touch()
    return lock


def test_a_lock_left_by_a_run_that_has_ended_is_taken_over(sandbox, tmp_path):
    run_dir = tmp_path / "run"
    host = os.uname().nodename
    lock = leave_lock(run_dir, f"{host} {os.getpid()} \n")  # nothing holds it: it has ended
    run = run_in(sandbox, tmp_path, run_dir)
    assert run.returncode == 0, run.stderr
    assert not lock.exists()
    # One whose file a process still holds is not, whatever its pid: that process is what
    # the run started (a job.sh killed with KILL leaves its step running).
    leave_lock(run_dir, f"{host} 999999999 \n")
    with open(lock / "held") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        run = run_in(sandbox, tmp_path, run_dir)
    assert run.returncode == 4
    assert f"is in use by another run of this job, or by what it started (host, pid, Slurm " \
           f"job, restart: {host} 999999999 ); if nothing of it runs any more, remove {lock}" \
           in run.stderr
    assert json.loads((run_dir / ".obc/status.json").read_text())["attempt"] == 1
    # Nor is a lock of another machine's run, unless it is this Slurm job, requeued since.
    (lock / "owner").write_text("elsewhere 1 17 0\n")
    assert run_in(sandbox, tmp_path, run_dir).returncode == 4
    run = sandbox.run(write_script(tmp_path, job(tmp_path)), "--run-dir", str(run_dir),
                      env=sandbox.env(SLURM_JOB_ID="17", SLURM_RESTART_COUNT="1"))
    assert run.returncode == 0, run.stderr
    assert not lock.exists()


@pytest.mark.parametrize(("restarts", "ended"), [("0", True), ("1", False)])
def test_a_lock_from_another_node_is_taken_over_only_by_this_slurm_job_requeued(
        sandbox, tmp_path, restarts, ended):
    # Slurm names the node (SLURMD_NODENAME), and counts the job's restarts: a copy of the
    # same attempt on another node (`srun -n2 job.sh`) keeps out (tests/slurm/test_slurm_nodes.py).
    run_dir = tmp_path / "run"
    leave_lock(run_dir, f"n1 4242 77 {restarts}\n")
    run = sandbox.run(write_script(tmp_path, job(tmp_path)), "--run-dir", str(run_dir),
                      env=sandbox.env(SLURM_JOB_ID="77", SLURMD_NODENAME="n2",
                                      SLURM_RESTART_COUNT="1"))
    assert run.returncode == (0 if ended else 4), run.stderr
    if not ended:
        assert "(host, pid, Slurm job, restart: n1 4242 77 1)" in run.stderr


def test_a_run_dir_that_is_another_users_link_is_refused(sandbox, tmp_path):
    # In a folder such as /tmp, another user names the run dir before the job does, as a
    # link to a folder of the user's: the job would write there.
    mine = tmp_path / "mine"
    mine.mkdir()
    sticky = tmp_path / "scratch"
    sticky.mkdir()
    sticky.chmod(0o1777)
    run_dir = sticky / "run"
    run_dir.symlink_to(mine)
    os.lchown(run_dir, OTHER_USER, OTHER_USER)
    run = run_in(sandbox, tmp_path, run_dir)
    assert run.returncode == 3, run.stderr
    assert f"the run dir {run_dir} is not a folder of yours that only you can write (a link " \
           "owned by nobody (uid 65534), to a directory owned by root (uid 0), mode 755" \
        in run.stderr
    assert list(mine.iterdir()) == []
    os.lchown(run_dir, 0, 0)  # the user's own link leads where they chose
    assert run_in(sandbox, tmp_path, run_dir).returncode == 0
