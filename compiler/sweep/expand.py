"""Stage 1b, expand: a run file with a `matrix` → one Source per run, as if each run were a
run file of its own (docs/sweeps.md).

Each run is the file without its matrix, patched by one label of every axis (or by a named
extra run's patch), with the id its labels make. Its positions are the file's: a value a
patch put there points at the patch, so every later stage, and every diagnostic, works on a
run as on a run file. A file without a matrix is left as it is.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import ChainMap
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from ..core.diagnostics import Diagnostic, describe_value, field_path
from ..core.text import visible
from ..model.job import SweepChange, SweepRun
from ..model.trainers import config_field
from ..read.config_files import ConfigFiles
from ..read.load import Mark, Path_, Source
from ..read.sources import Embedding
from ..validate.rules.common import get
from ..validate.validate import matrix_problems
from .matrix import MATRIX, PLACEHOLDER, SWEEP_ID, Matrix, Member, Value, read_matrix
from .merge import MISSING, leaf_changes, merge_patch
from .rules import id_problems

# How many combinations of labels obc enumerates, before exclusions; max_runs bounds the runs.
MAX_COMBINATIONS = 100_000
SHOWN_VALUE_LENGTH = 60


@dataclass(frozen=True, slots=True)
class Expansion:
    """The runs a run file's matrix makes, in order (the product, then the named runs)."""

    id: str
    file: str
    id_mark: Mark
    axes: tuple[str, ...]
    members: tuple[Member, ...]
    combinations: int
    excluded: int
    max_parallel: int | None

    def name_runs(self, found: list[tuple[Member, list[Diagnostic]]]) -> list[Diagnostic]:
        """Each distinct problem once, saying which runs have it (nothing when all do)."""
        runs_of: dict[Diagnostic, list[str]] = {}
        for member, problems in found:
            for problem in problems:
                runs_of.setdefault(problem, []).append(member.id)
        return sorted(
            problem if len(ids) == len(self.members) else
            replace(problem, message=f"{_which_runs(ids)}: {problem.message}")
            for problem, ids in runs_of.items())


def _which_runs(ids: list[str]) -> str:
    if len(ids) == 1:
        return f"in run {ids[0]}"
    shown = ", ".join(ids[:3])
    return f"in runs {shown}" + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")


def expand(source: Source, embedding: Embedding) -> tuple[Expansion | None, list[Diagnostic]]:
    """Return the runs of a run file with a matrix (None for a file without one), or the
    problems of its matrix block."""
    data = source.data
    if not isinstance(data, dict) or "matrix" not in data:
        return None, []
    matrix, problems = read_matrix(source, matrix_problems(source))
    if matrix is None:
        return None, problems
    members, combinations, problems = _members(source, matrix)
    problems += id_problems(source, matrix, members)
    if problems:
        return None, problems
    base = _Base(source, matrix, ConfigFiles(source, embedding))
    for member in members:
        base.build(member)
    return Expansion(data["id"], source.file, source.mark(("id",)),
                     tuple(axis.name for axis in matrix.axes), tuple(members), combinations,
                     combinations - (len(members) - len(matrix.extra)),
                     matrix.max_parallel), []


def _members(source: Source, matrix: Matrix) -> tuple[list[Member], int, list[Diagnostic]]:
    """The runs, in order, with their ids: or the problem of a matrix that makes too many or
    none."""
    combinations = math.prod(len(axis.values) for axis in matrix.axes) if matrix.axes else 0
    if combinations > MAX_COMBINATIONS:
        return [], combinations, [source.problem((*MATRIX, "axes"), f"the axes make "
                                           f"{combinations:,} combinations; obc enumerates at "
                                           f"most {MAX_COMBINATIONS:,}", "use fewer axes or "
                                           "labels, or several run files")]
    members = [Member(_run_id(source, matrix, combo), combo,
                      tuple((axis.name, value.label) for axis, value in
                            zip(matrix.axes, combo, strict=True)), None)
               for combo in _combinations(matrix)]
    members += [Member(f"{source.data['id']}-{value.label}", (value,), (), value.label)
                for value in matrix.extra]
    if len(members) > matrix.max_runs:
        at = (*MATRIX, "max_runs") if "max_runs" in source.data["matrix"] else MATRIX
        return [], combinations, [source.problem(at, f"the matrix makes {len(members):,} "
                                           f"runs, more than max_runs ({matrix.max_runs:,})",
                                           "exclude some, or raise matrix.max_runs (at most "
                                           "10,000)")]
    if not members:
        return [], combinations, [source.problem((*MATRIX, "exclude"), "every combination "
                                           "is excluded, and there are no named runs")]
    return members, combinations, []


def _combinations(matrix: Matrix) -> Iterator[tuple[Value, ...]]:
    if not matrix.axes:
        return
    for combo in itertools.product(*(axis.values for axis in matrix.axes)):
        labels = {axis.name: value.label for axis, value in zip(matrix.axes, combo, strict=True)}
        if not any(all(labels[name] in wanted for name, wanted in entry.items())
                   for entry in matrix.exclude):
            yield combo


def _run_id(source: Source, matrix: Matrix, combo: tuple[Value, ...]) -> str:
    labels = {axis.name: value.label for axis, value in zip(matrix.axes, combo, strict=True)}
    labels[SWEEP_ID] = str(source.data.get("id"))
    return PLACEHOLDER.sub(lambda match: labels[match.group(1)], matrix.template)


