"""Stage 2 for a trainer's own config: checked against the JSON Schema made from the trainer's
models for the release the run file names (schemas/trainers/, made by tools/trainer_schemas.py),
without importing the trainer. Each problem is located in the config.

The trainer reads its config with pydantic, whose lax mode turns "4" into 4 and "yes" into
true, so the JSON types here mean what pydantic accepts for them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING, Any

from ..core.diagnostics import Diagnostic, describe_value, did_you_mean, show
from ..core.resources import trainer_schema, trainer_schema_versions
from ..model.defaults import DEFAULT_AXOLOTL_VERSION
from ..read.axolotl import ConfigPlace
from ..read.load import Path_
from . import fastschema
from .validate import enum_message, expected_types

if TYPE_CHECKING:  # imported when there is an error to explain: it is slow to import
    from jsonschema import ValidationError
    from jsonschema.protocols import Validator

VERSION_FIELD: Path_ = ("trainer", "axolotl", "version")

# The strings pydantic's lax mode reads as booleans, numbers and integers.
_BOOLEAN_STRINGS = frozenset(("0", "off", "f", "false", "n", "no",
                              "1", "on", "t", "true", "y", "yes"))
_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*|\s*[+-]?(inf|nan)\s*", re.I)
_INTEGER = re.compile(r"\s*[+-]?\d+\s*")


def problems(where: ConfigPlace) -> list[Diagnostic]:
    """Return what the run file's Axolotl release would reject in its config, sorted."""
    version = where.source.data["trainer"]["axolotl"].get("version", DEFAULT_AXOLOTL_VERSION)
    known = trainer_schema_versions("axolotl")
    if version not in known:
        return [where.source.problem(VERSION_FIELD, f"obc has no schema of Axolotl {version}",
                                     f"obc checks the configs of Axolotl {', '.join(known)}")]
    schema = trainer_schema("axolotl", version)
    if fastschema.is_valid(schema, where.config):
        return []
    return sorted({where.problem(keys, message, hint, key=at_key)
                   for error in _validator("axolotl", version).iter_errors(where.config)
                   for keys, at_key, message, hint in _explain(error, f"Axolotl {version}")})


@cache
def _validator(trainer: str, version: str) -> Validator:
    from jsonschema import Draft202012Validator, validators  # noqa: PLC0415

    types = Draft202012Validator.TYPE_CHECKER.redefine_many({
        "boolean": lambda _, value: isinstance(value, bool) or value in (0, 1)
        or isinstance(value, str) and value.strip().lower() in _BOOLEAN_STRINGS,
        "integer": lambda _, value: _is_number(value) and float(value).is_integer()
        or isinstance(value, str) and _INTEGER.fullmatch(value) is not None,
        "number": lambda _, value: _is_number(value)
        or isinstance(value, str) and _NUMBER.fullmatch(value) is not None,
    })
    lax = validators.extend(Draft202012Validator, type_checker=types)
    return lax(trainer_schema(trainer, version))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


Explanation = tuple[Path_, bool, str, str | None]


def _explain(error: ValidationError, release: str) -> Iterator[Explanation]:
    """Turn one jsonschema error into what is wrong, at which keys of the config."""
    from jsonschema.exceptions import best_match  # noqa: PLC0415

    path: Path_ = tuple(error.absolute_path)
    if "propertyNames" in error.absolute_schema_path:
        known = error.schema["enum"]
        yield (*path, error.instance), True, \
            f"not a key of {release}'s config" \
            f"{did_you_mean(str(error.instance), known)}", \
            "Axolotl ignores a key it does not know; remove it, or load the plugin " \
            "that reads it (plugins:)"
    elif error.validator in ("anyOf", "oneOf"):
        deeper = best_match(error.context or ())
        if deeper is not None and len(deeper.absolute_path) > len(path):
            yield from _explain(deeper, release)
        else:
            yield path, False, f"expected {_alternatives(error.schema[error.validator])}, " \
                f"got {describe_value(error.instance)}", None
    elif error.validator == "type":
        yield path, False, f"expected {expected_types(error.validator_value)}, " \
            f"got {describe_value(error.instance)}", None
    elif error.validator == "enum":
        # null and "" mean none, and need no naming.
        named = [choice for choice in error.validator_value if choice not in (None, "")]
        yield path, False, enum_message(error.instance, named), None
    else:
        yield path, False, error.message, None


def _alternatives(branches: list[dict[str, Any]]) -> str:
    """What the branches of an anyOf take, for a message: "an integer or null"."""
    named = [f"one of {', '.join(map(str, branch['enum']))}" if "enum" in branch
             else show(branch["const"]) if "const" in branch
             else branch["$ref"].rsplit("/", 1)[-1] if "$ref" in branch
             else expected_types(branch["type"]) if "type" in branch
             else "another value" for branch in branches]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " or " + named[-1]
