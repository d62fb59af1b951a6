"""A yes/no check of a run file (or a trainer's config) against its JSON Schema, without
importing jsonschema.

Importing jsonschema is a third of a single compile's start-up, and a valid run file never
needs its messages. This knows the keywords the schemas use (draft-07's, and the trainers'
schemas' anyOf, allOf and $defs, whose $refs have no siblings), with jsonschema's
meaning (and obc's: a `pattern` matches the whole string, in ASCII); `is_valid` returns None
for a schema with any other keyword, and the caller asks jsonschema. Whenever this says no,
validate.py asks jsonschema for the messages, so only a wrong yes would matter: the tests
compare both on the diagnostics corpus and on generated documents.

Each schema becomes a check once, a function for each keyword with its work decided (the
types' tests, the compiled regexes, each property's check): walking the schema's dicts for
every value of every run file cost twice as much.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# Keywords that say nothing about validity.
_ANNOTATIONS = frozenset((
    "$schema", "$id", "$comment", "title", "description", "examples", "default",
    "errorMessage", "patternErrorMessage", "markdownDescription", "definitions", "$defs",
))


class _Unsupported(Exception):
    """The schema uses a keyword this module does not know."""


# A check of an instance against a schema, or part of one.
Check = Callable[[Any], bool]


def is_valid(schema: dict[str, Any], instance: Any) -> bool | None:
    """Return whether `instance` is valid against `schema`; None if this cannot tell."""
    try:
        return _check_of(schema)(instance)
    except _Unsupported:
        return None


# Each schema's check, made once: a compile asks about the same two or three schemas (read
# once a process) for every run file. The schema is kept with it, so that its id is not
# another's.
_CHECKS: dict[int, tuple[dict[str, Any], Check]] = {}


def _check_of(schema: dict[str, Any]) -> Check:
    if id(schema) not in _CHECKS:
        _CHECKS[id(schema)] = schema, _Compiler(schema).check(schema)
    return _CHECKS[id(schema)][1]


class _Compiler:
    """Makes a schema's check: each keyword's work (which types, which regex, which property
    goes to which check) decided once, not at every value of every run file. A keyword it
    does not know fails only where a check reaches it, as jsonschema would meet it."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    def check(self, schema: Any) -> Check:
        if schema is True or schema == {}:
            return _accept
        if schema is False:
            return _reject
        if "$ref" in schema:  # draft-07: the keywords beside a $ref are ignored
            return self._ref(schema["$ref"])
        return _all([self._keyword(keyword, value, schema) for keyword, value in schema.items()
                     if keyword not in _ANNOTATIONS])

    def checks(self, schemas: list[Any]) -> list[Check]:
        return [self.check(schema) for schema in schemas]

    def _keyword(self, keyword: str, value: Any, schema: dict[str, Any]) -> Check:
        make = _KEYWORDS.get(keyword)
        return _unsupported(keyword) if make is None else make(self, value, schema)

    def _ref(self, reference: str) -> Check:
        """The check of the schema `reference` names, made when first used: a schema may
        refer to itself."""
        if not reference.startswith("#/"):
            return _unsupported(f"$ref {reference}")

        def check(instance: Any) -> bool:
            if reference not in self.refs:
                target: Any = self.root
                for part in reference[2:].split("/"):
                    target = target[part.replace("~1", "/").replace("~0", "~")]
                self.refs[reference] = self.check(target)
            return self.refs[reference](instance)
        return check


def _accept(_: Any) -> bool:
    return True


def _reject(_: Any) -> bool:
    return False


def _unsupported(what: str) -> Check:
    def check(_: Any) -> bool:
        raise _Unsupported(what)
    return check


def _all(checks: list[Check]) -> Check:
    if len(checks) == 1:
        return checks[0]
    return lambda instance: all(check(instance) for check in checks)


def _type(_: _Compiler, expected: str | list[str], __: dict) -> Check:
    kinds = [_TYPES.get(name) or _unsupported(f"type {name}")
             for name in ([expected] if isinstance(expected, str) else expected)]
    if len(kinds) == 1:
        return kinds[0]
    return lambda instance: any(kind(instance) for kind in kinds)


def _is_integer(instance: Any) -> bool:  # draft-07: 1.0 is an integer
    return not isinstance(instance, bool) and (
        isinstance(instance, int) or isinstance(instance, float) and instance.is_integer())


def _is_number(instance: Any) -> bool:
    return isinstance(instance, int | float) and not isinstance(instance, bool)


# Each JSON type's test; a boolean is of no type but its own.
_TYPES: dict[str, Check] = {
    "boolean": lambda instance: isinstance(instance, bool),
    "integer": _is_integer,
    "number": _is_number,
    "string": lambda instance: isinstance(instance, str),
    "object": lambda instance: isinstance(instance, dict),
    "array": lambda instance: isinstance(instance, list),
    "null": lambda instance: instance is None,
}


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


