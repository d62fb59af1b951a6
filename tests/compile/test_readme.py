"""The README's run-file reference is generated from the schema, so the two cannot drift.

After changing schemas/run.schema.json, rewrite the README's block with:

    python -m tests.compile.test_readme
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from compiler.core.resources import run_schema
from tests.conftest import REPO

README = REPO / "README.md"
BEGIN = ("<!-- run-file reference: generated from schemas/run.schema.json by "
         "tests/compile/test_readme.py -->")
END = "<!-- end of run-file reference -->"


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref:
        target = run_schema()["definitions"][ref.rsplit("/", 1)[1]]
        return {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _type(schema: dict[str, Any]) -> str:
    schema = _resolve(schema)
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    if "oneOf" in schema:
        return " or ".join(_type(branch) for branch in schema["oneOf"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"mapping of {_type(schema['additionalProperties'])}"
    return " or ".join(kind) if isinstance(kind, list) else kind


def _rows(properties: dict[str, Any], prefix: str) -> Iterator[str]:
    for key, written in properties.items():
        schema = _resolve(written)
        name = prefix + key
        default = f"`{json.dumps(schema['default'])}`" if "default" in schema else ""
        description = schema.get("description", "").replace("|", "\\|")
        yield f"| `{name}` | {_type(schema)} | {default} | {description} |"
        items = _resolve(schema.get("items", {}))
        if schema.get("type") == "object" and "properties" in schema:
            yield from _rows(schema["properties"], name + ".")
        elif "properties" in items:
            yield from _rows(items["properties"], name + "[].")


def reference() -> str:
    """Return the README block: one table row per field of the run file."""
    rows = "\n".join(_rows(run_schema()["properties"], ""))
    return (f"{BEGIN}\n| key | type | default | meaning |\n|---|---|---|---|\n{rows}\n"
            "| `x-*` | any | | Extension keys at the top level, ignored: a place for YAML "
            f"anchors. |\n{END}")


def test_the_readme_reference_is_the_schema():
    text = README.read_text(encoding="utf-8")
    block = re.search(re.escape(BEGIN) + ".*?" + re.escape(END), text, re.S)
    assert block, "README.md has no run-file reference block"
    assert block.group(0) == reference(), "run: python -m tests.compile.test_readme"


def test_every_field_has_a_description():
    for row in reference().splitlines()[3:-1]:
        assert not row.endswith("|  |"), row


if __name__ == "__main__":
    text = README.read_text(encoding="utf-8")
    new, count = re.subn(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: reference(),
                         text, flags=re.S)
    README.write_text(new if count else text + "\n" + reference() + "\n", encoding="utf-8")


def test_the_readme_quotes_the_generated_scripts_as_they_are():
    text = README.read_text(encoding="utf-8")
    quoted = text.split("The container version of a step (from `out/docker-qlora/job.sh`):")[1]
    snippet = quoted.split("```sh\n", 1)[1].split("```", 1)[0]
    script = (REPO / "out/docker-qlora/job.sh").read_text(encoding="utf-8")
    assert [line for line in snippet.splitlines() if line not in script] == []
    steps = text.split("and `obc_steps`, one line a step:")[1]
    steps = steps.split("```sh\n", 1)[1].split("```")[0]
    eval_script = (REPO / "out/steps-eval/job.sh").read_text(encoding="utf-8")
    assert [line for line in steps.splitlines() if line not in eval_script] == []
