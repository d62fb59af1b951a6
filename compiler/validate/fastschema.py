"""A yes/no check of a run file (or a trainer's config) against its JSON Schema, without
importing jsonschema.

Importing jsonschema is a third of a single compile's start-up, and a valid run file never
needs its messages. This knows the keywords the schemas use (draft-07's, and the trainers'
schemas' anyOf, allOf and $defs, whose $refs have no siblings), with jsonschema's
meaning (and obc's: a `pattern` matches the whole string, in ASCII); `is_valid` returns None
for a schema with any other keyword, and the caller asks jsonschema. Whenever this says no,
validate.py asks jsonschema for the messages, so only a wrong yes would matter: the tests
compare both on the diagnostics corpus and on generated documents.
"""

from __future__ import annotations

import re
from typing import Any

# Keywords that say nothing about validity.
_ANNOTATIONS = frozenset((
    "$schema", "$id", "$comment", "title", "description", "examples", "default",
    "errorMessage", "patternErrorMessage", "markdownDescription", "definitions", "$defs",
))


class _Unsupported(Exception):
    """The schema uses a keyword this module does not know."""


def is_valid(schema: dict[str, Any], instance: Any) -> bool | None:
    """Return whether `instance` is valid against `schema`; None if this cannot tell."""
    try:
        return _valid(schema, instance, schema)
    except _Unsupported:
        return None


def _valid(schema: Any, instance: Any, root: dict[str, Any]) -> bool:
    if schema is True or schema == {}:
        return True
    if schema is False:
        return False
    if "$ref" in schema:  # draft-07: the keywords beside a $ref are ignored
        return _ref(schema["$ref"], instance, root, schema)
    for keyword, value in schema.items():
        if keyword in _ANNOTATIONS:
            continue
        check = _KEYWORDS.get(keyword)
        if check is None:
            raise _Unsupported(keyword)
        if not check(value, instance, root, schema):
            return False
    return True


def _type(expected: str | list[str], instance: Any, *_: Any) -> bool:
    names = [expected] if isinstance(expected, str) else expected
    return any(_is_type(name, instance) for name in names)


def _is_type(name: str, instance: Any) -> bool:
    if isinstance(instance, bool):
        return name == "boolean"
    if name == "integer":  # draft-07: 1.0 is an integer
        return isinstance(instance, int) or (isinstance(instance, float)
                                             and instance.is_integer())
    kinds = {"string": str, "number": (int, float), "object": dict, "array": list,
             "null": type(None), "boolean": bool}
    if name not in kinds:
        raise _Unsupported(f"type {name}")
    return isinstance(instance, kinds[name])


def _equal(one: Any, other: Any) -> bool:
    """JSON equality, as jsonschema has it: true is not 1, 1 is 1.0."""
    if isinstance(one, bool) or isinstance(other, bool):
        return isinstance(one, bool) and isinstance(other, bool) and one == other
    if isinstance(one, dict) and isinstance(other, dict):
        return one.keys() == other.keys() and all(_equal(one[k], other[k]) for k in one)
    if isinstance(one, list) and isinstance(other, list):
        return len(one) == len(other) and all(map(_equal, one, other))
    if isinstance(one, dict | list) or isinstance(other, dict | list):
        return False
    return one == other


def _properties(properties: dict, instance: Any, root: dict, _: dict) -> bool:
    return not isinstance(instance, dict) or all(
        _valid(schema, instance[key], root) for key, schema in properties.items()
        if key in instance)


def _pattern_properties(patterns: dict, instance: Any, root: dict, _: dict) -> bool:
    return not isinstance(instance, dict) or all(
        _valid(schema, value, root) for pattern, schema in patterns.items()
        for key, value in instance.items() if re.search(pattern, key))


def _additional(additional: Any, instance: Any, root: dict, schema: dict) -> bool:
    if not isinstance(instance, dict):
        return True
    known = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extra = [key for key in instance
             if key not in known and not any(re.search(p, key) for p in patterns)]
    return all(_valid(additional, instance[key], root) for key in extra)


def _items(items: Any, instance: Any, root: dict, _: dict) -> bool:
    if not isinstance(instance, list):
        return True
    if isinstance(items, list):
        raise _Unsupported("items as a list")
    return all(_valid(items, item, root) for item in instance)


def _unique(unique: bool, instance: Any, *_: Any) -> bool:
    return not (unique and isinstance(instance, list)) or not any(
        _equal(instance[i], instance[j])
        for i in range(len(instance)) for j in range(i + 1, len(instance)))


def _ref(reference: str, instance: Any, root: dict, _: dict) -> bool:
    if not reference.startswith("#/"):
        raise _Unsupported(f"$ref {reference}")
    target: Any = root
    for part in reference[2:].split("/"):
        target = target[part.replace("~1", "/").replace("~0", "~")]
    return _valid(target, instance, root)


def _is_number(instance: Any) -> bool:
    return isinstance(instance, int | float) and not isinstance(instance, bool)


_KEYWORDS = {
    "type": _type,
    # obc's patterns mean the whole string, in ASCII (validate.py, _fullmatch_pattern).
    "pattern": lambda pattern, instance, *_: not isinstance(instance, str)
    or re.fullmatch(pattern, instance, re.ASCII) is not None,
    "enum": lambda choices, instance, *_: instance in choices if isinstance(instance, str)
    else any(_equal(instance, c) for c in choices),  # a string equals only that string
    "const": lambda value, instance, *_: _equal(instance, value),
    "minLength": lambda least, instance, *_: not isinstance(instance, str)
    or len(instance) >= least,
    "minItems": lambda least, instance, *_: not isinstance(instance, list)
    or len(instance) >= least,
    "minProperties": lambda least, instance, *_: not isinstance(instance, dict)
    or len(instance) >= least,
    "minimum": lambda least, instance, *_: not _is_number(instance) or instance >= least,
    "maximum": lambda most, instance, *_: not _is_number(instance) or instance <= most,
    "required": lambda keys, instance, *_: not isinstance(instance, dict)
    or all(key in instance for key in keys),
    "uniqueItems": _unique,
    "properties": _properties,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional,
    "propertyNames": lambda schema, instance, root, _: not isinstance(instance, dict)
    or all(_valid(schema, key, root) for key in instance),
    "items": _items,
    "maxItems": lambda most, instance, *_: not isinstance(instance, list)
    or len(instance) <= most,
    "exclusiveMinimum": lambda least, instance, *_: not _is_number(instance)
    or instance > least,
    "exclusiveMaximum": lambda most, instance, *_: not _is_number(instance)
    or instance < most,
    "anyOf": lambda schemas, instance, root, _: any(
        _valid(s, instance, root) for s in schemas),
    "allOf": lambda schemas, instance, root, _: all(
        _valid(s, instance, root) for s in schemas),
    "oneOf": lambda schemas, instance, root, _: sum(
        _valid(s, instance, root) for s in schemas) == 1,
    "if": lambda condition, instance, root, schema: _valid(
        schema.get("then", True) if _valid(condition, instance, root) else
        schema.get("else", True), instance, root),
    # Their meaning is in `if`'s; without an `if`, draft-07 ignores them.
    "then": lambda *_: True,
    "else": lambda *_: True,
}
