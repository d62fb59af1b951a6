"""Shapes stand for their scripts: whatever the values, every shellcheck code that a script
gets, its shape gets too, so a clean shape means a clean script. Checked with the real
shellcheck on run files full of hostile values, with obc's file-wide disables and without
them (the codes they hide are the ones values can raise, so a shape must raise them too)."""

from __future__ import annotations

import json
import re
from functools import cache

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from jinja2 import Template

from compiler.check.shellcheck import check_texts
from compiler.core.cache import Store
from compiler.pipeline.build import build_jobs
from compiler.pipeline.pipeline import Options, compile_files
from compiler.render.render import render_job
from compiler.render.shape import ShapePrinter, script_and_shape, shape_printer
from tests.conftest import compile_text

FRAGMENTS = (
    "a", "Z", "7", "-", "--x", " ", "\t", "\n", "'", '"', "\\", "\\'", "$", "$x", "${x}",
    "$(id)", "`id`", "~", "~/", "#", "shellcheck disable=all", "# shellcheck enable=all",
    "OBC_EOF", " OBC_EOF", "OBC_EOF ", "OBC_EOF x", "OBC_EOF)", "ZOBC_EOF", "\u2018", "\u2019",
    "\u201c", "\u00a0", "é", "*", "?", "[", "]", "{", "}", ";", "&", "|", "<", ">", "(", ")",
    "=", "!", "%", "@", ":", ",", ".", "/", "do", "if", "ls", "wait", "-n", "-e", "a b",
    # What a plan record once read as a hash or a runtime variant (issue 18, F8 and F9).
    "sha256:" + "0" * 64, "type",
)
VALUE = st.lists(st.sampled_from(FRAGMENTS), max_size=6).map("".join)
LINE = VALUE.map(lambda v: v.replace("\n", ""))
# What the schema and rules take: a path is `~`, `~/...` or does not start with `~`; a
# program is not empty and has no `=`; a mount is absolute, without `:` or `,`.
PATH = LINE.map(lambda v: "p" + v if not v or (v.startswith("~") and v[:2] not in ("~", "~/"))
                else v)
PROGRAM = LINE.map(lambda v: v.replace("=", "") or "p")
MOUNT = LINE.map(lambda v: "/" + re.sub("[:,]", "", v))
# An image file (apptainer's SIF, enroot's squashfs) is any line after `/`, `~/` or `${NAME}/`.
IMAGE_FILE = st.tuples(st.sampled_from(["/", "~/", "${SHARED}/"]), LINE).map("".join)
SHA256 = st.sampled_from(["0" * 64, "0123456789abcdef" * 4])
RETRY = st.fixed_dictionaries({"on_exit_codes": st.lists(st.integers(1, 255), min_size=1,
                                                        max_size=3, unique=True),
                                "max": st.integers(1, 100)})
SLURM = st.fixed_dictionaries({}, optional={
    "partition": st.sampled_from(["gpu", "a.b-1"]), "time": st.sampled_from(["90", "1-02:00"]),
    "nodes": st.integers(1, 2), "gpus_per_node": st.integers(1, 8),
    "max_restarts": st.integers(1, 3), "signal": st.sampled_from(["B:USR1@300", "B:TERM@60"])})
OUTPUT_DIR = st.sampled_from(["./outputs/a b", "./o'ut", "./$x", "outputs", "./’"])
# Names that are also a command's name or a reserved word.
NAME = st.sampled_from(["shape", "wait", "ls", "do", "a.b-1", "x_2", "type", "engine"])
# The run file's parts, built once (as `_runtime_options` is, by kind): a strategy made anew
# on each draw has Hypothesis work out its properties anew, much of the time of a draw.
KINDS = st.sampled_from(["docker", "podman", "apptainer", "enroot", "native"])
STOP_TIMEOUT = st.fixed_dictionaries({}, optional={"stop_timeout": st.integers(1, 600)})
STEPS = st.lists(st.tuples(NAME.filter(lambda n: "." not in n), PROGRAM,
                           st.lists(VALUE, max_size=3)),
                 min_size=1, max_size=3, unique_by=lambda step: step[0])
