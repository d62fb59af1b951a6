"""One home per default (compiler/model/defaults.py): every default the run file's schema
declares, which editors show, is the one obc applies, taken from that one module."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from compiler.model import defaults
from tests.conftest import REPO


def _schema_defaults(schema: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """Each `default` of the schema, by the run file's field path (`runtime.gpus`)."""
    if isinstance(schema, dict):
        if "default" in schema:
            yield ".".join(path), schema["default"]
        for key, value in schema.items():
            inner = path if key in ("items", "oneOf", "anyOf", "allOf") else (*path, key)
            yield from _schema_defaults(value, inner if key != "properties" else path)
    elif isinstance(schema, list):
        for item in schema:
            yield from _schema_defaults(item, path)


def test_the_schema_declares_exactly_the_defaults_obc_applies():
    schema = json.loads((REPO / "schemas" / "run.schema.json").read_text(encoding="utf-8"))
    assert dict(_schema_defaults(schema)) == defaults.RUN_FILE_DEFAULTS

