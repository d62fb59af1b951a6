"""A run file's matrix is hostile input like the rest of it: whatever the block holds, obc
validate answers with located problems or with runs, never with a traceback (Hypothesis,
derandomised, a fixed budget)."""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.pipeline.pipeline import compile_files

FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=300,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

TEXT = st.text(st.characters(exclude_categories=["Cs", "Cc"]), max_size=8)
WORDS = ["env", "runtime", "kind", "docker", "dokcer", "steps", "id", "matrix", "trainer",
         "axolotl", "config", "slurm", "paths", "run_dir", "/srv/x", "output_dir", "a", "b",
         "x", "y", "1e-4", "Q", "", "set", "values", "{id}", "{a}", "{z}", "index"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 2**70), st.floats(), TEXT,
                    st.sampled_from(WORDS))
KEYS = st.one_of(st.sampled_from(WORDS), TEXT)
DATA = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(KEYS, inner, max_size=3), max_leaves=12)


def mostly(likely: st.SearchStrategy, anything: st.SearchStrategy) -> st.SearchStrategy:
    """`likely` three times in four: a fuzz that fails at the first key tests little."""
    return st.one_of(likely, likely, likely, anything)


LABELS = mostly(st.sampled_from(["x", "y", "z1", "1e-4", "Q", "", "a-b", "7"]), TEXT)
PATHS = mostly(st.sampled_from(["env.A", "steps.name", "steps", "runtime.kind", "id",
                                "matrix.a", "trainer.axolotl.config.lr",
                                "trainer.axolotl.config", "paths.run_dir", "a..b", ""]), TEXT)
RUN_KEYS = mostly(st.sampled_from(["env", "runtime", "steps", "id", "matrix", "trainer",
                                   "slurm", "paths", "secrets"]), KEYS)
PATCHES = mostly(st.dictionaries(RUN_KEYS, DATA, max_size=2), DATA)
VALUES = mostly(st.one_of(st.dictionaries(LABELS, DATA, min_size=1, max_size=3),
                          st.lists(mostly(st.integers(0, 3), SCALARS), min_size=1,
                                   max_size=3)), DATA)
AXES = mostly(st.one_of(st.dictionaries(LABELS, PATCHES, min_size=1, max_size=3),
                        st.fixed_dictionaries({"set": PATHS, "values": VALUES})), DATA)
MATRIX = mostly(st.fixed_dictionaries({}, optional={
    "axes": mostly(st.dictionaries(mostly(st.sampled_from(["a", "b", "c", "id", "Bad"]), TEXT),
                                   AXES, min_size=1, max_size=3), DATA),
    "exclude": mostly(st.lists(st.dictionaries(mostly(st.sampled_from(["a", "b", "z"]), KEYS),
                                               mostly(LABELS, st.lists(LABELS, max_size=2)),
                                               max_size=2), max_size=2), DATA),
    "runs": mostly(st.dictionaries(LABELS, PATCHES, max_size=2), DATA),
    "id": mostly(st.sampled_from(["{id}-{a}", "{a}", "{id}", "{z}", "{id}_X"]), DATA),
    "max_parallel": mostly(st.integers(0, 3), SCALARS),
    "max_runs": mostly(st.integers(-1, 3), SCALARS),
}), DATA)
BASES = st.sampled_from([
    {"version": 1, "id": "sw", "runtime": {"kind": "native"},
     "steps": [{"name": "s", "run": ["record"]}]},
    {"version": 1, "id": "sw", "runtime": {"kind": "docker"},
     "trainer": {"axolotl": {"config": "cfg.yaml"}}},
    {"version": 1, "id": "sw", "runtime": {"kind": "docker", "mounts": [
        {"source": "/srv", "target": "/srv"}]},
     "trainer": {"axolotl": {"config": {"base_model": "m", "output_dir": "/srv/out"}}}},
    {"version": 1, "runtime": {"kind": "native"}, "steps": [{"name": "s", "run": ["x"]}]},
])


# Valid matrices, for the rules past the schema: patches that break a run, set paths that
# cross a list, exclusions of unknown labels, templates that repeat ids.
GOOD_PATCHES = st.sampled_from([
    {}, {"env": {"E": "v"}}, {"env": {"E": None}}, {"runtime": {"kind": "dokcer"}},
    {"steps": [{"name": "t", "run": ["y"]}]}, {"paths": {"run_dir": "/srv/same"}},
    {"trainer": {"axolotl": {"config": {"lr": 0.1, "output_dir": "/srv/o"}}}},
    {"trainer": None}, {"secrets": ["E"]}, {"slurm": {"time": 5}}])
GOOD_AXES = st.one_of(
    st.dictionaries(st.sampled_from(["x", "y", "z1", "7"]), GOOD_PATCHES, min_size=1,
                    max_size=3),
    st.fixed_dictionaries({"set": st.sampled_from(["env.A", "steps.name", "steps",
                                                   "trainer.axolotl.config.lr", "paths.run_dir",
                                                   "runtime.kind", "slurm.time"]),
                           "values": st.lists(st.integers(0, 3), min_size=1, max_size=3,
                                              unique=True)}))
GOOD_MATRIX = st.fixed_dictionaries(
    {"axes": st.dictionaries(st.sampled_from(["a", "b", "c"]), GOOD_AXES, min_size=1,
                             max_size=3)},
    optional={"exclude": st.lists(st.dictionaries(st.sampled_from(["a", "b", "z"]),
                                                  st.sampled_from(["x", "y", 1, 2, "q"]),
                                                  min_size=1, max_size=2), max_size=2),
              "runs": st.dictionaries(st.sampled_from(["long", "n-1"]), GOOD_PATCHES,
                                      max_size=2),
              "id": st.sampled_from(["{id}-{a}", "{id}-{a}-{b}-{c}", "{id}", "x{b}"]),
              "max_parallel": st.integers(1, 3), "max_runs": st.integers(1, 30)})


@pytest.mark.slow
@FUZZ
@given(BASES, st.one_of(GOOD_MATRIX, MATRIX))
def test_any_matrix_gives_runs_or_located_problems(base: dict[str, Any], matrix: Any):
    text = json.dumps({**base, "matrix": matrix}, indent=1, ensure_ascii=False)
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder):
        Path("run.yaml").write_text(text)
        Path("cfg.yaml").write_text("base_model: m\nlearning_rate: 0.1\n")
        result = compile_files([Path("run.yaml")])
    lines = text.count("\n") + 1
    for problem in result.diagnostics:
        assert problem.file in ("run.yaml", "cfg.yaml"), problem
        assert 1 <= problem.line <= lines and problem.column >= 1, problem
    assert bool(result.diagnostics) != bool(result.scripts)
