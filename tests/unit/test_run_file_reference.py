"""tools/run_file_reference.py: the run-file reference page is the schema's, field for field,
so that a field added to the schema is on the page without anyone writing it."""

from __future__ import annotations

import copy

import pytest

from compiler.core.resources import run_schema
from tools.run_file_reference import iter_rows, markdown, reference

SCHEMA = {
    "description": "A tiny run file.",
    "type": "object",
    "required": ["kind"],
    "properties": {
        "kind": {"description": "Where it runs.", "enum": ["docker", "native"]},
        "gpus": {"description": "GPUs.", "default": "all",
                 "oneOf": [{"enum": ["all", "none"]},
                           {"type": "array", "items": {"type": "integer"}}]},
        "venv": {"$ref": "#/definitions/path", "description": "The venv."},
        "mounts": {"type": "array", "items": {
            "type": "object", "required": ["target"],
            "properties": {"target": {"type": "string", "description": "Inside."}}}},
        "env": {"type": "object", "additionalProperties": {"anyOf": [
            {"type": "string"},
            {"type": "object", "properties": {"value": {"type": "string",
                                                        "description": "The value."}}}]}},
    },
    "patternProperties": {"^x-": {"description": "Ignored."}},
    "definitions": {"path": {"type": "string", "description": "A path."}},
}


def rows(schema: dict) -> dict[str, tuple[str, str, bool, str]]:
    return {row.key: (row.type, row.default, row.required, row.description)
            for row in iter_rows(schema, schema)}


def test_a_field_added_to_the_schema_is_on_the_page():
    schema = copy.deepcopy(SCHEMA)
    assert "`shm_size`" not in reference(schema)
    schema["properties"]["shm_size"] = {"type": "string", "description": "Size of /dev/shm."}
    assert "| `shm_size` | string |  | Size of /dev/shm. |" in reference(schema)


def test_an_enum_lists_its_values_and_a_default_is_shown():
    found = rows(SCHEMA)
    assert found["kind"][0] == "`docker` \\| `native`"
    assert found["gpus"][:2] == ("`all` \\| `none` or list of integer", '`"all"`')


def test_a_required_field_is_marked_and_only_it():
    page = reference(SCHEMA)
    assert "| `kind` | `docker` \\| `native` |  | **required.** Where it runs. |" in page
    assert "| `mounts[].target` | string |  | **required.** Inside. |" in page
    assert [key for key, row in rows(SCHEMA).items() if row[2]] == ["kind", "mounts[].target"]


def test_a_ref_is_followed_and_its_own_description_wins():
    assert rows(SCHEMA)["venv"] == ("string", "", False, "The venv.")


def test_list_items_mapping_values_variants_and_patterns_have_rows():
    assert list(rows(SCHEMA)) == ["kind", "gpus", "venv", "mounts", "mounts[].target", "env",
                                  "env.<NAME>.value", "x-*"]
    assert rows(SCHEMA)["env"][0] == "mapping of string or object"


@pytest.mark.parametrize(("text", "cell"), [
    ("OUT/<id>/ holds it", "OUT/&lt;id&gt;/ holds it"),
    ("*_API_KEY, *PASSWORD*", "\\*\\_API\\_KEY, \\*PASSWORD\\*"),
    ("a100|h100 or `a|b`", "a100\\|h100 or `a\\|b`"),
    ("as `flag <PATH>` after", "as `flag <PATH>` after"),
])
def test_a_description_reads_as_written(text, cell):
    assert markdown(text) == cell


def test_every_field_of_obcs_schema_has_a_description():
    assert [row.key for row in iter_rows(run_schema(), run_schema())
            if not row.description] == []
