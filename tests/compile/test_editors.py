"""Editor support: `obc schema` prints the committed schema, the examples point editors at it,
and every field of the schema explains itself in completion and hover."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import REPO

SCHEMA_FILE = REPO / "schemas" / "run.schema.json"
SCHEMA = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
MODELINE = "# yaml-language-server: $schema=../schemas/run.schema.json"


def test_obc_schema_prints_the_committed_schema_exactly(obc):
    outcome = obc("schema")
    assert outcome.code == 0
    assert outcome.stdout.encode() == SCHEMA_FILE.read_bytes()


def test_the_schema_is_draft_07_the_draft_editors_support_best():
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"


@pytest.mark.parametrize("example", sorted(p.name for p in (REPO / "examples").glob("*.yaml")))
def test_each_example_carries_the_schema_modeline(example):
    first_line = (REPO / "examples" / example).read_text(encoding="utf-8").splitlines()[0]
    assert first_line == MODELINE
    assert (REPO / "examples" / MODELINE.partition("$schema=")[2]).resolve() == SCHEMA_FILE


def properties(node: Any, path: str = "") -> Iterator[tuple[str, dict]]:
    """Every property schema in `node`, with its path: run file keys and their sub-keys."""
    if isinstance(node, dict):
        for keyword in ("properties", "patternProperties"):
            for name, sub in node.get(keyword, {}).items():
                child = f"{path}.{name}".lstrip(".")
                yield child, sub
                yield from properties(sub, child)
        for keyword, sub in node.items():  # items, oneOf, ...: the same field, deeper
            if keyword not in ("properties", "patternProperties", "definitions"):
                yield from properties(sub, path)
    elif isinstance(node, list):
        for item in node:
            yield from properties(item, path)


def resolve(schema: dict) -> dict:
    """Follow a local `$ref` (#/definitions/NAME) to the schema it names."""
    ref = schema.get("$ref", "")
    return SCHEMA["definitions"][ref.rpartition("/")[2]] if ref.startswith("#/definitions/") \
        else {}


def test_every_field_has_a_description():
    found = list(properties(SCHEMA))
    assert len(found) > 25  # the walk reaches the nested fields, not only the top level
    missing = [path for path, schema in found
               if not schema.get("description") and not resolve(schema).get("description")]
    assert missing == []


def test_fields_with_free_form_values_show_examples():
    with_examples = {path for path, schema in properties(SCHEMA) if schema.get("examples")}
    assert {"id", "runtime.image", "runtime.gpus", "runtime.mounts", "runtime.venv",
            "trainer.axolotl.config", "steps.run", "env", "secrets",
            "files"} <= with_examples
