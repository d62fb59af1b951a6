"""The files a run file may read (compiler/sources.py): only regular files of its project,
links resolved, --allow-dir for a shared folder outside, and at most 1 MiB of them.

The hostile corpus (tests/compile/diagnostics/test_corpus_hostile.py) has each refusal at its exact
place; these tests cover what a single run file in a temporary folder cannot show: git work
trees, links to and from run files, the command line, and what is never read or printed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.core import project
from compiler.pipeline import pipeline
from compiler.pipeline.pipeline import compile_files
from compiler.read import sources
from compiler.read.load import display_name
from tests.compile.diagnostics.corpus import unblocked
from tests.compile.diagnostics.harness import run_obc

RUN = "version: 1\nid: {id}\nruntime: {{kind: native}}\nsteps: [{{name: a, run: [x]}}]\n"
CANARY = "SECRET_DEPLOY_KEY=abc123"


def run_file(path: Path, files: dict[str, str], job_id: str = "r") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = "".join(f"  {name}: '{source}'\n" for name, source in files.items())
    path.write_text(RUN.format(id=job_id) + ("files:\n" + lines if files else ""))
    return path


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git work tree (a .git folder is all obc looks for) as the working directory, with a
    shared config and a secret outside it."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "configs").mkdir()
    (root / "configs" / "c.txt").write_text("config\n")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "key").write_text(CANARY + "\n")
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "s.txt").write_text("shared\n")
    monkeypatch.chdir(root)
    return root


def embedded(script: str, name: str) -> str:
    """The body of the here-document that writes `name`."""
    start = script.index(f'obc_write_file {name} ')
    body = script[script.index("\n", start) + 1:]
    return body[: body.index("\nOBC_EOF")] + "\n"


def test_a_run_file_reads_anywhere_in_its_git_work_tree(repo):
    run_file(repo / "runs" / "r.yaml", {"c.txt": "../configs/c.txt"})

    (script,) = compile_files([Path("runs/r.yaml")]).scripts

    assert embedded(script.text, "c.txt") == "config\n"


def test_a_compile_looks_for_each_folder_s_work_tree_once(tmp_path, monkeypatch):
    # Ten thousand run files in one folder ask for its work tree some fifty thousand times.
    runs = [run_file(tmp_path / "repo" / "runs" / f"r{n}.yaml", {}, f"r{n}") for n in range(3)]
    (tmp_path / "repo" / ".git").mkdir()
    looked = []
    real = os.path.lexists
    monkeypatch.setattr(os.path, "lexists", lambda path: looked.append(path) or real(path))
    assert not compile_files(runs).diagnostics
    dot_gits = [path for path in looked if Path(path).name == ".git"]
    assert sorted(set(dot_gits)) == sorted(dot_gits)
    with project.one_tree():
        assert project.git_work_tree(tmp_path / "repo" / "runs") == tmp_path / "repo"
        (tmp_path / "repo" / ".git").rmdir()  # seen by the next compile, not this one
        assert project.git_work_tree(tmp_path / "repo" / "runs") == tmp_path / "repo"
    assert project.git_work_tree(tmp_path / "repo" / "runs") is None


def test_a_compile_resolves_each_folder_s_project_once(tmp_path, monkeypatch):
    # Its policy, its record in the cache and its embedded files each ask for a run file's
    # project: three resolves of one folder for each of ten thousand run files.
    runs = [run_file(tmp_path / "repo" / "runs" / f"r{n}.yaml", {}, f"r{n}") for n in range(3)]
    (tmp_path / "repo" / ".git").mkdir()
    resolved = []
    real = Path.resolve
    monkeypatch.setattr(Path, "resolve", lambda path, *a: resolved.append(path) or real(path, *a))
    assert not compile_files(runs, tmp_path / "out").diagnostics
    assert resolved.count(tmp_path / "repo") == 1


def test_a_compile_names_each_folder_once_not_each_run_file_in_it(tmp_path, monkeypatch):
    # A run file is named in diagnostics and in its script's header, each a relpath of its
    # absolute path: 10,000 run files in one folder made 40,000 of them for --check.
    def relpaths(count: int) -> int:
        for n in range(count):
            run_file(tmp_path / f"repo{count}" / "runs" / f"r{n}.yaml", {}, f"r{n}")
        (tmp_path / f"repo{count}" / ".git").mkdir()
        made = []
        real = os.path.relpath
        monkeypatch.setattr(os.path, "relpath", lambda *a: made.append(a) or real(*a))
        assert not compile_files([tmp_path / f"repo{count}" / "runs"],
                                 tmp_path / f"out{count}").diagnostics
        monkeypatch.setattr(os.path, "relpath", real)
        return len(made)

    assert relpaths(2) == relpaths(6)


@pytest.mark.parametrize("name", [
    "r.yaml", "./r.yaml", "x/../r.yaml", "../r.yaml", "../../../r.yaml", "/r.yaml", "/", "..",
    "\u00e9\u202e/r.yaml", os.fsdecode(b"\xff/r.yaml"), "sub dir/r.yaml", "../other/r.yaml"])
def test_a_name_made_from_its_folder_s_is_the_name_made_whole(tmp_path, monkeypatch, name):
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "here").mkdir()
    monkeypatch.chdir(tmp_path / "repo" / "here")
    path = Path(name)
    whole = project.shown(Path(os.path.relpath(path.absolute())))
    in_tree = project.shown(Path(os.path.relpath(
        path.absolute(), project.git_work_tree(path.parent) or Path.cwd())))
    for _ in range(2):
        with project.one_tree():
            assert [display_name(path), project.source_name(path)] * 2 == [whole, in_tree] * 2


def test_a_dot_git_file_marks_a_work_tree_too(tmp_path, monkeypatch):
    root = tmp_path / "worktree"
    run_file(root / "runs" / "r.yaml", {"c.txt": "../c.txt"})
    (root / ".git").write_text("gitdir: /elsewhere/.git/worktrees/x\n")
    (root / "c.txt").write_text("config\n")
    monkeypatch.chdir(root)

    assert not compile_files([Path("runs/r.yaml")]).diagnostics


def test_without_a_work_tree_the_project_is_the_run_files_folder(tmp_path, monkeypatch):
    run_file(tmp_path / "runs" / "r.yaml", {"c.txt": "../c.txt"})
    (tmp_path / "c.txt").write_text("config\n")
    monkeypatch.chdir(tmp_path)

    (problem,) = compile_files([Path("runs/r.yaml")]).diagnostics

    assert problem.text().startswith("runs/r.yaml:6:10: error: files[\"c.txt\"]: file "
                                     "'../c.txt': is outside the project")


def test_a_link_that_stays_in_the_project_is_followed(repo):
    (repo / "runs").mkdir()
    (repo / "runs" / "c.txt").symlink_to("../configs/c.txt")
    run_file(repo / "runs" / "r.yaml", {"c.txt": "c.txt"})

    (script,) = compile_files([Path("runs/r.yaml")]).scripts

    assert embedded(script.text, "c.txt") == "config\n"


@pytest.mark.parametrize("source", ["../home/key", "{tmp}/home/key", "link", "dir/key"])
def test_a_secret_outside_never_reaches_a_check_diff_in_ci(repo, tmp_path, source):
    """The attack of issue 10: a pull request names a file outside the checkout, and CI runs
    `compile --check --diff --format github`, whose output is the public job log."""
    (repo / "link").symlink_to(tmp_path / "home" / "key")
    (repo / "dir").symlink_to(tmp_path / "home")
    run_file(repo / "leak.yaml", {"deploykey": source.format(tmp=tmp_path)})

    outcome = run_obc("compile", "leak.yaml", "-o", "out", "--check", "--diff",
                      "--format", "github")

    assert outcome.code == 1
    assert "outside the project" in outcome.stdout
    assert CANARY not in outcome.stdout + outcome.stderr
    assert not Path("out").exists()


def test_allow_dir_lets_run_files_read_a_shared_folder(repo, tmp_path):
    run_file(repo / "r.yaml", {"s.txt": f"{tmp_path}/shared/s.txt"})

    refused = run_obc("validate", "r.yaml")
    allowed = run_obc("validate", "--allow-dir", str(tmp_path / "shared"), "r.yaml")
    compiled = run_obc("compile", "--allow-dir", "../shared", "r.yaml", "-o", "out")

    assert refused.code == 1 and "obc --allow-dir DIR" in refused.stderr
    assert (allowed.code, allowed.stderr) == (0, "")
    assert compiled.code == 0
    assert "\nshared\nOBC_EOF" in Path("out/r/job.sh").read_text()


def test_allow_dir_allows_that_folder_only(repo, tmp_path):
    run_file(repo / "r.yaml", {"key": f"{tmp_path}/home/key"})

    outcome = run_obc("validate", "--allow-dir", str(tmp_path / "shared"), "r.yaml")

    assert outcome.code == 1 and "outside the project" in outcome.stderr


def test_allow_dir_must_name_a_folder(repo):
    outcome = run_obc("validate", "--allow-dir", "configs/c.txt", "configs")

    assert (outcome.code, outcome.stderr) == (
        2, "obc: error: --allow-dir configs/c.txt: not a folder\n")


@pytest.mark.parametrize("named", ["runs/evil.yaml", "runs"])
def test_a_run_file_that_links_out_of_its_project_is_not_read(repo, tmp_path, named):
    outside = run_file(tmp_path / "home" / "theirs.yaml", {}, job_id="theirs")
    outside.write_text(outside.read_text() + f"description: {CANARY}\n")
    (repo / "runs").mkdir()
    (repo / "runs" / "evil.yaml").symlink_to(outside)

    outcome = run_obc("validate", "--format", "json", named)

    assert outcome.code == 1
    (problem,) = outcome.diagnostics()
    assert (problem["file"], problem["line"], problem["message"]) == (
        "runs/evil.yaml", 1, "this run file is a symbolic link to a file outside the project")
    assert CANARY not in outcome.stdout


def test_a_run_file_may_link_to_another_in_its_project(repo):
    run_file(repo / "runs" / "real.yaml", {})
    (repo / "runs" / "alias.yaml").symlink_to("real.yaml")

    assert run_obc("validate", "runs/alias.yaml").code == 0


def test_a_named_pipe_given_as_a_run_file_is_refused_without_blocking(repo):
    os.mkfifo("pipe.yaml")

    with unblocked():
        outcome = run_obc("validate", "--format", "json", "pipe.yaml")

    assert outcome.code == 1
    (problem,) = outcome.diagnostics()
    assert problem["message"] == "this run file is a named pipe (FIFO), not a regular file"


def test_past_the_budget_nothing_more_is_read(repo):
    """Issue 10's 3 KB run file that names one 1 MiB file fifty times: one error, at the
    second name, and the other 48 are never looked at (none of them exists)."""
    Path("big.txt").write_text(("a" * 99 + "\n") * 10485)
    names = {"f0": "big.txt", "f1": "big.txt", **{f"f{i}": f"missing{i}" for i in range(2, 50)}}
    run_file(repo / "r.yaml", names)

    outcome = run_obc("compile", "--format", "json", "r.yaml", "-o", "out")

    (problem,) = outcome.diagnostics()
    assert (problem["line"], problem["field"]) == (7, "files.f1")
    assert "after 1,048,500 bytes of other files" in problem["message"]


def test_fifty_times_one_mib_fails_with_little_memory(repo):
    Path("big.txt").write_text(("a" * 99 + "\n") * 10485)
    run_file(repo / "r.yaml", {f"f{i}": "big.txt" for i in range(50)})
    # A fresh Python runs obc and reports the peak memory of obc and what obc started.
    measure = ("import resource, subprocess, sys\n"
               "result = subprocess.run([sys.executable, '-m', 'compiler', 'compile', 'r.yaml',"
               " '-o', 'out'], capture_output=True, text=True)\n"
               "print(result.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
               "print(result.stderr)")

    result = subprocess.run([sys.executable, "-c", measure], capture_output=True, text=True,
                            timeout=300, check=True)

    code, peak_kib = map(int, result.stdout.split("\n", 1)[0].split())
    assert code == 1 and "a run file embeds at most 1,048,576 bytes" in result.stdout
    # Before the budget, obc and its shellcheck took 5 GB for this; obc itself is ~60 MB.
    assert peak_kib < 150 * 1024


def test_a_script_over_the_limit_is_not_given_to_shellcheck(repo, monkeypatch):
    Path("a.txt").write_text("a" * 1_040_000)
    Path("r.yaml").write_text(RUN.format(id="r") + f"description: {'d' * 1_040_000}\n"
                              "files: {a.txt: a.txt}\n")
    checked = []
    monkeypatch.setattr(pipeline, "check_scripts",
                        lambda scripts, store: checked.append(scripts) or [])

    (problem,) = compile_files([Path("r.yaml")], out=Path("out")).diagnostics

    assert problem.message.startswith("the job.sh of this run file would be 2,1")
    assert checked == []


def test_a_file_swapped_after_the_check_is_not_read(repo, monkeypatch):
    """Between the check and the open another file takes the name (a race on a shared
    folder): what is opened must be the file that was checked."""
    Path("c.txt").write_text("checked\n")
    Path("other.txt").write_text(CANARY + "\n")
    checked = sources.check_regular(Path("c.txt").resolve())
    Path("other.txt").replace("c.txt")
    monkeypatch.setattr(sources, "check_regular", lambda resolved: checked)
    run_file(repo / "r.yaml", {"c.txt": "c.txt"})

    (problem,) = compile_files([Path("r.yaml")]).diagnostics

    assert problem.message == "file 'c.txt': changed while obc was reading it"
