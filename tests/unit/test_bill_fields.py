"""The bill is exhaustive: every field of the normalised job is billed or named as not
reviewable (bill_fields.py), and a change to any field changes the plan's JSON: its bill, or
else nothing the script does (Hypothesis, derandomised, a fixed budget)."""

from __future__ import annotations

import dataclasses
import json
import string
import tempfile
import typing
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.model.job import Job
from compiler.model.runtimes import Native
from compiler.pipeline.pipeline import compile_files
from compiler.plan.bill import bill_of
from compiler.plan.bill_fields import BILLED, NOT_REVIEWABLE, model_fields, unaccounted_fields
from compiler.plan.diff import ScriptPlan, diff_meaning
from compiler.plan.report import bill_lines, report_plan_json
from compiler.render.meaning import RECORD_MARKER, meaning
from compiler.render.render import render_job
from compiler.render.summary import LABEL_WIDTH
from tests.conftest import REPO, allow_sbatch

BUDGET = settings(derandomize=True, database=None, deadline=None, max_examples=12,
                  suppress_health_check=[HealthCheck.too_slow])


def test_every_field_of_the_model_is_billed_or_said_why_not():
    fields = list(model_fields())
    assert unaccounted_fields() == []
    assert set(BILLED) | set(NOT_REVIEWABLE) == set(fields)  # no list names a field gone
    assert not set(BILLED) & set(NOT_REVIEWABLE)
    assert all(reason.strip() for reason in NOT_REVIEWABLE.values())


@dataclasses.dataclass(frozen=True, slots=True)
class Apptainer:
    """A runtime variant with a field the model does not have."""

    image: str
    writable_tmpfs: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class GrownJob(Job):
    resume_from: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Runtimes:
    runtime: Native | Apptainer


def test_a_field_the_model_gains_fails_until_it_is_billed():
    assert unaccounted_fields(GrownJob) == ["resume_from"]
    assert unaccounted_fields(Runtimes) == ["runtime.writable_tmpfs"]


# Jobs that between them set every field: the examples (a sweep's runs among them), and a
# docker job with what they leave out.
DOCKER = """\
version: 1
id: d
runtime:
  kind: docker
  image: "registry.example.com/t:1@sha256:%s"
  user: "1000:1000"
  shm_size: 8g
  stop_timeout: 30
  extra_args: [--cap-add=SYS_PTRACE]
  mounts: [{source: /data, target: /data, readonly: true}]
paths: {run_dir: /scratch/d, shared: true}
steps: [{name: a, run: [python, a.py]}, {name: b, run: [python, b.py], nodes: all}]
files: {a.py: a.py}
env: {A: "1"}
secrets: [A_TOKEN, {name: B, required: false}]
retry: {on_exit_codes: [75], max: 2}
health: {timeout: 60, on_failure: requeue}
notify: {on: [started, done], command: [notify-send, obc]}
slurm:
  partition: gpu
  account: acct
  qos: high
  time: "01:00:00"
  nodes: 2
  gpus_per_node: 2
  cpus_per_task: 8
  mem: 16G
  constraint: a100
  job_name: dj
  signal: "B:USR1@90"
  max_restarts: 2
  extra: [--exclusive]
  stages:
    a: {partition: cpu, account: acct2, qos: low, time: "00:30:00", gpus_per_node: 0,
        cpus_per_task: 2, mem: 4G, constraint: x86}
""" % ("e" * 64)


@cache
def base_jobs() -> tuple[Job, ...]:
    folder = Path(tempfile.mkdtemp())
    (folder / "a.py").write_text("print(1)\n", encoding="utf-8")
    allow_sbatch(folder, "exclusive")
    (folder / "d.yaml").write_text(DOCKER, encoding="utf-8")
    result = compile_files([folder / "d.yaml", *sorted((REPO / "examples").glob("*.yaml"))])
    assert not result.diagnostics, [d.text() for d in result.diagnostics]
    return tuple(script.job for script in result.scripts)


Steps = tuple[str | int, ...]


def leaves(value: Any, steps: Steps = (), path: str = "") -> Iterator[tuple[str, Steps, Any, Any]]:
    """Each leaf of a job: its field's path as bill_fields names it, how to reach it (field
    names and item indexes), its value, and its type hint."""
    hints = typing.get_type_hints(type(value))
    for field in dataclasses.fields(value):
        inner, name = getattr(value, field.name), path + field.name
        if dataclasses.is_dataclass(inner):
            if name == "runtime":
                yield name, (*steps, field.name), inner, hints[field.name]
            yield from leaves(inner, (*steps, field.name), name + ".")
        elif isinstance(inner, tuple) and inner and dataclasses.is_dataclass(inner[0]):
            for i, item in enumerate(inner):
                yield from leaves(item, (*steps, field.name, i), name + ".")
        else:
            yield name, (*steps, field.name), inner, hints[field.name]


