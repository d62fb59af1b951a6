"""The `matrix` block of a run file, read and checked: its axes, each label's patch, the
excluded combinations, the named extra runs and the id template (docs/sweeps.md).

The schema has checked the block's shape; this adds what it cannot say, each problem at its
place in the run file. expand.py turns the result into runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..core.diagnostics import Diagnostic, did_you_mean, show
from ..core.text import quoted
from ..model.defaults import DEFAULT_MAX_RUNS
from ..model.job import SweepRun
from ..read.load import Path_, Source

MATRIX: Path_ = ("matrix",)
# Placeholders of the id template, and the names they may not use for an axis.
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
SWEEP_ID = "id"
RESERVED_AXES = (SWEEP_ID, "index")  # {id} is the sweep's; index and id head runs.tsv
# A patch makes a run out of the run file; the run's id comes from its labels.
UNPATCHABLE = ("id", "matrix")


@dataclass(frozen=True, slots=True)
class Value:
    """One label of an axis, or one named extra run: the patch it applies to the run file.

    `tree` is merged at `root` of the run file (the dotted path of `set:`, or the top for a
    whole-file patch); it is written in the run file at `at`, and a `set:` path at `set_at`.
    """

    label: str
    root: Path_
    tree: Any
    at: Path_
    set_at: Path_ | None = None

    @property
    def patch(self) -> Any:
        """The whole-file merge patch: `tree` nested under `root`."""
        patch = self.tree
        for key in reversed(self.root):
            patch = {key: patch}
        return patch


@dataclass(slots=True)
class Member:
    """One run of a sweep: its Source (None when it could not be built), and its problems."""

    id: str
    values: tuple[Value, ...]
    labels: tuple[tuple[str, str], ...]
    name: str | None
    source: Source | None = None
    run: SweepRun | None = None
    problems: list[Diagnostic] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Axis:
    name: str
    values: tuple[Value, ...]

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(value.label for value in self.values)


@dataclass(frozen=True, slots=True)
class Matrix:
    """What the matrix block asks for; `exclude` holds the labels each entry matches, by
    axis."""

    axes: tuple[Axis, ...]
    extra: tuple[Value, ...]
    exclude: tuple[dict[str, frozenset[str]], ...]
    template: str
    max_parallel: int | None
    max_runs: int


def read_matrix(source: Source, schema_problems: list[Diagnostic]) -> \
        tuple[Matrix | None, list[Diagnostic]]:
    """Return the matrix of a run file whose block passed the schema (else its problems)."""
    if schema_problems:
        return None, schema_problems
    block = source.data["matrix"]
    axes = tuple(_axis(name, spec) for name, spec in block.get("axes", {}).items())
    extra = tuple(Value(name, (), patch, (*MATRIX, "runs", name))
                  for name, patch in block.get("runs", {}).items())
    default = "".join([f"{{{SWEEP_ID}}}", *(f"-{{{axis.name}}}" for axis in axes)])
    matrix = Matrix(axes, extra, tuple(_exclusion(entry) for entry in block.get("exclude", ())),
                    block.get("id", default), block.get("max_parallel"),
                    block.get("max_runs", DEFAULT_MAX_RUNS))
    problems = [source.problem(path, message, hint, key=at_key)
                for path, at_key, message, hint in _broken_rules(block, matrix)]
    return (None if problems else matrix), problems


def _axis(name: str, spec: dict[str, Any]) -> Axis:
    at: Path_ = (*MATRIX, "axes", name)
    if "set" not in spec:
        return Axis(name, tuple(Value(label, (), patch, (*at, label))
                                for label, patch in spec.items()))
    root = tuple(spec["set"].split("."))
    values = spec["values"]
    if isinstance(values, dict):
        pairs = [(label, value, (*at, "values", label)) for label, value in values.items()]
    else:
        pairs = [(str(value), value, (*at, "values", i)) for i, value in enumerate(values)]
    return Axis(name, tuple(Value(label, root, value, where, (*at, "set"))
                            for label, value, where in pairs))


def _exclusion(entry: dict[str, Any]) -> dict[str, frozenset[str]]:
    return {axis: frozenset(map(str, labels if isinstance(labels, list) else [labels]))
            for axis, labels in entry.items()}


Broken = tuple[Path_, bool, str, str | None]


def _broken_rules(block: dict[str, Any], matrix: Matrix) -> Iterator[Broken]:
    if not matrix.axes and not matrix.extra:
        yield MATRIX, False, "a matrix needs axes, runs, or both", None
    for axis in matrix.axes:
        yield from _axis_problems(axis)
    for value in matrix.extra:
        yield from _patch_problems(value)
    yield from _exclude_problems(block.get("exclude", ()), matrix.axes)
    yield from _template_problems(matrix)


def _axis_problems(axis: Axis) -> Iterator[Broken]:
    if axis.name in RESERVED_AXES:
        yield (*MATRIX, "axes", axis.name), True, f"an axis cannot be named {quoted(axis.name)}: " \
            "{id} is the sweep's id, and index and id head the columns of runs.tsv", None
    seen: dict[str, Value] = {}
    for value in axis.values:
        if value.label in seen:  # a list of values can name one twice: [1, "1"]
            yield value.at, False, f"label {quoted(value.label)} is already a label of axis " \
                f"{quoted(axis.name)}", "each value of a list is its own label; give each once"
        seen.setdefault(value.label, value)
        yield from _patch_problems(value)


def _patch_problems(value: Value) -> Iterator[Broken]:
    """A patch may not give a run its id, nor a matrix of its own."""
    if value.set_at is not None:
        if value.root[0] in UNPATCHABLE:
            yield value.set_at, False, f"set cannot change {value.root[0]}: a run's id " \
                "comes from its labels (matrix.id), and a run has no matrix", None
        return
    for key in UNPATCHABLE:
        if isinstance(value.tree, dict) and key in value.tree:
            yield (*value.at, key), True, f"a patch cannot change {key}: a run's id comes " \
                "from its labels (matrix.id), and a run has no matrix", None


def _exclude_problems(entries: list[dict[str, Any]], axes: tuple[Axis, ...]) -> \
        Iterator[Broken]:
    """Every axis and label an exclusion names must exist: a typo would exclude nothing."""
    by_name = {axis.name: axis for axis in axes}
    for i, entry in enumerate(entries):
        for name, labels in entry.items():
            at: Path_ = (*MATRIX, "exclude", i, name)
            axis = by_name.get(name)
            if axis is None:
                yield at, True, f"no axis is named {show(name)}" \
                    f"{did_you_mean(name, by_name)}", None
                continue
            listed = labels if isinstance(labels, list) else [labels]
            for j, label in enumerate(listed):
                if str(label) not in axis.labels:
                    where = (*at, j) if isinstance(labels, list) else at
                    yield where, False, f"axis {quoted(name)} has no label {show(str(label))}" \
                        f"{did_you_mean(str(label), axis.labels)}", \
                        f"its labels: {', '.join(axis.labels)}"


def _template_problems(matrix: Matrix) -> Iterator[Broken]:
    names = [SWEEP_ID, *(axis.name for axis in matrix.axes)]
    for name in PLACEHOLDER.findall(matrix.template):
        if name not in names:
            yield (*MATRIX, "id"), False, f"{{{name}}} names no axis" \
                f"{did_you_mean(name, names)}", "the placeholders: " \
                + ", ".join(f"{{{n}}}" for n in names)