PATHS = st.fixed_dictionaries({}, optional={"run_dir": PATH, "cache_dir": PATH})
ENV = st.fixed_dictionaries({"A": VALUE, "PYTHONPATH": VALUE})
RETRY_AND_SLURM = st.fixed_dictionaries({}, optional={"retry": RETRY, "slurm": SLURM})
TRAINER_ARGS = st.lists(VALUE, max_size=2)


@st.composite
def run_files(draw) -> tuple[dict, str]:
    """A run file whose every free-text field holds hostile values, and an embedded file."""
    kind = draw(KINDS)
    runtime: dict = {"kind": kind, **draw(_runtime_options(kind)), **draw(STOP_TIMEOUT)}
    steps = draw(STEPS)
    data = {
        "version": 1, "id": draw(NAME), "description": draw(VALUE), "runtime": runtime,
        "paths": draw(PATHS),
        "env": draw(ENV),
        "files": {"notes.txt": "notes.txt"},
        "secrets": ["HF_TOKEN", {"name": "lower_case", "required": False}],
        **draw(RETRY_AND_SLURM),
    }
    if kind == "enroot":  # its steps are srun steps
        data.setdefault("slurm", {})
    if draw(st.booleans()):
        data["steps"] = [{"name": name, "run": [program, *args]}
                         for name, program, args in steps]
    else:  # the trainer's steps, resume and checkpoint code, and an embedded config
        data["trainer"] = {"axolotl": {
            "config": {"base_model": draw(LINE), "output_dir": draw(OUTPUT_DIR),
                       "learning_rate": 2e-4},
            "args": draw(TRAINER_ARGS), "merge": draw(st.booleans())}}
    return data, draw(VALUE)


@cache
def _runtime_options(kind: str) -> st.SearchStrategy[dict]:
    if kind == "native":
        return st.fixed_dictionaries({}, optional={"venv": PATH, "env_file": PATH})
    mounts = st.lists(st.fixed_dictionaries({"source": MOUNT, "target": MOUNT}), max_size=2)
    if kind == "apptainer":
        return st.fixed_dictionaries({"image": IMAGE_FILE}, optional={
            "image_sha256": SHA256, "mounts": mounts, "cleanenv": st.booleans(),
            "contain": st.booleans()})
    if kind == "enroot":
        return st.fixed_dictionaries({"image": IMAGE_FILE}, optional={
            "image_sha256": SHA256, "mounts": mounts, "enroot_version": st.integers(3, 4)})
    return st.fixed_dictionaries({}, optional={
        # --label takes any value: obc passes it whole, as --label=VALUE.
        "mounts": mounts, "extra_args": st.lists(VALUE.map(lambda v: "--label=" + v),
                                                 max_size=2)})


# obc's file-wide `# shellcheck disable=...` lines, which hide the codes values can raise.
FILE_WIDE = re.compile(r"^# shellcheck disable=SC2016\S*\n", re.MULTILINE)


