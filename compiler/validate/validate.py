"""Stage 2, validate: a loaded run file → every problem in it, located and explained.

First the JSON Schema (schemas/run.schema.json), whose errors are translated into short
messages with "did you mean"; then the rules a schema cannot express (rules/). Nothing here
changes the data.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING, Any

from ..core.diagnostics import Diagnostic, closest, describe_value, did_you_mean, field_path, show
from ..core.resources import run_schema
from ..read.axolotl import looks_like_config
from ..read.load import Path_, Source, is_script_text
from . import fastschema, rules

if TYPE_CHECKING:  # imported when there is an error to explain: it is slow to import
    from jsonschema import Draft7Validator, ValidationError

# Keys and values that later versions of the format will give a meaning.
NOT_SUPPORTED_YET = {("extends",)}


def _fullmatch_pattern(validator: Any, pattern: str, instance: Any, schema: dict) -> Iterator:
    # jsonschema's `pattern` uses re.search, so '^[a-z]+$' accepts 'run1\n', and \d would
    # accept Arabic-Indic digits (python-jsonschema #576, #1148). obc's patterns mean the
    # whole string, in ASCII; editors read the same '^...$' patterns the ECMA way.
    from jsonschema import ValidationError  # noqa: PLC0415

    if isinstance(instance, str) and not re.fullmatch(pattern, instance, re.ASCII):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@cache
def _validator() -> Draft7Validator:
    from jsonschema import Draft7Validator, validators  # noqa: PLC0415

    strict = validators.extend(Draft7Validator, {"pattern": _fullmatch_pattern})
    return strict(run_schema())


def validate(source: Source) -> list[Diagnostic]:
    """Return every problem in `source`, sorted by position."""
    if looks_like_config(source.data):
        # One clear message rather than one per key of a file that is not a run file at all.
        return [Diagnostic(source.file, 1, 1, "", "this is an Axolotl config, not a run file",
                           "a run file names it: version: 1, id: ..., runtime: {kind: ...}, "
                           f"trainer: {{axolotl: {{config: {source.file}}}}}")]
    found = _schema_problems(source)
    for problem in (*rules.check(source.data), *_rewritten_numbers(source)):
        message = problem.message
        if problem.first is not None:
            first = source.mark(problem.first, key=problem.first_at_key)
            message += f" (line {first.line}, column {first.column})"
        found.add(source.problem(problem.path, message, problem.hint, key=problem.at_key))
    return sorted(found)


def matrix_problems(source: Source) -> list[Diagnostic]:
    """Return the schema's problems with a run file's matrix block and its id, which names
    the runs; the rest of the file is validated run by run, once the matrix has made them."""
    return sorted(problem for problem in _schema_problems(source)
                  if problem.field in ("id", "matrix")
                  or problem.field.startswith(("matrix.", "matrix[")))


def _schema_problems(source: Source) -> set[Diagnostic]:
    """The schema's problems with `source`: none if fastschema finds it valid (no need to
    import jsonschema), else jsonschema's, to explain why."""
    if fastschema.is_valid(run_schema(), source.data):
        return set()
    return {problem for error in _validator().iter_errors(source.data)
            for problem in _translate(source, error)}


def _rewritten_numbers(source: Source) -> Iterator[rules.Problem]:
    """Integers YAML reads otherwise than they are written: `0x1F` would reach the job as
    `31`, `0o17` sbatch as `15`, `007` as `7`, `1_000` as `1000`."""
    for path, raw in source.raw.items():
        value = _typed(source, path)
        if not path or type(value) is not int or raw == str(value) or not is_script_text(path):
            continue
        read = f"YAML reads {raw} as the number {value}"
        if path[0] == "env":
            yield rules.Problem(path, f"{read}, which is what the job would get",
                                f'quote it to pass it as written: {path[-1]}: "{raw}"')
        else:
            user = "sbatch" if path[0] == "slurm" else "obc"
            yield rules.Problem(path, f"{read}, which is what {user} would use",
                                f"write the number as {value}")


def _translate(source: Source, error: ValidationError) -> Iterator[Diagnostic]:
    """Turn one jsonschema error into diagnostics (several for several unknown keys)."""
    for path, at_key, message, hint in _explain(source, error):
        yield source.problem(path, message, hint, key=at_key)


Explanation = tuple[Path_, bool, str, str | None]


def _explain(source: Source, error: ValidationError) -> Iterator[Explanation]:
    path: Path_ = tuple(error.absolute_path)
    keyword, instance, schema = error.validator, error.instance, error.schema
    hint = schema.get("errorMessage") if isinstance(schema, dict) else None
    if "propertyNames" in error.absolute_schema_path:
        # The error is about a key of the mapping at `path`; point at that key.
        yield (*path, instance), True, f"{show(instance)} is not a valid name: " \
            f"{error.schema.get('patternErrorMessage', 'has a bad form')}", None
    elif keyword == "additionalProperties":
        yield from _unknown_keys(path, instance, schema)
    elif keyword == "required":
        # Located at the mapping that lacks the key, named by the field that is missing; a
        # misspelling of it is reported once, as an unknown key with "did you mean".
        for key in error.validator_value:
            if isinstance(instance, dict) and key not in instance \
                    and not any(closest(given, [key]) for given in instance):
                yield (*path, key), False, f"required key '{key}' is missing", None
    elif keyword in ("oneOf", "anyOf"):
        yield from _alternatives(source, error, hint)
    elif keyword == "pattern" and instance == "" and schema.get("minLength"):
        return  # "must not be empty" says it
    elif keyword == "type":
        yield path, False, \
            f"expected {expected_types(error.validator_value)}, got {describe_value(instance)}", \
            _quote_hint(source, path, error.validator_value) or _boolean_hint(instance, error) \
            or hint
    else:
        yield path, False, _simple_message(path, keyword, error), hint


