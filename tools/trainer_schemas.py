"""Write the JSON Schema of a trainer's config, made from the trainer's own models, into
schemas/trainers/<trainer>-<major.minor>.json (README, "Axolotl's config, checked").

    python3 -m tools.trainer_schemas axolotl /opt/obc-axolotl

The trainer is imported only here, in its own venv (given), never by obc: the venv's Python
prints the schema, and this keeps what a check needs (no descriptions or defaults), adds
what the trainer's validators enforce beyond its models, and writes it sorted, so that the
same release always gives the same file.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas" / "trainers"

# Run by the trainer's venv: prints its version and the schema of the config it validates.
# An enum whose values JSON cannot hold (torch dtypes) is left unchecked rather than guessed.
AXOLOTL_PROGRAM = """
import json, sys
from importlib.metadata import version
from pydantic.json_schema import GenerateJsonSchema
from axolotl.utils.schemas.config import AxolotlInputConfig

class Schema(GenerateJsonSchema):
    def enum_schema(self, schema):
        try:
            return super().enum_schema(schema)
        except Exception:
            return {}

json.dump({"version": version("axolotl"),
           "schema": AxolotlInputConfig.model_json_schema(schema_generator=Schema),
           "fields": list(AxolotlInputConfig.model_fields)},
          sys.stdout)
"""

# An adapter is one of the built-in ones, unless a plugin adds its own (Axolotl's
# utils/schemas/peft.py, validate_adapter).
AXOLOTL_ADAPTERS = ["lora", "qlora", "llama-adapter", "", None]

# Keywords that say nothing about validity, dropped to keep the stored schema small.
ANNOTATIONS = frozenset(("title", "description", "default", "examples", "deprecated", "help"))


def axolotl_schema(venv: Path) -> tuple[str, dict[str, Any]]:
    """Return Axolotl's major.minor version in `venv` and the schema obc checks configs by."""
    found = json.loads(subprocess.run(
        [str(venv / "bin" / "python"), "-c", AXOLOTL_PROGRAM], check=True,
        capture_output=True, text=True).stdout)
    schema = without_annotations(found["schema"])
    # A key the config must have may come from the command line instead (`axolotl train
    # CONFIG --learning-rate 1e-4`, trainer.axolotl.args): Axolotl says if it is missing.
    del schema["required"]
    # Unless the config loads plugins, which add keys and adapters of their own: a key is
    # one of the config's fields, by its name or its alias (Axolotl drops any other key, so
    # a misspelt one is silently ignored), and the adapter is a built-in one.
    keys = sorted({*schema["properties"], *found["fields"]})
    schema["if"] = {"required": ["plugins"]}
    schema["else"] = {"propertyNames": {"enum": keys},
                      "properties": {"adapter": {"enum": AXOLOTL_ADAPTERS}}}
    schema["$comment"] = (f"Axolotl {found['version']}'s input config, made by "
                          "python3 -m tools.trainer_schemas; do not edit")
    return ".".join(found["version"].split(".")[:2]), schema


def without_annotations(schema: Any) -> Any:
    """`schema` without the keywords that only describe; a property named like one stays."""
    if isinstance(schema, list):
        return [without_annotations(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {key: (value if key in {"const", "enum"} else
                  {name: without_annotations(sub) for name, sub in value.items()}
                  if key in ("properties", "$defs") else without_annotations(value))
            for key, value in schema.items() if key not in ANNOTATIONS}


def dump(schema: dict[str, Any]) -> str:
    """The stored text, sorted: one line per property and per definition, so that a new
    release's diff shows which of them changed."""
    def line(value: Any) -> str:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)

    def block(mapping: dict[str, Any], indent: str) -> str:
        return "{\n" + ",\n".join(f"{indent} {line(key)}: {line(value)}"
                                   for key, value in sorted(mapping.items())) + f"\n{indent}}}"

    top = [f' {line(key)}: {block(value, " ") if key in ("properties", "$defs") else line(value)}'
           for key, value in sorted(schema.items())]
    return "{\n" + ",\n".join(top) + "\n}\n"


TRAINERS = {"axolotl": axolotl_schema}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trainer", choices=sorted(TRAINERS))
    parser.add_argument("venv", type=Path, help="a venv with the trainer's release installed")
    args = parser.parse_args(argv)
    version, schema = TRAINERS[args.trainer](args.venv)
    path = SCHEMAS / f"{args.trainer}-{version}.json"
    path.write_text(dump(schema), encoding="utf-8")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