def _properties(compiler: _Compiler, properties: dict, _: dict) -> Check:
    checks = [(key, compiler.check(schema)) for key, schema in properties.items()]
    return lambda instance: not isinstance(instance, dict) or all(
        check(instance[key]) for key, check in checks if key in instance)


def _pattern_properties(compiler: _Compiler, patterns: dict, _: dict) -> Check:
    checks = [(re.compile(pattern), compiler.check(schema))
              for pattern, schema in patterns.items()]
    return lambda instance: not isinstance(instance, dict) or all(
        check(value) for pattern, check in checks
        for key, value in instance.items() if pattern.search(key))


def _additional(compiler: _Compiler, additional: Any, schema: dict) -> Check:
    known = schema.get("properties", {})
    patterns = [re.compile(pattern) for pattern in schema.get("patternProperties", {})]
    check = compiler.check(additional)
    return lambda instance: not isinstance(instance, dict) or all(
        check(value) for key, value in instance.items()
        if key not in known and not any(pattern.search(key) for pattern in patterns))


def _items(compiler: _Compiler, items: Any, _: dict) -> Check:
    if isinstance(items, list):  # tuple validation: not known here, for any list
        unknown = _unsupported("items as a list")
        return lambda instance: not isinstance(instance, list) or unknown(instance)
    check = compiler.check(items)
    return lambda instance: not isinstance(instance, list) or all(map(check, instance))


def _unique(_: _Compiler, unique: bool, __: dict) -> Check:
    return lambda instance: not (unique and isinstance(instance, list)) or not any(
        _equal(instance[i], instance[j])
        for i in range(len(instance)) for j in range(i + 1, len(instance)))


def _pattern(_: _Compiler, pattern: str, __: dict) -> Check:
    # obc's patterns mean the whole string, in ASCII (validate.py, _fullmatch_pattern).
    regex = re.compile(pattern, re.ASCII)
    return lambda instance: not isinstance(instance, str) or regex.fullmatch(instance) is not None


def _enum(_: _Compiler, choices: list, __: dict) -> Check:
    # A string equals only a string: looked up at once.
    return lambda instance: instance in choices if isinstance(instance, str) else any(
        _equal(instance, choice) for choice in choices)


def _if(compiler: _Compiler, condition: Any, schema: dict) -> Check:
    test = compiler.check(condition)
    then, otherwise = compiler.check(schema.get("then", True)), \
        compiler.check(schema.get("else", True))
    return lambda instance: (then if test(instance) else otherwise)(instance)


def _bound(kind: Check, holds: Callable[[Any, Any], bool]) -> \
        Callable[[_Compiler, Any, dict], Check]:
    """A keyword that says something only of instances of `kind` (a length, a minimum):
    that `holds(instance, its value)`."""
    return lambda _, bound, __: lambda instance: not kind(instance) or holds(instance, bound)


_KEYWORDS: dict[str, Callable[[_Compiler, Any, dict], Check]] = {
    "type": _type,
    "pattern": _pattern,
    "enum": _enum,
    "const": lambda _, value, __: lambda instance: _equal(instance, value),
    "minLength": _bound(_TYPES["string"], lambda text, least: len(text) >= least),
    "minItems": _bound(_TYPES["array"], lambda items, least: len(items) >= least),
    "maxItems": _bound(_TYPES["array"], lambda items, most: len(items) <= most),
    "minProperties": _bound(_TYPES["object"], lambda keys, least: len(keys) >= least),
    "minimum": _bound(_is_number, lambda number, least: number >= least),
    "maximum": _bound(_is_number, lambda number, most: number <= most),
    "exclusiveMinimum": _bound(_is_number, lambda number, least: number > least),
    "exclusiveMaximum": _bound(_is_number, lambda number, most: number < most),
    "required": _bound(_TYPES["object"], lambda keys, required: all(
        key in keys for key in required)),
    "uniqueItems": _unique,
    "properties": _properties,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional,
    "propertyNames": lambda compiler, schema, _: _keys_checked(compiler.check(schema)),
    "items": _items,
    "anyOf": lambda compiler, schemas, _: _any_of(compiler.checks(schemas)),
    "allOf": lambda compiler, schemas, _: _all(compiler.checks(schemas)),
    "oneOf": lambda compiler, schemas, _: _one_of(compiler.checks(schemas)),
    "if": _if,
    # Their meaning is in `if`'s; without an `if`, draft-07 ignores them.
    "then": lambda *_: _accept,
    "else": lambda *_: _accept,
}


def _keys_checked(check: Check) -> Check:
    return lambda instance: not isinstance(instance, dict) or all(map(check, instance))


def _any_of(checks: list[Check]) -> Check:
    return lambda instance: any(check(instance) for check in checks)


def _one_of(checks: list[Check]) -> Check:
    return lambda instance: sum(check(instance) for check in checks) == 1
