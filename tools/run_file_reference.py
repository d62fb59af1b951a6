"""The run file's reference page, made from the JSON Schema obc validates run files with, so
that the page cannot drift from it: tools/mkdocs_hooks.py writes it into the docs site at
build time, and it never exists in git.

`python3 -m tools.run_file_reference` prints the page."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

Schema = dict[str, Any]

INTRO = """\
# Run-file reference

Every field of the run file, generated from `schemas/run.schema.json` (the schema `obc
compile` and `obc validate` check a run file against; `obc schema` prints it) each time
the site is built. A key written `a.b` is `b` inside `a`; `a[].b` is `b` in each item of
the list `a`; `a.<NAME>` is any key of the mapping `a`. The rules the schema cannot
express, and the defaults that depend on other fields, are in [The run file](run-file.md).
"""


@dataclass(frozen=True)
class Row:
    """One field: its dotted key, what it takes, its default and what it means."""

    key: str
    type: str
    default: str
    required: bool
    description: str


def resolve(schema: Schema, root: Schema) -> Schema:
    """Return `schema` with its local `$ref` ("#/definitions/NAME") replaced by the
    definition, the referring schema's own keys (a description) winning."""
    ref = schema.get("$ref")
    if not ref:
        return schema
    target = root
    for part in ref.removeprefix("#/").split("/"):
        target = target[part]
    return {**resolve(target, root), **{k: v for k, v in schema.items() if k != "$ref"}}


def variants(schema: Schema) -> list[Schema]:
    """The alternatives a value may take: oneOf's and anyOf's branches, and an if's
    `then` and `else`."""
    return [*schema.get("oneOf", ()), *schema.get("anyOf", ()),
            *(schema[key] for key in ("then", "else") if key in schema)]


def type_of(schema: Schema, root: Schema) -> str:
    """What a value of `schema` is, in words: `a` | `b` for an enum, "list of …",
    "mapping of …", alternatives joined by "or"."""
    schema = resolve(schema, root)
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " \\| ".join(f"`{value}`" for value in schema["enum"])
    if "oneOf" in schema or "anyOf" in schema:
        return " or ".join(type_of(branch, root) for branch in variants(schema))
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {type_of(schema.get('items', {}), root)}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"mapping of {type_of(schema['additionalProperties'], root)}"
    return " or ".join(kind) if isinstance(kind, list) else kind


def pattern_key(pattern: str) -> str:
    """A patternProperties pattern as a key: `^x-` is `x-*`."""
    key = pattern.removeprefix("^")
    return key.removesuffix("$") if key.endswith("$") else key + "*"


def iter_rows(schema: Schema, root: Schema, prefix: str = "") -> Iterator[Row]:
    """Every field under `schema`, depth first in the schema's order: its properties, then
    those of the list items, mapping values and alternatives it holds."""
    schema = resolve(schema, root)
    required = set(schema.get("required", ()))
    for key, written in schema.get("properties", {}).items():
        field = resolve(written, root)
        default = f"`{json.dumps(field['default'])}`" if "default" in field else ""
        name = prefix + key
        yield Row(name, type_of(field, root), default, key in required,
                  field.get("description", ""))
        yield from iter_nested(field, root, name)
    for pattern, written in schema.get("patternProperties", {}).items():
        field = resolve(written, root)
        yield Row(prefix + pattern_key(pattern), type_of(field, root) if field.get("type")
                  else "any", "", False, field.get("description", ""))
    for branch in variants(schema):
        yield from iter_rows(branch, root, prefix)


def iter_nested(field: Schema, root: Schema, name: str) -> Iterator[Row]:
    """The fields inside the value of the field `name`: an object's, each list item's
    (`name[].`), each mapping value's (`name.<NAME>.`)."""
    values = field.get("additionalProperties")
    if field.get("type") == "array" and isinstance(field.get("items"), dict):
        yield from iter_rows(field["items"], root, name + "[].")
    elif isinstance(values, dict):
        yield from iter_rows(values, root, name + ".<NAME>.")
    if "properties" in field or variants(field):
        yield from iter_rows({k: v for k, v in field.items() if k != "additionalProperties"},
                             root, name + ".")


def markdown(text: str) -> str:
    """`text` as a table cell's Markdown: outside `code`, characters Markdown or HTML would
    read as markup are escaped; `|` everywhere, as it ends a cell."""
    parts = re.split(r"(`[^`]*`)", text)
    for index in range(0, len(parts), 2):
        part = parts[index].replace("\\", "\\\\").replace("&", "&amp;")
        part = part.replace("<", "&lt;").replace(">", "&gt;")
        parts[index] = re.sub(r"([*_\[\]])", r"\\\1", part)
    return "".join(parts).replace("|", "\\|")


def table_row(row: Row) -> str:
    """One row of the reference table."""
    required = "**required.** " if row.required else ""
    return (f"| `{row.key}` | {row.type} | {row.default} | "
            f"{required}{markdown(row.description)} |")


def reference(schema: Schema) -> str:
    """The reference page of the run file whose JSON Schema is `schema`."""
    rows = "\n".join(table_row(row) for row in iter_rows(schema, schema))
    return (f"{INTRO}\n{markdown(schema.get('description', ''))}\n\n"
            f"| key | type | default | meaning |\n|---|---|---|---|\n{rows}\n")


if __name__ == "__main__":
    from compiler.core.resources import run_schema

    print(reference(run_schema()), end="")
