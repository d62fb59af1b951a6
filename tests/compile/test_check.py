"""`obc compile --check`: writes nothing, names every file out of date, ends with the command
that fixes it, exits 1 on drift and 0 when OUT is exact; --diff, --format github and json."""

from __future__ import annotations

import json
import shlex

import pytest

from tests.compile.test_write import IDS, tree

FIX = "obc compile examples -o out"


@pytest.fixture
def drifted(project, obc):
    """A compiled out/ with one edited, one missing, one stale and one chmod-ed script."""
    assert obc("compile", "examples", "-o", "out").code == 0
    out = project / "out"
    edited = out / "docker-qlora" / "job.sh"
    edited.write_bytes(edited.read_bytes().replace(b"set -u\n", b"set -u\n# tweak\n"))
    (out / "native-venv" / "job.sh").unlink()
    (project / "examples" / "steps-eval.yaml").rename(project / "steps-eval.yaml")
    (out / "inline-config" / "job.sh").chmod(0o644)
    (out / "README.md").write_text("# ours\n")
    return project


def test_check_passes_on_exact_output_and_writes_nothing(project, obc):
    assert obc("compile", "examples", "-o", "out").code == 0
    before = tree(project)
    outcome = obc("compile", "examples", "-o", "out", "--check")
    assert (outcome.code, outcome.stdout) == (0, "")
    assert outcome.stderr == f"obc: out is up to date ({len(IDS)} file(s))\n"
    assert tree(project) == before


def test_check_lists_every_drifted_file_and_ends_with_the_fix(drifted, obc):
    before = tree(drifted)
    outcome = obc("compile", "examples", "-o", "out", "--check")
    tweaked = (drifted / "out/docker-qlora/job.sh").read_text().splitlines().index("# tweak")
    assert outcome.code == 1
    assert outcome.stdout == ""
    assert outcome.stderr.splitlines() == [
        f"out/docker-qlora/job.sh:{tweaked + 1}:1: error: differs from what compile would write",
        "out/inline-config/job.sh:1:1: error: has mode 0644; compile would make it 0755",
        "out/native-venv/job.sh:1:1: error: missing; compile would write it",
        "out/steps-eval/job.sh:1:1: error: stale: its run file examples/steps-eval.yaml is "
        "gone; compile would remove it",
        f"obc: 4 of {len(IDS)} file(s) in out out of date; to fix, run: {FIX}",
    ]
    assert tree(drifted) == before


def test_the_printed_command_fixes_the_drift(drifted, obc):
    fix = obc("compile", "examples", "-o", "out", "--check").stderr.splitlines()[-1]
    argv = shlex.split(fix.partition("to fix, run: ")[2])
    assert argv[0] == "obc"
    assert obc(*argv[1:]).code == 0
    assert obc("compile", "examples", "-o", "out", "--check").code == 0
    assert (drifted / "out" / "README.md").read_text() == "# ours\n"


def test_check_without_output_folder_reports_every_script_missing(project, obc):
    outcome = obc("compile", "examples", "-o", "out", "--check")
    assert outcome.code == 1
    assert outcome.stderr.count("missing; compile would write it") == len(IDS)
    assert not (project / "out").exists()


def test_diff_prints_unified_diffs_on_stdout(drifted, obc):
    outcome = obc("compile", "examples", "-o", "out", "--check", "--diff")
    assert outcome.code == 1
    diff = outcome.stdout
    assert "--- out/docker-qlora/job.sh\n+++ out/docker-qlora/job.sh\n" in diff
    assert "\n-# tweak\n" in diff
    assert "--- /dev/null\n+++ out/native-venv/job.sh\n" in diff
    assert "--- out/steps-eval/job.sh\n+++ /dev/null\n" in diff
    assert "inline-config" not in diff  # same text, only the mode differs


def test_diff_needs_check(project, obc, capsys):
    with pytest.raises(SystemExit) as stop:
        obc("compile", "examples", "-o", "out", "--diff")
    assert stop.value.code == 2
    assert "--diff works only with --check" in capsys.readouterr().err
    assert not (project / "out").exists()