def _unknown_keys(path: Path_, instance: dict, schema: dict) -> Iterator[Explanation]:
    known = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    for key in instance:
        if key in known or any(re.search(p, key) for p in patterns):
            continue
        if (*path, key) in NOT_SUPPORTED_YET:
            yield (*path, key), True, f"{show(key)} is not supported yet by this obc", None
        else:
            where = f" in {field_path(path)}" if path else ""
            yield (*path, key), True, \
                f"unknown key {show(key)}{where}{did_you_mean(key, known)}", None


def branch_errors(error: ValidationError) -> dict[int, list[ValidationError]]:
    """The errors of a oneOf/anyOf failure, by the branch that raised them."""
    by_branch: dict[int, list[ValidationError]] = {}
    for sub in error.context or ():
        by_branch.setdefault(sub.schema_path[0], []).append(sub)
    return by_branch


def fitting_branch(by_branch: dict[int, list[ValidationError]]) -> list[ValidationError] | None:
    """The errors of the one branch whose type fits the value, if exactly one does: they
    say what is wrong better than "expected this or that"."""
    fitting = [subs for subs in by_branch.values()
               if not any(sub.validator == "type" and not sub.path for sub in subs)]
    return fitting[0] if len(fitting) == 1 else None


def _alternatives(source: Source, error: ValidationError, hint: str | None) -> \
        Iterator[Explanation]:
    """Explain a oneOf/anyOf failure through the one branch whose type fits, if any."""
    by_branch = branch_errors(error)
    fitting = fitting_branch(by_branch)
    if fitting is not None:
        for sub in fitting:
            yield from _explain(source, sub)
        return
    path: Path_ = tuple(error.absolute_path)
    # Each branch whose type does not fit said so at its root; together they are what fits.
    types = [t for subs in by_branch.values() for s in subs
             if s.validator == "type" and not s.path
             for t in ([s.validator_value] if isinstance(s.validator_value, str)
                       else s.validator_value)]
    types = list(dict.fromkeys(types))
    expected = expected_types(types) if types else "a valid value"
    yield path, False, f"expected {expected}, got {describe_value(error.instance)}", \
        _quote_hint(source, path, types) or hint


def _simple_message(path: Path_, keyword: str, error: ValidationError) -> str:
    if keyword == "enum":
        return enum_message(error.instance, error.validator_value)
    if keyword == "const" and path == ("version",):
        return _version_message(error.instance, error.validator_value)
    if keyword == "const":
        value = error.validator_value
        return f"can only be {str(value).lower() if isinstance(value, bool) else show(value)}"
    return _MESSAGES.get(keyword, lambda error: error.message)(error)


def enum_message(instance: Any, choices: list) -> str:
    """Return "x is not one of a, b; did you mean ..." for a value not among `choices`."""
    suggestion = did_you_mean(instance, choices) if isinstance(instance, str) else ""
    return f"{show(instance)} is not one of {', '.join(map(str, choices))}{suggestion}"


def _version_message(instance: Any, version: int) -> str:
    if instance == str(version):
        return f"the version is the number {version}, not the string {show(instance)}"
    return f"unsupported version {show(instance)}; this obc reads version {version}"


def _at_least(error: ValidationError) -> str:
    return "must not be empty" if error.validator_value == 1 else \
        f"needs at least {error.validator_value} items"


_MESSAGES = {
    "pattern": lambda error: f"{show(error.instance)}: "
                             f"{error.schema.get('patternErrorMessage', 'has a bad form')}",
    "minItems": _at_least,
    "minLength": _at_least,
    "uniqueItems": lambda error: "lists the same item twice",
    "minimum": lambda error: f"must be at least {error.validator_value}, "
                             f"got {show(error.instance)}",
}


_TYPE_NAMES = {"string": "a string", "integer": "an integer", "boolean": "true or false",
               "object": "a mapping", "array": "a list", "number": "a number", "null": "null"}


def expected_types(types: Any) -> str:
    """Return how a message names the JSON types `types`: "an integer or null"."""
    names = [_TYPE_NAMES.get(t, t) for t in ([types] if isinstance(types, str) else types)]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _quote_hint(source: Source, path: Path_, expected: Any) -> str | None:
    """For a scalar YAML typed where a string was expected, show how to quote it."""
    wanted = [expected] if isinstance(expected, str) else list(expected)
    raw = source.raw.get(path)
    if "string" not in wanted or raw is None or not path or "\n" in raw:
        return None
    key = path[-1]
    lead = f"{key}: " if isinstance(key, str) else ""
    if not raw:
        return f'an empty value is null in YAML; for an empty string write {lead}""'
    return f'YAML reads {raw} as {describe_value(_typed(source, path))}; quote it: {lead}"{raw}"'


def _boolean_hint(instance: Any, error: ValidationError) -> str | None:
    """YAML 1.1 read yes, no, on and off as booleans; YAML 1.2, and so obc, reads them as text."""
    if error.validator_value == "boolean" and isinstance(instance, str) and \
            instance.lower() in ("yes", "no", "on", "off", "y", "n"):
        return f"YAML 1.2 reads {instance} as text; write true or false"
    return None


def _typed(source: Source, path: Path_) -> Any:
    value: Any = source.data
    for part in path:
        value = value[part]
    return value
