"""Where obc's own data files are: the Jinja templates, the JSON Schema of run files and those
of the trainers' configs."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

# compiler/, which holds this package (core/).
_PACKAGE = Path(__file__).parent.parent


def data_dir(name: str) -> Path:
    """Return obc's folder `name`: inside the package in a wheel, beside it in a checkout."""
    packaged = _PACKAGE / name
    return packaged if packaged.is_dir() else _PACKAGE.parent / name


def schema_path() -> Path:
    """Return the path of the run file's JSON Schema."""
    return data_dir("schemas") / "run.schema.json"


@cache
def run_schema() -> dict[str, Any]:
    """Return the run file's JSON Schema, read once per process."""
    return json.loads(schema_path().read_text(encoding="utf-8"))


@cache
def trainer_schema_versions(trainer: str) -> tuple[str, ...]:
    """Return the versions of `trainer` whose config schema obc has (schemas/trainers/),
    oldest first; the folder is listed once per process, not once per run file."""
    return tuple(sorted((path.stem.removeprefix(f"{trainer}-")
                   for path in (data_dir("schemas") / "trainers").glob(f"{trainer}-*.json")),
                  key=lambda version: tuple(map(int, version.split(".")))))


@cache
def trainer_schema(trainer: str, version: str) -> dict[str, Any]:
    """Return the JSON Schema of `trainer`'s config at `version`, read once per process."""
    path = data_dir("schemas") / "trainers" / f"{trainer}-{version}.json"
    return json.loads(path.read_text(encoding="utf-8"))
