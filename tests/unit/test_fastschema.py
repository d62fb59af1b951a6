"""fastschema says yes exactly when jsonschema (with obc's whole-string patterns) does, on the
examples and on documents made from them by replacing, adding and removing values; and a
schema keyword it does not know makes it say it cannot tell, not yes."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from compiler.core.resources import run_schema
from compiler.read.load import load_source
from compiler.validate import fastschema
from compiler.validate.validate import _validator
from tests.conftest import REPO

EXAMPLES = [load_source(path)[0].data for path in sorted((REPO / "examples").glob("*.yaml"))]
TRICKY = st.sampled_from([
    True, False, None, 0, 1, -1, 1.0, 1.5, 2**40, "", "x", "run1\n", "\u0663", "docker",
    "all", "none", "/abs", "~/x", "~", "16g", "--x", "B:TERM@60", [], {}, ["x"], [1, 1],
    [0, "1"], {"name": "HF_TOKEN"}, {"name": "A", "required": "yes"}, {"x": 1},
    {"source": "/a", "target": "/b"}, {"name": "s", "run": ["x"]}, 3, 4, "apptainer",
    "enroot", "/i.sif", "~/i.sqsh", "${IMAGES}/i.sqsh", "docker://a/b@sha256:" + "0" * 64,
    "0" * 64, "A" * 64,
])
# Keys added to a mapping: unknown ones, and the runtime's that some kinds take.
KEYS = ["x", "kind", "name", "a-b", "x-y", "image_sha256", "cleanenv", "contain",
        "enroot_version"]


def paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into a document, the root included."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*prefix, index))
    return found


@st.composite
def documents(draw) -> Any:
    """An example with a few values replaced, keys added, or entries removed."""
    document = copy.deepcopy(draw(st.sampled_from(EXAMPLES)))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths(document)))
        if not path:
            continue
        *parents, last = path
        holder = document
        for part in parents:
            holder = holder[part]
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if action == "replace":
            holder[last] = copy.deepcopy(draw(TRICKY))
        elif action == "remove":
            del holder[last]
        elif isinstance(holder[last], dict):
            holder[last][draw(st.sampled_from(KEYS))] = copy.deepcopy(draw(TRICKY))
        elif isinstance(holder[last], list):
            holder[last].append(copy.deepcopy(draw(TRICKY)))
    return document


def test_every_example_is_valid_to_both():
    for data in EXAMPLES:
        assert fastschema.is_valid(run_schema(), data) is True
        assert _validator().is_valid(data)


@pytest.mark.slow
@settings(derandomize=True, database=None, max_examples=1500, deadline=None)
@given(document=documents())
def test_fastschema_agrees_with_jsonschema(document):
    expected = _validator().is_valid(document)
    event(f"valid: {expected}")
    assert fastschema.is_valid(run_schema(), document) == expected


def test_an_unknown_keyword_cannot_tell():
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 2}}}
    assert fastschema.is_valid(schema, {"a": "long"}) is None
    assert fastschema.is_valid({"type": "array", "contains": {}}, []) is None


@pytest.mark.parametrize("instance", ["1", 1, 1.0, True, "true", None, "", [1], {"a": 1}])
def test_an_enum_holds_what_jsonschema_says_it_holds(instance):
    # A string is looked up among the choices at once; anything else is compared with each,
    # as JSON compares (true is not 1, 1 is 1.0).
    schema = {"enum": ["1", 1, None, [1], "x"]}
    from jsonschema import Draft7Validator  # noqa: PLC0415 -- as validate.py imports it
    assert fastschema.is_valid(schema, instance) is Draft7Validator(schema).is_valid(instance)