@pytest.mark.slow  # minutes: shellcheck on 60 whole scripts
@settings(derandomize=True, database=None, max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(run=run_files())
def test_every_code_a_script_gets_its_shape_gets(run, tmp_path_factory):
    data, content = run
    root = tmp_path_factory.mktemp("shape")
    (root / "notes.txt").write_text(content, encoding="utf-8")
    (root / "run.yaml").write_text(json.dumps(data), encoding="utf-8")
    built = build_jobs(root / "run.yaml", {})
    assume(built.jobs)  # a value the schema refuses: nothing to check
    ((_, job),) = built.jobs
    event(f"runtime: {data['runtime']['kind']}")
    event(f"checkpoints: {job.checkpoints is not None}, slurm: {job.slurm is not None}, "
          f"retry: {job.retry is not None}")
    text, shape = script_and_shape(job)
    if shape is None:
        event("no shape: a value reads as a directive")
        assert "shellcheck" in json.dumps(data, ensure_ascii=False) + content
        return
    texts = [text, shape, FILE_WIDE.sub("", text), FILE_WIDE.sub("", shape)]
    found = check_texts(texts, Store(None, "findings"))
    codes = [{finding.code for finding in found[t]} for t in texts]
    event(f"codes of the script without the file-wide disables: {sorted(codes[2])}")
    assert codes[0] <= codes[1], (codes, text)
    assert codes[2] <= codes[3], (codes, text)


@settings(derandomize=True, database=None, max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(run=run_files())
def test_a_script_and_its_shape_in_one_render_are_the_two_renders(run, tmp_path_factory):
    # The shape was a second render of the job, a sixth of a cold compile: one render now
    # writes each value with both printers, and must write what each alone writes.
    data, content = run
    root = tmp_path_factory.mktemp("twice")
    (root / "notes.txt").write_text(content, encoding="utf-8")
    (root / "run.yaml").write_text(json.dumps(data), encoding="utf-8")
    built = build_jobs(root / "run.yaml", {})
    assume(built.jobs)
    ((_, job),) = built.jobs
    text, shape = script_and_shape(job)
    assert text == render_job(job)
    assert shape in (render_job(job, shape_printer(job)), None)


def test_a_script_and_its_shape_are_one_render(tmp_path, monkeypatch):
    rendered = []
    real = Template.generate
    monkeypatch.setattr(Template, "generate",
                        lambda self, *a, **k: rendered.append(self.name) or real(self, *a, **k))
    (tmp_path / "run.yaml").write_text("version: 1\nid: j\nruntime: {kind: native}\n"
                                       "steps: [{name: a, run: [echo]}]\n")
    result = compile_files([tmp_path / "run.yaml"], tmp_path / "out", Options(cache=False))
    assert (rendered, [bool(s.shape) for s in result.scripts]) == (["native.sh.j2"], [True])


def test_scripts_that_differ_only_in_values_have_one_shape(tmp_path):
    shapes = set()
    for i, description in enumerate(["first run", "second: lr 2e-5\nseed 3"]):
        text = compile_text(tmp_path, f"""\
version: 1
id: sweep-{i}
description: {json.dumps(description)}
runtime: {{kind: docker, gpus: [{i}]}}
trainer: {{axolotl: {{config: {{base_model: m, learning_rate: 0.000{i + 1}}}}}}}
env: {{WANDB_RUN_NAME: "run {i}"}}
""")
        ((_, job),) = build_jobs(tmp_path / "run.yaml", {}).jobs
        assert script_and_shape(job)[0] == text
        shapes.add(script_and_shape(job)[1])
    assert len(shapes) == 1


def test_a_placeholder_keeps_quoting_characters_and_equality():
    printer = ShapePrinter(["run-000", "it's", "HOME", "x", "do"])
    assert [printer.word(v) for v in ("run-0001", "run-0002", "run-0001")] == [
        "a-0", "b-0", "a-0"]
    assert printer.word("it's $HOME") == "'a'\\''a $A'"
    assert printer.word("\u2018x\u2019") == "'\u2018a\u2019'"
    assert [printer.word(v) for v in ("wait", "--rm", "do", "")] == ["wait", "--rm", "'do'", "''"]


def test_the_templates_own_text_stays_as_written():
    printer = ShapePrinter(["run-7"])
    assert printer.word("obc_step_command") == "obc_step_command"  # a function's name
    assert printer.word("--ulimit=stack=1") == "'--ulimit=stack=1'"
    assert printer.word("overbrainer-run-7") == "a-a-0"


def test_numbers_keep_equality_and_their_side_of_255():
    printer = ShapePrinter(["x"])
    assert [printer.number(n) for n in (7, 300, 7, 255, 1000)] == ["0", "257", "0", "1", "259"]
    assert printer.word("7") == "0"
