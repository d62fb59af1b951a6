"""A job's meaning as plain data, and the record of it at the end of every job.sh.

`meaning` walks the normalised job's dataclass fields, so a field the model gains is in the
record without a change here: nested dataclasses become mappings (a runtime variant gains its
`type`), collections of dataclasses become mappings keyed by their first field (a step by
its name, a file by its path), name/value pairs mappings, other tuples lists. Text of several
lines or over MAX_SHOWN characters (an embedded file) is kept as its sha256.

`obc plan` reads the record of the script on disk back (`read_record`), so that it compares
what the job meant then with what it means now, with nothing but OUT to go on.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from functools import cache
from typing import Any

from .model import Job
from .provenance import sha256
from .runtimes import Mount
from .sweep import Sweep, SweepEntry

MAX_SHOWN = 200
MAX_DEPTH = 16
# The field an item of a collection is known by, where it is not the first one.
KEY_FIELDS: dict[type, str] = {Mount: "target", SweepEntry: "id"}
# An item of a collection (a step, a file), a mapping of plain values, stays on one line if
# it is this short.
LINE_WIDTH = 100
ITEM_INDENT = "    "
RECORD_MARKER = "--- obc plan record 1: what this job means, as `obc plan` reads it back ---"


def meaning(job: Job | Sweep) -> dict[str, Any]:
    """Return the job (or a sweep's sweep.sh) as nested mappings, lists and JSON scalars."""
    return _plain(job)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {field.name: _field(value, field.name) for field in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return _collection(value)
    if isinstance(value, str) and ("\n" in value or len(value) > MAX_SHOWN):
        return f"sha256:{sha256(value.encode())}"
    return value


def _field(owner: Any, name: str) -> Any:
    value = getattr(owner, name)
    plain = _plain(value)
    if dataclasses.is_dataclass(value) and _is_variant(type(owner), name):
        return {"type": snake_case(type(value).__name__), **plain}
    return plain


@cache
def _is_variant(owner: type, name: str) -> bool:
    """Whether a field may hold one of several dataclasses (a runtime), so the record must say
    which."""
    hint = typing.get_type_hints(owner)[name]
    if typing.get_origin(hint) not in (typing.Union, types.UnionType):
        return False
    return sum(dataclasses.is_dataclass(arg) for arg in typing.get_args(hint)) > 1


def snake_case(name: str) -> str:
    """Return a class name as a field-like one: `Container` → container."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _collection(items: tuple) -> Any:
    if items and all(dataclasses.is_dataclass(item) for item in items):
        key = KEY_FIELDS.get(type(items[0]), dataclasses.fields(items[0])[0].name)
        keys = [str(getattr(item, key)) for item in items]
        if len(set(keys)) < len(keys):  # not known by that field: by position, from 1
            return {str(n): _plain(item) for n, item in enumerate(items, 1)}
        return {k: {name: v for name, v in _plain(item).items() if name != key}
                for k, item in zip(keys, items, strict=True)}
    if items and all(isinstance(item, tuple) and len(item) == 2 for item in items):
        return {str(name): _plain(value) for name, value in items}
    return [_plain(item) for item in items]


def record_lines(job: Job | Sweep) -> list[str]:
    """Return the record of `job` as the comment lines that end its script: the marker, then
    the meaning as JSON, one field or item a line, so that a change is a one-line diff."""
    return [RECORD_MARKER, *_json_lines(meaning(job), "")]


def _json_lines(value: Any, indent: str) -> list[str]:
    if isinstance(value, dict) and value:
        if indent.startswith(ITEM_INDENT) and not any(isinstance(v, dict) for v in value.values()):
            one_line = indent + json.dumps(value)
            if len(one_line) <= LINE_WIDTH:
                return [one_line]
        lines = [indent + "{"]
        for i, (key, item) in enumerate(value.items()):
            inner = _json_lines(item, indent + "  ")
            inner[0] = f"{indent}  {json.dumps(key)}: {inner[0].lstrip()}"
            inner[-1] += "," if i < len(value) - 1 else ""
            lines += inner
        return [*lines, indent + "}"]
    return [indent + json.dumps(value)]


def read_record(text: str) -> dict[str, Any] | None:
    """Return the meaning recorded in a script's text, or None if it holds no record that
    reads (a script from an obc before records, or one edited by hand)."""
    lines = text.split("\n")
    marker = f"# {RECORD_MARKER}"
    if marker not in lines:
        return None
    body = "\n".join(line.removeprefix("#") for line in lines[lines.index(marker) + 1:])
    try:
        record = json.loads(body)
    except (json.JSONDecodeError, RecursionError):  # not JSON, or nested beyond Python's stack
        return None
    return record if isinstance(record, dict) and not _too_deep(record) else None


def _too_deep(value: Any, depth: int = 0) -> bool:
    """Whether `value` nests deeper than a job's meaning ever does: such a record is not one
    obc wrote, and comparing it would recurse as deep."""
    if depth > MAX_DEPTH:
        return True
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) \
        else ()
    return any(_too_deep(item, depth + 1) for item in items)
