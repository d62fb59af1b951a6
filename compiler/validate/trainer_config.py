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

from ..core.diagnostics import Diagnostic, closest, describe_value, did_you_mean, show
from ..core.resources import trainer_schema, trainer_schema_versions
from ..model.trainers import trainer_kind
from ..read.axolotl import ConfigPlace
from ..read.load import Path_
from . import fastschema
from .validate import branch_errors, enum_message, expected_types, fitting_branch

if TYPE_CHECKING:  # imported when there is an error to explain: it is slow to import
    from jsonschema import ValidationError
    from jsonschema.protocols import Validator

# What a trainer does with a key its config does not know, and what to do about it.
UNKNOWN_KEY_HINTS = {
    "axolotl": "Axolotl ignores a key it does not know; remove it, or load the plugin that "
               "reads it (plugins:)",
    "trl": "trl sft passes a key it does not know to accelerate launch as --KEY VALUE, "
           "which refuses it; remove it",
    "llamafactory": "llamafactory-cli refuses a key of none of its argument dataclasses "
                    "(HfArgumentParser); remove it",
}

# The strings pydantic's lax mode reads as booleans, numbers and integers.
_BOOLEAN_STRINGS = frozenset(("0", "off", "f", "false", "n", "no",
                              "1", "on", "t", "true", "y", "yes"))
_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*|\s*[+-]?(inf|nan)\s*", re.I)
_INTEGER = re.compile(r"\s*[+-]?\d+\s*")


def problems(where: ConfigPlace, keys: str | None = None) -> list[Diagnostic]:
    """Return what the run file's release of its trainer would reject in its config, sorted;
    `keys` names the schema's list ($defs) of the keys another of its configs may have
    (LLaMA-Factory's export_keys), whose values are checked as in the training config."""
    kind = trainer_kind(where.source.data)
    assert kind is not None  # a valid run file's trainer is one obc knows
    version = where.source.data["trainer"][kind.name].get("version", kind.version)
    known = trainer_schema_versions(kind.name)
    if version not in known:  # said once, for the training config
        return [] if keys else [where.source.problem(
            ("trainer", kind.name, "version"), f"obc has no schema of {kind.title} {version}",
            f"obc checks the configs of {kind.title} {', '.join(known)}")]
    schema = _schema(kind.name, version, keys)
    if fastschema.is_valid(schema, where.config):
        return []
    # Whose config: "LLaMA-Factory 0.9's export config" for its export_keys.
    release = f"{kind.title} {version}'s {keys.removesuffix('_keys') + ' ' if keys else ''}config"
    unknown_hint = UNKNOWN_KEY_HINTS[kind.name]
    if "version" not in where.source.data["trainer"][kind.name] and len(known) > 1:
        # The key may be one of the release the job really runs.
        unknown_hint += f"; obc checks against {kind.title} {version} unless " \
            f"trainer.{kind.name}.version names another release ({', '.join(known)}): name " \
            "the one your image or venv has"
    return sorted({where.problem(path, message, hint, key=at_key)
                   for error in _validator(kind.name, version, keys).iter_errors(where.config)
                   for path, at_key, message, hint in _explain(error, release, schema,
                                                               unknown_hint)})


@cache
def _schema(trainer: str, version: str, keys: str | None) -> dict[str, Any]:
    """The trainer's schema, its keys those the list `keys` of its $defs names if given."""
    schema = trainer_schema(trainer, version)
    return schema if keys is None else {**schema, "propertyNames": schema["$defs"][keys]}


@cache
def _validator(trainer: str, version: str, keys: str | None = None) -> Validator:
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
    return lax(_schema(trainer, version, keys))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


Explanation = tuple[Path_, bool, str, str | None]


def _explain(error: ValidationError, release: str, root: dict[str, Any], unknown_hint: str) -> \
        Iterator[Explanation]:
    """Turn one jsonschema error into what is wrong, at which keys of the config (`release`
    says whose config it is, `root` is the schema, whose definitions name what a value may
    be; `unknown_hint` says what to do about an unknown key)."""
    path: Path_ = tuple(error.absolute_path)
    if "propertyNames" in error.absolute_schema_path:
        known = error.schema["enum"]
        yield (*path, error.instance), True, \
            f"not a key of {release}" \
            f"{did_you_mean(str(error.instance), known)}", unknown_hint
    elif error.validator in ("anyOf", "oneOf"):
        yield from _alternatives(error, release, root, unknown_hint)
    elif error.validator == "required":
        # A misspelling of the missing key is reported once, as a key with "did you mean".
        for key in error.validator_value:
            if key not in error.instance and not any(
                    closest(str(given), [key]) for given in error.instance):
                yield path, False, f"the required key {show(key)} is missing", None
    elif error.validator == "type":
        yield path, False, f"expected {expected_types(error.validator_value)}, " \
            f"got {describe_value(error.instance)}", None
    elif error.validator == "enum":
        # null and "" mean none, and need no naming.
        named = [choice for choice in error.validator_value if choice not in (None, "")]
        yield path, False, enum_message(error.instance, named), None
    else:
        yield path, False, error.message, None


def _resolved(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """The definition a `$ref` names (pydantic's refs have no siblings), else `schema`."""
    reference = schema.get("$ref", "")
    return root["$defs"][reference.rsplit("/", 1)[-1]] if reference.startswith("#/$defs/") \
        else schema


def _alternatives(error: ValidationError, release: str, root: dict[str, Any],
                  unknown_hint: str) -> Iterator[Explanation]:
    """Explain an anyOf through the one branch whose type fits, if there is one; else say
    what the branches take ("an integer or null")."""
    fitting = fitting_branch(branch_errors(error))
    if fitting is not None:
        for sub in fitting:
            yield from _explain(sub, release, root, unknown_hint)
        return
    branches = [_resolved(branch, root) for branch in error.validator_value]
    choices = [choice for branch in branches for choice in branch.get("enum", ())
               if isinstance(choice, str)]
    suggestion = did_you_mean(error.instance, choices) if isinstance(error.instance, str) \
        else ""
    named = [f"one of {', '.join(map(str, branch['enum']))}" if "enum" in branch
             else show(branch["const"]) if "const" in branch
             else f"a string matching {branch['pattern']}" if "pattern" in branch
             else expected_types(branch["type"]) if "type" in branch
             else "another value" for branch in branches]
    expected = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " or " + named[-1]
    yield tuple(error.absolute_path), False, \
        f"expected {expected}, got {describe_value(error.instance)}{suggestion}", None