class _Base:
    """The file without its matrix, and the positions of every patch, found once for all
    the runs built from it."""

    def __init__(self, source: Source, matrix: Matrix, configs: ConfigFiles) -> None:
        self.source, self.matrix, self.configs = source, matrix, configs
        self.data = {key: value for key, value in source.data.items() if key != "matrix"}
        # The trainer's config field (trainer.NAME.config): a file it names is read and
        # patched as the mapping it holds.
        self.config_field = config_field(self.data)
        self.values, self.keys, self.raw = ({}, {}, {})
        self.patches: dict[Path_, tuple[dict, dict, dict]] = {
            value.at: ({}, {}, {}) for axis in matrix.axes for value in axis.values}
        self.patches.update({value.at: ({}, {}, {}) for value in matrix.extra})
        for table, base, index in ((source.values, self.values, 0),
                                   (source.keys, self.keys, 1), (source.raw, self.raw, 2)):
            for path, mark in table.items():
                if path[:1] != MATRIX:
                    base[path] = mark
                    continue
                at = next((path[:n] for n in (3, 4, 5) if path[:n] in self.patches), None)
                if at is not None:
                    self.patches[at][index][path[len(at):]] = mark

    def build(self, member: Member) -> None:
        """Give `member` its Source and SweepRun, or the problems that kept it from them."""
        loaded: dict[str, dict] = {}

        def expand_config(path: Path_, target: Any) -> dict | None:
            if path == self.config_field and isinstance(target, str):
                loaded[target] = self.configs.load(target)
                return loaded[target]
            return None

        data: Any = {**self.data, "id": member.id}
        for value in member.values:
            member.problems += self._crossing(value, data)
            try:
                data = merge_patch(data, value.patch, expand_config)
            except ConfigFiles.Unreadable as error:
                member.problems += error.problems
        if member.problems:
            return
        member.source = self._source(member, data)
        member.run = SweepRun(self.data["id"], member.labels, member.name,
                              self._changes(data, loaded), next(iter(loaded), None))

    def _crossing(self, value: Value, data: Any) -> list[Diagnostic]:
        """`set` reaches a field through mappings: one that is a list or a scalar in this run
        would be replaced whole by a mapping, which is not what the dotted path says."""
        if value.set_at is None:
            return []
        node = data
        for depth in range(1, len(value.root)):
            node = node.get(value.root[depth - 1], MISSING) if isinstance(node, dict) \
                else MISSING
            path = value.root[:depth]
            if node is MISSING or node is None or (path == self.config_field and
                                                    isinstance(node, str)):
                return []  # made by the patch, or a config file, which obc reads and patches
            if not isinstance(node, dict):
                return [self.source.problem(value.set_at, f"{field_path(path)} is "
                                 f"{describe_value(node)}, not a mapping, so set cannot reach "
                                 f"{field_path(value.root)} in it",
                                 "a list is replaced whole: set the whole list, or write a "
                                 "patch")]
        return []

    def _source(self, member: Member, data: dict) -> Source:
        """The run as a Source: the file's positions, with each patch's over them."""
        values: dict[Path_, Mark] = {}
        keys: dict[Path_, Mark] = {}
        raw: dict[Path_, str] = {}
        for value in member.values:
            patch_values, patch_keys, patch_raw = self.patches[value.at]
            if value.set_at is not None:
                written = self.source.values[value.set_at]
                for depth in range(1, len(value.root)):
                    values.setdefault(value.root[:depth], written)
                    keys.setdefault(value.root[:depth], written)
            values.update({value.root + rest: mark for rest, mark in patch_values.items()
                           if value.root + rest})
            keys.update({value.root + rest: mark for rest, mark in patch_keys.items()})
            raw.update({value.root + rest: text for rest, text in patch_raw.items()})
            if value.set_at is not None:
                keys[value.root] = self.source.values[value.set_at]
        values[("id",)] = self._id_mark(member)
        raw = {path: text for path, text in ChainMap(raw, self.raw).items()
               if _is_scalar(data, path)}
        return Source(self.source.file, self.source.directory, data,
                      ChainMap(values, self.values), ChainMap(keys, self.keys), raw,
                      self.source.sha256)

    def _id_mark(self, member: Member) -> Mark:
        if member.name is not None:
            return self.source.mark((*MATRIX, "runs", member.name), key=True)
        at = (*MATRIX, "id") if "id" in self.source.data["matrix"] else ("id",)
        return self.source.mark(at)

    def _changes(self, data: dict, loaded: dict[str, dict]) -> tuple[SweepChange, ...]:
        """What the patches changed, leaf by leaf: a config file they patched counts as its
        content."""
        before: Any = self.data
        field = self.config_field
        config = None if field is None else get(before, *field)
        if isinstance(config, str) and config in loaded:
            assert field is not None
            trainer, name = before["trainer"], field[1]
            before = {**before, "trainer": {**trainer, name: {
                **trainer[name], "config": loaded[config]}}}
        return tuple(SweepChange(field_path(path), _shown(old, "(unset)"),
                                 _shown(new, "(deleted)"))
                     for path, old, new in leaf_changes(before, data) if path != ("id",))


def _is_scalar(data: Any, path: Path_) -> bool:
    for key in path:
        in_mapping = isinstance(data, dict) and isinstance(key, str) and key in data
        in_list = isinstance(data, list) and isinstance(key, int) and key < len(data)
        if not (in_mapping or in_list):
            return False
        data = data[key]
    return not isinstance(data, dict | list)


def _shown(value: Any, missing: str) -> str:
    """A value as the header shows it: JSON, on one line of visible text, cut short."""
    if value is MISSING:
        return missing
    text = visible(_json(value))
    return text if len(text) <= SHOWN_VALUE_LENGTH else text[:SHOWN_VALUE_LENGTH - 3] + "..."


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": "))