def replaced(value: Any, steps: Steps, new: Any) -> Any:
    """`value` with the leaf at `steps` replaced by `new`."""
    if not steps:
        return new
    first, rest = steps[0], steps[1:]
    if isinstance(first, int):
        return (*value[:first], replaced(value[first], rest, new), *value[first + 1:])
    return dataclasses.replace(value, **{first: replaced(getattr(value, first), rest, new)})


words = st.text(string.ascii_lowercase + string.digits + "-_./", min_size=1, max_size=8)


# Fields whose values have a form of their own, as the schema lets them through.
FORMS = dict.fromkeys(("slurm.time", "stages.slurm.time"),
                      st.sampled_from(["30", "02:00:00", "1-12", "UNLIMITED"]))


def other_values(path: str, value: Any, hint: Any) -> st.SearchStrategy:
    """Values of the leaf's type other than `value`."""
    if path in FORMS:
        return FORMS[path].filter(lambda new: new != value)
    literals = [arg for part in (typing.get_args(hint) or (hint,))
                for arg in typing.get_args(part) if typing.get_origin(part) is typing.Literal]
    if literals:
        return st.sampled_from([*literals, ("0", "1")]).filter(lambda new: new != value)
    if isinstance(value, bool):
        return st.just(not value)
    if isinstance(value, tuple):
        return st.builds(lambda extra: (*value, extra), _item_like(value, hint))
    if isinstance(value, int) or value is None and int in typing.get_args(hint):
        return st.integers(1, 10_000).filter(lambda new: new != value)
    return words.filter(lambda new: new != value)


def _item_like(items: tuple, hint: Any) -> st.SearchStrategy:
    """An item for a tuple of `hint`'s items (pairs, numbers, words, options)."""
    if typing.get_origin(hint) is not tuple:  # a tuple in a union: runtime.gpus
        hint = next(arg for arg in typing.get_args(hint) if typing.get_origin(arg) is tuple)
    item_hint = typing.get_args(hint)[0]
    if typing.get_origin(item_hint) is tuple:
        return st.tuples(*[words.map(str.upper) for _ in typing.get_args(item_hint)])
    if hasattr(item_hint, "_fields"):  # a named tuple: sweep.changes
        return st.builds(item_hint, *[words for _ in item_hint._fields])
    if item_hint is int:
        return st.integers(1, 200)
    return words.map(lambda word: f"--{word}" if items and str(items[0]).startswith("--")
                     else word)


def plan_json(job: Job) -> str:
    out = []
    report_plan_json([ScriptPlan(f"out/{job.id}/job.sh", "add", job=job)],
                     type("Stream", (), {"write": lambda _, text: out.append(text)})())
    return "".join(out)


# Each example compares a changed job's plan with its base job's, which is one of a few:
# each base job's plan once (a plan reads the trainers' embedded configs, most of its time).
base_plan_json = cache(plan_json)


def what_it_does(job: Job) -> str:
    """The script but its summary (header and --help) and record: what it does, not how it
    describes itself."""
    with mock.patch("compiler.render.render.help_lines", lambda job: []):
        text = render_job(job)
    return text[:text.index(RECORD_MARKER)]


@cache
def base_leaves() -> dict[str, tuple[tuple[Job, Steps, Any, Any], ...]]:
    """Each leaf of the base jobs by its field's path, found in one walk for all the fields'
    tests (a walk reads each dataclass's type hints, and there are a hundred fields)."""
    found: dict[str, list[tuple[Job, Steps, Any, Any]]] = {}
    for job in base_jobs():
        for name, steps, value, hint in leaves(job):
            found.setdefault(name, []).append((job, steps, value, hint))
    return {name: tuple(where) for name, where in found.items()}


def instances(path: str) -> tuple[tuple[Job, Steps, Any, Any], ...]:
    """Where each base job has the leaf `path`, and the variants to swap a runtime for."""
    found = base_leaves().get(path, ())
    assert found, f"no base job sets {path}: add one that does"
    return found


@pytest.mark.parametrize("path", sorted({*BILLED, *NOT_REVIEWABLE}))
@BUDGET
@given(data=st.data())
def test_a_change_to_any_field_changes_the_plans_json(path, data):
    job, steps, value, hint = data.draw(st.sampled_from(instances(path)))
    if path == "runtime":
        new = data.draw(st.sampled_from([other.runtime for other in base_jobs()
                                         if type(other.runtime) is not type(value)]))
    else:
        new = data.draw(other_values(path, value, hint))
    changed = replaced(job, steps, new)
    assert diff_meaning(meaning(job), meaning(changed))  # a change line, always
    if path in NOT_REVIEWABLE or plan_json(changed) != base_plan_json(job):
        return
    assert what_it_does(changed) == what_it_does(job), \
        f"{path}: {value!r} → {new!r} changes what the script does, not its bill"


def test_the_plans_json_is_json():
    json.loads(plan_json(base_jobs()[0]))


def test_every_row_billed_names_a_row_of_the_bill():
    rows = {line[:LABEL_WIDTH].strip() for job in base_jobs()
            for line in bill_lines(bill_of(job))}
    assert set(BILLED.values()) <= rows