def test_a_crlf_checkout_is_drift(project, obc):
    assert obc("compile", "examples", "-o", "out").code == 0
    script = project / "out" / IDS[0] / "job.sh"
    script.write_bytes(script.read_bytes().replace(b"\n", b"\r\n"))
    outcome = obc("compile", "examples", "-o", "out", "--check")
    assert outcome.code == 1
    assert f"out/{IDS[0]}/job.sh:1:1: error: differs from what compile would write" in (
        outcome.stderr)


def test_check_with_a_foreign_file_in_the_way_is_an_error(project, obc):
    foreign = project / "out" / IDS[0] / "job.sh"
    foreign.parent.mkdir(parents=True)
    foreign.write_text("#!/bin/sh\necho mine\n")
    outcome = obc("compile", "examples", "-o", "out", "--check")
    assert outcome.code == 2
    assert f"out/{IDS[0]}/job.sh: is not a file with obc's generated-file header" in (
        outcome.stderr)


def test_format_github_annotates_drift(drifted, obc):
    outcome = obc("compile", "examples", "-o", "out", "--check", "--format", "github")
    assert outcome.code == 1
    annotations = outcome.stdout.splitlines()
    assert len(annotations) == 4
    assert annotations[2] == (
        "::error file=out/native-venv/job.sh,line=1,col=1,title=obc::missing; compile would "
        f"write it%0Ahint: to fix, run: {FIX}")
    assert all(a.startswith("::error file=out/") for a in annotations)
    assert outcome.stderr.splitlines()[-1].endswith(f"to fix, run: {FIX}")


def test_format_github_annotates_invalid_run_files(project, obc):
    (project / "examples" / "steps-eval.yaml").write_text(
        "version: 1\nid: steps-eval\nruntime: {kind: dockr}\nsteps: [{name: a, run: [x]}]\n")
    outcome = obc("compile", "examples", "-o", "out", "--check", "--format", "github")
    assert outcome.code == 1
    assert outcome.stdout.startswith(
        "::error file=examples/steps-eval.yaml,line=3,col=17,title=obc::runtime.kind: ")
    assert "did you mean 'docker'" in outcome.stdout


def test_format_json_is_one_array_with_drift(drifted, obc):
    outcome = obc("compile", "examples", "-o", "out", "--check", "--format", "json")
    assert outcome.code == 1
    found = json.loads(outcome.stdout)
    assert [(d["file"], d["hint"]) for d in found] == [
        (f"out/{job_id}/job.sh", f"to fix, run: {FIX}")
        for job_id in ("docker-qlora", "inline-config", "native-venv", "steps-eval")]


def test_format_json_with_diff_keeps_stdout_json(drifted, obc):
    outcome = obc("compile", "examples", "-o", "out", "--check", "--diff", "--format", "json")
    assert len(json.loads(outcome.stdout)) == 4
    assert "--- /dev/null\n+++ out/native-venv/job.sh\n" in outcome.stderr


def test_one_byte_inside_a_library_part_of_one_of_many_scripts_is_drift(tmp_path, obc,
                                                                         monkeypatch):
    # --check reads the scripts of unchanged run files back from their records, which keep
    # the library by name: a byte edited in the library, in one script of a few hundred,
    # must still be found where it stands.
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    runs.mkdir()
    for n in range(300):
        (runs / f"r{n}.yaml").write_text(f"version: 1\nid: r{n}\nruntime: {{kind: native}}\n"
                                         f"steps: [{{name: a, run: [echo, '{n}']}}]\n")
    assert obc("compile", "runs", "-o", "out").code == 0
    script = tmp_path / "out" / "r137" / "job.sh"
    data = bytearray(script.read_bytes())
    at = data.index(b"\nobc_main() {") + 5  # inside the library's part main
    data[at] ^= 1
    script.write_bytes(bytes(data))
    outcome = obc("compile", "runs", "-o", "out", "--check")
    line = data[:at].count(b"\n") + 1
    assert outcome.code == 1
    assert outcome.stderr.splitlines()[:-1] == [
        f"out/r137/job.sh:{line}:1: error: differs from what compile would write"]
