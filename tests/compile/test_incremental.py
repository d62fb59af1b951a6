"""The cache: an unchanged tree is checked without compiling it again, anything that changes
a script (its run file, a file it embeds, the script in OUT, obc, shellcheck) compiles it
again, a broken or shared cache changes no outcome, and shellcheck still sees every script
through its shape, or as written where the shape cannot stand for it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.check import shellcheck as check
from compiler.check.shellcheck import Finding, check_texts, find_shellcheck
from compiler.core import workers
from compiler.core.cache import Store
from compiler.pipeline import incremental, pipeline
from compiler.render.library import PART_ORDER, part_text
from compiler.render.render import render_job
from tests.conftest import PROJECT_RUNS, REPO

COMPILE = ("compile", "examples", "-o", "out")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A cache of this test's own."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("OBC_COMPILE_CACHE", str(folder))
    return folder


def built(monkeypatch) -> list[Path]:
    """Record which run files are compiled (not reused) from now on."""
    paths: list[Path] = []
    real = pipeline.build_jobs

    def recording(path: Path, *args):
        paths.append(path)
        return real(path, *args)

    monkeypatch.setattr(pipeline, "build_jobs", recording)
    return paths


@pytest.mark.slow
def test_an_unchanged_tree_is_checked_without_compiling(project, cache, obc, monkeypatch):
    assert obc(*COMPILE).code == 0
    compiled = built(monkeypatch)
    outcome = obc(*COMPILE, "--check")
    assert (outcome.code, compiled) == (0, [])
    assert outcome.stderr == f"obc: out is up to date ({len(PROJECT_RUNS)} file(s))\n"


def test_what_changes_a_script_compiles_it_again(project, cache, obc, monkeypatch):
    assert obc(*COMPILE).code == 0
    compiled = built(monkeypatch)
    config = project / "examples" / "configs" / "llama3-qlora.yaml"
    config.write_text(config.read_text() + "seed: 7\n")  # embedded by two of them
    outcome = obc(*COMPILE, "--check")
    assert outcome.code == 1
    assert sorted(path.stem for path in compiled) == ["docker-qlora", "native-venv"]
    assert "out/docker-qlora/job.sh:" in outcome.stderr
    assert obc(*COMPILE).code == 0
    assert "seed: 7" in (project / "out" / "docker-qlora" / "job.sh").read_text()


def test_another_obc_or_shellcheck_reuses_nothing(project, cache, obc, monkeypatch):
    assert obc(*COMPILE).code == 0
    compiled = built(monkeypatch)
    fingerprint = incremental.build_fingerprint
    monkeypatch.setattr(incremental, "build_fingerprint", lambda: "another obc")
    assert obc(*COMPILE, "--check").code == 0
    assert len(compiled) == len(PROJECT_RUNS)
    monkeypatch.setattr(incremental, "build_fingerprint", fingerprint)
    compiled.clear()
    shellcheck = find_shellcheck()
    monkeypatch.setattr(pipeline, "find_shellcheck",
                        lambda: type(shellcheck)(shellcheck.path, "another build"))
    assert obc(*COMPILE, "--check").code == 0
    assert len(compiled) == len(PROJECT_RUNS)


@pytest.mark.slow
def test_no_cache_reads_and_writes_nothing(project, cache, obc, monkeypatch):
    assert obc(*COMPILE, "--no-cache").code == 0
    assert not cache.exists()
    assert obc(*COMPILE).code == 0
    compiled = built(monkeypatch)
    assert obc(*COMPILE, "--check", "--no-cache").code == 0
    assert len(compiled) == len(PROJECT_RUNS)


def test_an_empty_cache_variable_turns_the_cache_off(project, obc, monkeypatch, tmp_path):
    monkeypatch.setenv("OBC_COMPILE_CACHE", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert obc(*COMPILE).code == 0
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "home").exists()


@pytest.mark.slow
def test_a_corrupt_cache_changes_no_outcome(project, cache, obc):
    assert obc(*COMPILE).code == 0
    expected = {p: p.read_bytes() for p in (project / "out").glob("*/job.sh")}
    records = [path for path in cache.rglob("*") if path.is_file()]
    assert records
    for number, path in enumerate(records):
        path.write_bytes([b"", b"{", b"[1, 2]", b'{"id": 3}', b"\x80\x81"][number % 5])
    assert obc(*COMPILE, "--check").code == 0
    for path in expected:
        path.unlink()
    assert obc(*COMPILE).code == 0
    assert {p: p.read_bytes() for p in (project / "out").glob("*/job.sh")} == expected


@pytest.mark.slow  # compiles in several processes
def test_concurrent_compiles_share_one_cache(project, cache):
    processes = [subprocess.Popen([sys.executable, "-m", "compiler", "compile", "examples",
                                   "-o", f"out{i}"], cwd=project, stderr=subprocess.PIPE)
                 for i in range(4)]
    assert [process.wait() for process in processes] == [0] * 4
    outputs = [{p.relative_to(project / f"out{i}"): p.read_bytes()
                for p in (project / f"out{i}").glob("*/job.sh")} for i in range(4)]
    assert all(output == outputs[0] for output in outputs)
    assert not [path for path in cache.rglob("*.tmp")]


def test_findings_are_kept_by_text(tmp_path, monkeypatch):
    store = Store(tmp_path, "findings")
    text = '#!/bin/sh\necho $1\n'
    (first,) = check_texts([text], store).values()
    assert [finding.code for finding in first] == [2086]
    monkeypatch.setattr("compiler.check.shellcheck._run",
                        lambda _, texts, *__: texts and pytest.fail("shellcheck ran"))
    assert check_texts([text], store) == {text: first}


def checked_texts(monkeypatch) -> list[list[str]]:
    """Record the texts each shellcheck run is given; `findings` says which get a finding."""
    calls: list[list[str]] = []
    real = check.check_texts

    def recording(texts, store, **how):
        texts = list(texts)
        calls.append(texts)
        return real(texts, store, **how)

    monkeypatch.setattr(check, "check_texts", recording)
    return calls


@pytest.mark.slow
def test_shapes_stand_for_scripts_and_full_check_checks_each(project, cache, obc, monkeypatch):
    calls = checked_texts(monkeypatch)
    assert obc(*COMPILE).code == 0
    scripts = {p.read_text() for p in (project / "out").glob("*/job.sh")}
    assert not scripts & set(calls[0])  # shapes, not scripts
    assert calls[1] == []  # no shape had findings
    calls.clear()
    assert obc(*COMPILE, "--check", "--full-check").code == 0
    assert set(calls[0]) == scripts


def shellchecked(monkeypatch) -> list[str]:
    """Record the texts shellcheck itself runs on (not those found in the cache)."""
    ran: list[str] = []
    real = check._run

    def recording(shellcheck, texts, parallel=True):
        ran.extend(texts)
        return real(shellcheck, texts, parallel)

    monkeypatch.setattr(check, "_run", recording)
    return ran


@pytest.mark.slow
def test_a_shape_is_checked_in_parts_and_a_new_one_without_the_library(project, cache, obc,
                                                                       monkeypatch):
    ran = shellchecked(monkeypatch)
    assert obc(*COMPILE).code == 0
    scripts = {p.read_text() for p in (project / "out").glob("*/job.sh")}
    assert ran and not set(ran) & scripts
    assert any("# --- obc's library: core" in text for text in ran)  # the library's part
    ran.clear()
    run = project / "examples" / "docker-qlora.yaml"
    run.write_text(run.read_text().replace("  - HF_TOKEN\n", "  - HF_TOKEN\n  - OTHER\n"))
    assert obc(*COMPILE).code == 0  # another shape: one more line in its preflight
    (job_part,) = ran
    assert "# --- obc's library" not in job_part and "OTHER" in job_part


def test_the_scripts_of_a_shape_with_findings_are_checked_as_written(project, cache, obc,
                                                                    monkeypatch):
    calls = checked_texts(monkeypatch)
    bad = "#!/bin/sh\necho $1\n"
    monkeypatch.setattr(pipeline, "script_and_shape", lambda job: (render_job(job), bad))
    assert obc(*COMPILE).code == 0
    assert set(calls[0]) == {bad}
    assert set(calls[1]) == {p.read_text() for p in (project / "out").glob("*/job.sh")}


def test_a_script_whose_shape_has_a_finding_reports_it(project, cache, obc, monkeypatch):
    finding = Finding(3, 1, 2086, "info", "Double quote to prevent globbing.")
    monkeypatch.setattr(check, "check_texts",
                        lambda texts, store, **_: {text: (finding,) for text in texts})
    outcome = obc(*COMPILE)
    assert outcome.code == 1
    assert outcome.stderr.count("shellcheck SC2086 (info)") == len(PROJECT_RUNS)
    assert not (project / "out").exists()


@pytest.mark.slow  # compiles in several processes
def test_many_files_compile_alike_in_two_processes(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    runs.mkdir()
    for i in range(12):
        kind = ("docker", "podman", "native")[i % 3]
        (runs / f"r{i}.yaml").write_text(
            f"version: 1\nid: r{i}\nruntime: {{kind: {kind}}}\n"
            f"steps: [{{name: s, run: [x, 'arg {i}']}}]\n")
    serial = pipeline.compile_files([runs], tmp_path / "out")
    monkeypatch.setattr(workers, "MIN_PARALLEL", 2)
    monkeypatch.setenv("OBC_COMPILE_CACHE", "")
    forked = pipeline.compile_files([runs], tmp_path / "out")
    assert [(s.job.id, s.text) for s in forked.scripts] == [
        (s.job.id, s.text) for s in serial.scripts]
    assert forked.diagnostics == serial.diagnostics == []


@pytest.fixture
def sweep(project) -> Path:
    """The project with the learning-rate sweep too: six job.sh, sweep.sh and runs.tsv."""
    shutil.copy(REPO / "examples" / "sweep-lr.yaml", project / "examples")
    return project / "examples" / "sweep-lr.yaml"


@pytest.mark.slow
def test_an_unchanged_sweep_is_reused_whole(sweep, cache, obc, monkeypatch):
    assert obc(*COMPILE).code == 0
    compiled = built(monkeypatch)
    outcome = obc(*COMPILE, "--check")
    assert (outcome.code, compiled) == (0, [])
    assert outcome.stderr == f"obc: out is up to date ({len(PROJECT_RUNS) + 8} file(s))\n"
    assert obc(*COMPILE, "--prune").stderr == "obc: 0 written, 12 unchanged, 0 removed\n"


@pytest.mark.slow
def test_a_sweep_compiles_again_when_the_config_it_patches_changes(sweep, cache, obc,
                                                                   monkeypatch):
    assert obc(*COMPILE).code == 0
    config = sweep.parent / "configs" / "llama3-qlora.yaml"
    config.write_text(config.read_text() + "warmup_steps: 3\n")  # also embedded by two others
    compiled = built(monkeypatch)
    outcome = obc(*COMPILE, "--check")
    assert outcome.code == 1
    assert sorted(path.stem for path in compiled) == ["docker-qlora", "native-venv",
                                                      "sweep-lr"]
    assert "out/lr-sweep/sweep.sh:" in outcome.stderr  # each run's checksum changed
    assert "out/lr-sweep-long/job.sh:" in outcome.stderr


@pytest.mark.slow
def test_a_changed_file_in_out_is_drift_whatever_the_record_says(sweep, cache, obc,
                                                                 monkeypatch):
    # A record says what its run file compiles to, never what is in OUT: the files there are
    # compared with it byte for byte, and no record is consulted about them.
    assert obc(*COMPILE).code == 0
    table = Path("out") / "lr-sweep" / "runs.tsv"
    table.write_text(table.read_text() + "9\tlr-sweep-x\t\t\n")
    script = Path("out") / "steps-eval" / "job.sh"
    script.write_text(script.read_text().replace("set -u\n", "set -u\n# edited\n"))
    compiled = built(monkeypatch)
    outcome = obc(*COMPILE, "--check")
    assert (outcome.code, compiled) == (1, [])
    assert [line.split(":")[0] for line in outcome.stderr.splitlines()[:-1]] == [
        "out/lr-sweep/runs.tsv", "out/steps-eval/job.sh"]
    assert obc(*COMPILE).code == 0
    assert obc(*COMPILE, "--check").code == 0


@pytest.mark.slow
def test_plan_builds_every_job_whatever_the_cache_holds(sweep, cache, obc, monkeypatch):
    assert obc(*COMPILE).code == 0
    compiled = built(monkeypatch)
    outcome = obc("plan", "examples", "-o", "out", "--format", "json")
    assert outcome.code == 0
    assert len(compiled) == len(PROJECT_RUNS) + 1
    plans = json.loads(outcome.stdout)["scripts"]
    assert {plan["action"] for plan in plans} == {"none"}
    # The sweep's six runs and its sweep.sh are billed too (not its runs.tsv, a table).
    assert sum(plan["bill"] is not None for plan in plans) == len(PROJECT_RUNS) + 7


def test_an_id_taken_by_a_reused_script_is_reported_as_without_the_cache(project, cache, obc):
    assert obc(*COMPILE).code == 0
    copy = project / "examples" / "a-copy.yaml"
    copy.write_text((project / "examples" / "steps-eval.yaml").read_text())
    reused = obc(*COMPILE)  # steps-eval.yaml is reused, its copy is not
    assert reused.code == 1
    assert reused.stderr == obc(*COMPILE, "--no-cache").stderr
    assert "examples/steps-eval.yaml:" in reused.stderr


@pytest.mark.slow  # compiles in several processes
def test_a_sweep_compiles_alike_in_two_processes(monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("OBC_COMPILE_CACHE", "")
    serial = pipeline.compile_files([Path("examples")], Path("out"))
    monkeypatch.setattr(workers, "MIN_PARALLEL", 2)
    forked = pipeline.compile_files([Path("examples")], Path("out"))
    assert [(o.relative_path, o.mode, o.text) for o in forked.outputs] == [
        (o.relative_path, o.mode, o.text) for o in serial.outputs]
    assert any(o.relative_path.endswith("/sweep.sh") for o in forked.outputs)
    assert forked.diagnostics == serial.diagnostics == []


def test_every_template_file_is_part_of_obc_s_fingerprint():
    # The library's parts (templates/lib/*.sh) are in the scripts as much as the templates.
    templates = {p for p in (REPO / "templates").rglob("*") if p.is_file()}
    assert {p for p in templates if p.parent.name == "lib"}
    assert templates <= set(incremental.fingerprinted_files())


def test_a_record_keeps_the_library_by_name_and_gives_the_script_back(project, cache, obc):
    # Nine tenths of a job.sh is the library, the same in every script: a record that held
    # it would make the cache ten times the size of OUT, and --check read all of it.
    assert obc(*COMPILE).code == 0
    script = (project / "out" / "docker-qlora" / "job.sh").read_text()
    records = [path.read_text() for path in (cache / "outputs").rglob("*.json")]
    assert len(records) == len(PROJECT_RUNS)
    record = next(r for r in records if '"docker-qlora/job.sh"' in r)
    assert '["core"]' in record and part_text("core") not in json.loads(record)["outputs"][0][2]
    assert len(record) < len(script) / 4
    (project / "out" / "docker-qlora" / "job.sh").unlink()
    assert obc(*COMPILE).code == 0  # from the record
    assert (project / "out" / "docker-qlora" / "job.sh").read_text() == script


def test_a_record_finds_the_parts_by_their_section_lines():
    # Looking for each of 22 parts in the whole of a script took a tenth of a cold compile;
    # now only where a section line stands, and what it finds must be exact.
    script = (REPO / "out" / "docker-qlora" / "job.sh").read_text()
    pieces = incremental._pieces(script)
    assert incremental._text(pieces) == script
    names = [piece[0] for piece in pieces if isinstance(piece, list)]
    assert names == [name for name in PART_ORDER if f"# --- obc's library: {name} " in script]
    # A part edited by one byte is kept as text, the others by name.
    edited = script.replace("obc_main() {", "obc_main()  {", 1)
    pieces = incremental._pieces(edited)
    assert incremental._text(pieces) == edited
    assert [p[0] for p in pieces if isinstance(p, list)] == [n for n in names if n != "main"]


@pytest.mark.parametrize("pieces", [
    "text", [["../../etc/passwd"]], [["core", "words"]], [3], [[["core"]]], [{"core": 1}]])
def test_a_record_whose_text_is_not_text_and_parts_is_not_reused(pieces):
    assert incremental._text(pieces) is None
    assert incremental._text(["a", ["core"], "b"]) == "a" + part_text("core") + "b"
