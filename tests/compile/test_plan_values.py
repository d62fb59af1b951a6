"""`obc plan` cannot be confused by values (issue 18, F8 and F9): a name such as `type` in env,
steps, files or secrets is a name, never a runtime variant's marker, and a value that looks
like `sha256:…` never hides a change, because the record is read by the model's types and
keeps a hashed text as an object, where any value is a string."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from compiler.model.job import Job
from compiler.pipeline.build import build_jobs
from compiler.pipeline.pipeline import compile_files
from compiler.plan.diff import diff_meaning
from compiler.plan.diff import value_line as show
from compiler.plan.recorded import recorded_job, rendered_again
from compiler.render.meaning import JOB, VARIANT_KEY, Digest, meaning, read_record
from compiler.render.render import render_job
from tests.compile.test_plan import obc
from tests.compile.test_plan_meaning import job_of
from tests.unit.test_shapes import run_files

# 200+ characters of code, recorded as its hash.
LONG_CODE = "import sys\n" + "".join(f"print({n}, file=sys.stderr)  # a line of the program\n"
                                     for n in range(8))


def sha256_text(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def run_file(body: str) -> str:
    return f"version: 1\nid: j\nruntime: {{kind: native}}\n{body}"


def plan_after(folder: Path, before: str, after: str, *args: str) -> str:
    """Compile `before`, then return what `obc plan` says of `after`: its first line."""
    (folder / ".git").mkdir(exist_ok=True)
    (folder / "run.yaml").write_text(before, encoding="utf-8")
    assert obc(folder, "compile", "run.yaml", "-o", "out").returncode == 0
    (folder / "run.yaml").write_text(after, encoding="utf-8")
    result = obc(folder, "plan", "run.yaml", "-o", "out", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[0]


def changes(folder: Path, before: str, after: str) -> list[str]:
    old, new = job_of(folder, run_file(before)), job_of(folder, run_file(after))
    return said(old, new)


def said(old: Job, new: Job) -> list[str]:
    """The change lines between two jobs, but the inputs hash (a run file's text changed)."""
    return [change.text() for change in diff_meaning(meaning(old), meaning(new))
            if change.path != ("inputs",)]


def test_f8_a_step_and_an_env_var_named_type_as_the_review_did_it(tmp_path):
    before = ("steps: [{name: type, run: [echo, one]}, {name: b, run: [echo, b]}]\n"
              "env: {type: a, engine: x}\n")
    after = ("steps: [{name: type, run: [echo, two]}, {name: b, run: [echo, b]}]\n"
             "env: {type: a, engine: x, LD_PRELOAD: /tmp/evil.so}\n")
    assert plan_after(tmp_path, run_file(before), run_file(after)) == (
        "~ out/j/job.sh: step type: echo one → echo two; env LD_PRELOAD added (/tmp/evil.so)")


def test_f8_an_env_var_named_type_that_changes_too(tmp_path):
    before = "steps: [{name: a, run: [echo]}]\nenv: {type: a, engine: x}\n"
    after = "steps: [{name: a, run: [echo]}]\nenv: {type: b, engine: x, LD_PRELOAD: /e.so}\n"
    assert changes(tmp_path, before, after) == [
        "env type a → b", "env LD_PRELOAD added (/e.so)"]


@pytest.mark.parametrize("name", ["type", "sha256", "engine"])
def test_f8_a_file_named_like_a_marker_does_not_hide_an_added_one(tmp_path, name):
    (tmp_path / "t.txt").write_text("one", encoding="utf-8")
    (tmp_path / "s.py").write_text("import os", encoding="utf-8")
    before = f"steps: [{{name: a, run: [echo]}}]\nfiles: {{{name}: t.txt}}\n"
    after = f"steps: [{{name: a, run: [echo]}}]\nfiles: {{{name}: s.py, sitecustomize.py: s.py}}\n"
    assert changes(tmp_path, before, after) == [
        f"file {name}: one → 'import os'", f"file {name} from t.txt → s.py",
        "file sitecustomize.py added"]


def test_f8_a_secret_named_type(tmp_path):
    before = "steps: [{name: a, run: [echo]}]\nsecrets: [type]\n"
    after = ("steps: [{name: a, run: [echo]}]\n"
             "secrets: [{name: type, required: false}, AWS_SECRET_ACCESS_KEY]\n")
    assert changes(tmp_path, before, after) == [
        "secret type required true → false", "secret AWS_SECRET_ACCESS_KEY added"]


def test_f9_a_literal_hash_then_the_text_it_hashes_as_the_review_did_it(tmp_path):
    before = f"steps: [{{name: a, run: [python, -c, {json.dumps(sha256_text(LONG_CODE))}]}}]\n"
    after = f"steps: [{{name: a, run: [python, -c, {json.dumps(LONG_CODE)}]}}]\n"
    line = plan_after(tmp_path, run_file(before), run_file(after))
    digest = sha256_text(LONG_CODE).removeprefix("sha256:")
    assert line == (f"~ out/j/job.sh: step a: python -c {sha256_text(LONG_CODE)} → python -c "
                    f"(a text with sha256 {digest[:12]}…)")


@pytest.mark.parametrize("field", ["env", "description"])
def test_f9_a_literal_hash_in_env_or_description_then_its_text(tmp_path, field):
    text = LONG_CODE if field == "env" else "two\nlines\n"
    value = {"env": "env: {{CODE: {}}}\n", "description": "description: {}\n"}[field]
    steps = "steps: [{name: a, run: [echo]}]\n"
    said = changes(tmp_path, steps + value.format(json.dumps(sha256_text(text))),
                   steps + value.format(json.dumps(text)))
    assert said == [{"env": "env CODE changed", "description": "description changed"}[field]]


def test_f9_a_file_that_holds_a_hash_then_the_text_it_hashes(tmp_path):
    (tmp_path / "p.py").write_text(sha256_text(LONG_CODE), encoding="utf-8")
    body = "steps: [{name: a, run: [python, p.py]}]\nfiles: {p.py: p.py}\n"
    old = job_of(tmp_path, run_file(body))
    (tmp_path / "p.py").write_text(LONG_CODE, encoding="utf-8")
    new = job_of(tmp_path, run_file(body))
    assert said(old, new) == ["file p.py changed"]


def test_a_hashed_text_is_an_object_in_the_record(tmp_path):
    job = job_of(tmp_path, run_file(f"steps: [{{name: a, run: [python, -c, "
                                    f"{json.dumps(LONG_CODE)}]}}]\n"))
    argv = meaning(job)["steps"]["a"]["argv"]
    assert argv[2] == {"sha256": sha256_text(LONG_CODE).removeprefix("sha256:")}
    (script,) = compile_files([tmp_path / "run.yaml"]).scripts
    assert read_record(script.text) == meaning(job)


def test_no_runtime_variant_has_a_field_named_like_the_marker_of_its_variant():
    for variant in JOB.child("runtime").of:
        assert VARIANT_KEY not in {field.name for field in dataclasses.fields(variant)}


@settings(derandomize=True, database=None, max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(run=run_files())
def test_a_hostile_jobs_record_reads_back_as_the_job_whole(run, tmp_path_factory):
    """Whatever the values and names (`type`, `sha256:…` among them), the record in the
    script reads back as the job's meaning and as the job itself, the one obc renders again."""
    data, content = run
    root = tmp_path_factory.mktemp("record")
    (root / "notes.txt").write_text(content, encoding="utf-8")
    (root / "run.yaml").write_text(json.dumps(data), encoding="utf-8")
    built = build_jobs(root / "run.yaml", {})
    assume(built.jobs)  # a value the schema refuses
    ((_, job),) = built.jobs
    text = render_job(job)
    record = read_record(text)
    assert record == meaning(job)
    assert diff_meaning(record, meaning(job)) == []
    assert recorded_job(record, job, text) == job
    files_alone = recorded_job(record, dataclasses.replace(job, files=()), text)
    assert files_alone == job


# Built once: a recursive strategy made anew on each draw has Hypothesis work out its
# properties anew.
HOSTILE_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(
        ["", "type", "sha256:" + "0" * 64, "x\u202ey", "container"]),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(
        st.sampled_from(["type", "sha256", "argv", "a"]), inner, max_size=2),
    max_leaves=4)


@settings(derandomize=True, database=None, max_examples=150, deadline=None)
@given(data=st.data())
def test_a_hostile_record_never_breaks_plan(tmp_path_factory, data):
    """A record on disk may hold anything where obc wrote a value: plan compares and shows it,
    and reads it back as a job only if every value is of its field's type."""
    root = tmp_path_factory.mktemp("hostile")
    (root / "t.txt").write_text("a\nb\n", encoding="utf-8")
    job = job_of(root, run_file("steps: [{name: type, run: [echo, one]}]\nfiles: {t.txt: "
                                "t.txt}\nenv: {type: a}\nslurm: {nodes: 2, gpus_per_node: 1}\n"))
    record = meaning(job)
    paths = list(_leaves(record))
    path = data.draw(st.sampled_from(paths))
    hostile = data.draw(HOSTILE_VALUES)
    _set(record, path, hostile)
    for change in diff_meaning(record, meaning(job)):
        assert "\n" not in change.text()
    recorded = recorded_job(record, job, render_job(job))
    assert recorded is None or meaning(recorded) == record
    rendered_again(record, job, render_job(job))


def _leaves(value: object, path: tuple = ()):
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list) and value:
        for n, item in enumerate(value):
            yield from _leaves(item, (*path, n))
    yield path


def _set(record: dict, path: tuple, value: object) -> None:
    if not path:
        return
    *parents, last = path
    node = record
    for key in parents:
        node = node[key]
    node[last] = value


def test_a_value_that_reads_like_a_hashed_text_is_shown_quoted():
    shown = show(["(a text with sha256 0123456789ab…)", Digest("0123456789abcdef")])
    assert shown == "'(a text with sha256 0123456789ab…)' (a text with sha256 0123456789ab…)"
