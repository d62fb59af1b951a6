"""Properties of sweeps on generated input (Hypothesis, derandomised, a fixed budget): the merge
follows RFC 7396, the same run file gives the same bytes (written otherwise, the same but for
the hash of its bytes), ids are unique and come from labels (adding a value renames no run),
and exclude only removes."""

from __future__ import annotations

import contextlib
import copy
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from compiler.pipeline.pipeline import Result, compile_files
from compiler.sweep.merge import merge_patch

BUDGET = settings(derandomize=True, database=None, deadline=None, max_examples=60,
                  suppress_health_check=[HealthCheck.too_slow])

# RFC 7396, Appendix A: target, patch, result.
RFC_EXAMPLES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "result"), RFC_EXAMPLES)
def test_the_merge_gives_the_rfcs_own_examples(target, patch, result):
    assert merge_patch(target, patch) == result


scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.text("ab", max_size=2)
trees = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.sampled_from("abcd"), inner, max_size=3),
                     max_leaves=15)


@BUDGET
@given(trees, trees)
def test_the_merge_follows_rfc_7396_on_random_trees(target, patch):
    before = copy.deepcopy((target, patch))
    merged = merge_patch(target, patch)
    assert (target, patch) == before  # neither argument is changed
    if not isinstance(patch, dict):
        assert merged == patch  # anything but an object replaces the target
        return
    kept = target if isinstance(target, dict) else {}  # a non-object target becomes {}
    assert set(merged) == (set(kept) | set(patch)) - {k for k, v in patch.items() if v is None}
    for key, value in merged.items():
        if key in patch:
            assert value == merge_patch(kept.get(key), patch[key])
        else:
            assert value == kept[key]
    assert merge_patch(merged, patch) == merged  # applying it again changes nothing


# Sweeps of a small native run file: axes of labels (no '-' in them, so default ids are
# unique), each setting an env variable; exclusions drawn from the labels; maybe a named run.
labels = st.lists(st.text("xyz012", min_size=1, max_size=3), min_size=1, max_size=3,
                  unique=True)
axes = st.dictionaries(st.sampled_from(["a", "b", "c"]), labels, min_size=1, max_size=3)


@st.composite
def sweeps(draw) -> dict[str, Any]:
    spec = draw(axes)
    exclude = draw(st.lists(st.fixed_dictionaries(
        {}, optional={name: st.sampled_from(values) for name, values in spec.items()}),
        max_size=2).filter(all))
    matrix: dict[str, Any] = {"axes": {name: {"set": f"env.{name.upper()}",
                                               "values": {label: label for label in values}}
                                       for name, values in spec.items()}}
    if exclude:
        matrix["exclude"] = exclude
    if draw(st.booleans()):
        matrix["runs"] = {"extra": {"env": {"EXTRA": "1"}}}
    return {"version": 1, "id": "sw", "runtime": {"kind": "native"},
            "steps": [{"name": "s", "run": ["record"]}], "matrix": matrix}


def compiled(data: dict[str, Any], *, block: bool = False) -> Result:
    """Compile `data` written as JSON (or as block YAML) to run.yaml, in a folder of its own
    (the working directory, which names it: a script's header says run.yaml)."""
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder):
        if block:
            YAML().dump(data, Path("run.yaml"))
        else:
            Path("run.yaml").write_text(json.dumps(data))
        return compile_files([Path("run.yaml")])


def compile_data(data: dict[str, Any], *, block: bool = False) -> dict[str, str] | None:
    """Every file's text by its path under OUT, or None when obc reports a problem."""
    result = compiled(data, block=block)
    if result.diagnostics:
        return None
    return {output.relative_path: output.text for output in result.outputs}


def runs(data: dict[str, Any]) -> dict[tuple, str] | None:
    """Each run's labels (or name) → its id; None when obc reports a problem."""
    result = compiled(data)
    if result.diagnostics:
        return None
    return {script.job.sweep.labels or (script.job.sweep.name,): script.job.id
            for script in result.scripts}


def every_run_excluded(data: dict[str, Any]) -> bool:
    matrix = data["matrix"]
    return "runs" not in matrix and runs(data) is None


@pytest.mark.slow
@BUDGET
@given(sweeps())
def test_the_same_run_file_gives_the_same_bytes_however_it_is_written(data):
    first = compile_data(data)
    if first is None:
        assert every_run_excluded(data)
        return
    assert compile_data(data) == first
    # Written otherwise, the run file has other bytes, which its runs' headers hash (and so
    # sweep.sh, which holds their sha256): all else is the same.
    assert unhashed(compile_data(data, block=True)) == unhashed(first)


def unhashed(texts: dict[str, str] | None) -> dict[str, str]:
    assert texts is not None
    return {path: re.sub("[0-9a-f]{64}", "<sha256>", text) for path, text in texts.items()}


@BUDGET
@given(sweeps())
def test_ids_are_unique_and_every_combination_not_excluded_is_a_run(data):
    found = runs(data)
    if found is None:
        assert every_run_excluded(data)
        return
    assert len(set(found.values())) == len(found)
    matrix = data["matrix"]
    names = list(matrix["axes"])
    expected = [tuple(zip(names, combo, strict=True)) for combo in _product(matrix)
                if not any(all(dict(zip(names, combo, strict=True))[k] == v
                               for k, v in entry.items())
                           for entry in matrix.get("exclude", ()))]
    assert [labels for labels in found if labels != ("extra",)] == expected


def _product(matrix: dict[str, Any]) -> list[tuple[str, ...]]:
    combos: list[tuple[str, ...]] = [()]
    for axis in matrix["axes"].values():
        combos = [(*combo, label) for combo in combos for label in axis["values"]]
    return combos


@BUDGET
@given(sweeps(), st.data())
def test_adding_a_value_renames_no_run_and_changes_no_other(data, draw):
    before = runs(data)
    axis = draw.draw(st.sampled_from(sorted(data["matrix"]["axes"])))
    values = data["matrix"]["axes"][axis]["values"]
    new = draw.draw(st.text("xyz012", min_size=1, max_size=3).filter(
        lambda label: label not in values))
    grown = copy.deepcopy(data)
    grown["matrix"]["axes"][axis]["values"][new] = new
    after = runs(grown)
    if after is None:  # an exclusion that takes every run still does
        assert before is None and every_run_excluded(grown)
        return
    if before is not None:
        assert before.items() <= after.items()
        # Each run's script is what it was, but for the hash of the run file's bytes.
        old, now = unhashed(compile_data(data)), unhashed(compile_data(grown))
        assert all(now[path] == text for path, text in old.items()
                   if path.endswith("/job.sh"))


@BUDGET
@given(sweeps(), st.data())
def test_an_exclusion_only_ever_removes_runs(data, draw):
    before = runs(data)
    spec = data["matrix"]["axes"]
    entry = draw.draw(st.fixed_dictionaries({}, optional={
        name: st.sampled_from(list(axis["values"])) for name, axis in spec.items()}).filter(bool))
    narrowed = copy.deepcopy(data)
    narrowed["matrix"].setdefault("exclude", []).append(entry)
    after = runs(narrowed)
    if after is None:
        assert every_run_excluded(narrowed)
        return
    assert before is not None and after.items() <= before.items()
    for labels in before.keys() - after.keys():
        assert all(dict(labels)[name] == label for name, label in entry.items())
