"""Write the JSON Schema of a trainer's config, made from the trainer's own models, into
schemas/trainers/<trainer>-<major.minor>.json (docs/trainers.md, "Axolotl's config, checked").

    python3 -m tools.trainer_schemas axolotl /opt/obc-axolotl
    python3 -m tools.trainer_schemas trl /opt/obc-trl
    python3 -m tools.trainer_schemas llamafactory /opt/obc-llamafactory

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

# Run by the trainer's venv: prints its version and the schema of the config it validates
# when the config loads no plugin: its input config with the keys of the plugins it loads for
# every config (from 0.20 its built-in ones, context and expert parallelism), as
# utils/config's validate_config merges them (merge_input_args). An enum whose values JSON
# cannot hold (torch dtypes) is left unchecked rather than guessed.
AXOLOTL_PROGRAM = """
import json, sys
from importlib.metadata import version
from pydantic.json_schema import GenerateJsonSchema
from axolotl.integrations.config import merge_input_args

_, AxolotlInputConfig = merge_input_args()

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
    found = json.loads(_run(venv, AXOLOTL_PROGRAM))
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


# Run by a trainer's venv before its own lines: `fields(parser)` is the schema of each field of
# the dataclasses a transformers HfArgumentParser reads, from its type hint, for a trainer
# that hands a config's values to the dataclasses as they are (argparse converts only a
# string). A type it cannot say in JSON (a torch dtype, a callable) leaves the value unchecked
# rather than guessed.
DATACLASS_FIELDS = """
import dataclasses, enum, json, sys, types, typing
from importlib.metadata import version

SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean",
           type(None): "null", dict: "object", list: "array"}

def schema(hint):
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in SCALARS:
        return {"type": SCALARS[hint]}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [member.value for member in hint]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        branches = [schema(arg) for arg in args]
        # transformers takes `SchedulerType | str` and turns the string into the enum in
        # __post_init__: only the enum's values pass.
        if any("enum" in branch for branch in branches) and {"type": "string"} in branches:
            branches.remove({"type": "string"})
        return {} if {} in branches else branches[0] if len(branches) == 1 \
            else {"anyOf": branches}
    if origin in (list, tuple):
        return {"type": "array", "items": schema(args[0]) if args else {}}
    if origin is dict:
        return {"type": "object"}
    return {}

def fields(parser):
    found = {}
    for kind in parser.dataclass_types:
        hints = typing.get_type_hints(kind)
        for field in dataclasses.fields(kind):
            if field.init:
                found[field.name] = schema(hints[field.name])
    return found
"""

# Run by TRL's venv: prints TRL's version; the fields of `trl sft`'s dataclasses
# (ScriptArguments, SFTConfig, ModelConfig, DatasetMixtureConfig), as TrlParser reads a
# config; and the options of `accelerate launch` that take a value, to which `trl sft` passes
# any other key of the config as `--KEY VALUE` (trl/scripts/utils.py,
# set_defaults_with_config).
TRL_PROGRAM = DATACLASS_FIELDS + """
from accelerate.commands.launch import launch_command_parser
from trl.scripts.sft import make_parser

ARGPARSE = {"str": "string", "int": "integer", "float": "number"}
launch = {action.dest: ({"enum": list(action.choices)} if action.choices else
                        {"type": ARGPARSE[action.type.__name__]}
                        if getattr(action.type, "__name__", None) in ARGPARSE else {})
          for action in launch_command_parser()._actions
          if action.option_strings and action.nargs is None}
json.dump({"version": version("trl"), "fields": fields(make_parser()), "launch": launch},
          sys.stdout)
"""


def trl_schema(venv: Path) -> tuple[str, dict[str, Any]]:
    """Return TRL's major.minor version in `venv` and the schema of `trl sft`'s config."""
    found = json.loads(_run(venv, TRL_PROGRAM))
    options = {**found["launch"], **found["fields"],
               # TrlParser exports `env:` before it parses (parse_args_and_config).
               "env": {"type": "object"}}
    schema = {"$comment": f"TRL {found['version']}'s `trl sft` config, made by "
                          "python3 -m tools.trainer_schemas; do not edit",
              "type": "object", "properties": options,
              "propertyNames": {"enum": sorted(options)},
              # The keys trl sft passes to accelerate launch (those of no dataclass, nor
              # `env`): torchrun, which starts train on several nodes, reads none of them
              # (read/trl.py).
              "$defs": {"launch_options": {"enum": sorted(
                  set(found["launch"]) - set(found["fields"]) - {"env"})}}}
    return ".".join(found["version"].split(".")[:2]), schema


# Run by LLaMA-Factory's venv: prints its version, the fields of the dataclasses
# `llamafactory-cli train` reads its config into (hparams/parser.py, _TRAIN_ARGS: ModelArguments,
# DataArguments, its TrainingArguments on transformers' Seq2SeqTrainingArguments,
# FinetuningArguments, GeneratingArguments), and the names of those `llamafactory-cli export`
# reads its config into (_INFER_ARGS, the same but TrainingArguments). It loads a config with
# OmegaConf and hands the mapping to HfArgumentParser.parse_dict, which refuses a key of no
# dataclass.
LLAMAFACTORY_PROGRAM = DATACLASS_FIELDS + """
from transformers import HfArgumentParser
from llamafactory.hparams.parser import _INFER_ARGS, _TRAIN_ARGS

json.dump({"version": version("llamafactory"), "fields": fields(HfArgumentParser(_TRAIN_ARGS)),
           "export": list(fields(HfArgumentParser(_INFER_ARGS)))}, sys.stdout)
"""


def llamafactory_schema(venv: Path) -> tuple[str, dict[str, Any]]:
    """Return LLaMA-Factory's major.minor version in `venv` and the schema of the config of
    `llamafactory-cli train`."""
    found = json.loads(_run(venv, LLAMAFACTORY_PROGRAM))
    schema = {"$comment": f"LLaMA-Factory {found['version']}'s `llamafactory-cli train` "
                          "config, made by python3 -m tools.trainer_schemas; do not edit",
              "type": "object", "properties": found["fields"],
              "propertyNames": {"enum": sorted(found["fields"])},
              # The keys an export config may have (trainer.llamafactory.export), each
              # checked as in a training config.
              "$defs": {"export_keys": {"enum": sorted(found["export"])}}}
    return ".".join(found["version"].split(".")[:2]), schema


def _run(venv: Path, program: str) -> str:
    return subprocess.run([str(venv / "bin" / "python"), "-c", program], check=True,
                          capture_output=True, text=True).stdout


TRAINERS = {"axolotl": axolotl_schema, "trl": trl_schema,
            "llamafactory": llamafactory_schema}


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
