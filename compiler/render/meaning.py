"""A job's meaning as plain data, and the record of it at the end of every job.sh.

`meaning` walks the normalised job's dataclass fields, so a field the model gains is in the
record without a change here: records (dataclasses, named tuples) become mappings (a runtime
variant gains its `type`), collections of records become mappings keyed by their first field
(a step by its name, a file by its path), name/value pairs mappings, other tuples lists. Text
of several lines or over MAX_SHOWN characters (an embedded file) is kept as its hash, in an
object `{"sha256": HEX}` where the text would be a string, so that no text reads as a hash.

The record is read back by the model's types, not by its values (`Part`): a mapping is a
runtime variant, a step or an env because the field it is in says so, so a step or a file
named `type` is a name like any other. `obc plan` reads the record of the script on disk back
(`read_record`), so that it compares what the job meant then with what it means now, with
nothing but OUT to go on.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..model.job import Job
from ..model.runtimes import Mount
from .provenance import sha256
from .stages import Submit
from .sweep import Sweep, SweepEntry

MAX_SHOWN = 200
MAX_DEPTH = 16
# The field an item of a collection is known by, where it is not the first one.
KEY_FIELDS: dict[type, str] = {Mount: "target", SweepEntry: "id"}
# Record 3 is one line of JSON; record 2 was the same JSON over a line per field, and reads
# alike. Record 1 kept a hashed text as a "sha256:…" string, which a value could be too, so
# this obc does not read it.
# How the record's marker line starts in a script, whatever its number.
RECORD_PREFIX = "# --- obc plan record "
RECORD_MARKER = "--- obc plan record 3: what this job means, as `obc plan` reads it back ---"
READABLE_MARKERS = (RECORD_MARKER, RECORD_MARKER.replace("record 3", "record 2"))
# The key that names a runtime variant in its mapping (read only where the model has one),
# and the one key of a text kept as its hash.
VARIANT_KEY = "type"
DIGEST_KEY = "sha256"


def meaning(job: Job | Sweep | Submit) -> dict[str, Any]:
    """Return the job (or a sweep's sweep.sh, a job's submit.sh) as nested mappings, lists
    and JSON scalars."""
    return _plain(job)


def _plain(value: Any) -> Any:
    if _is_record(type(value)):
        return {name: _field(value, name) for name in field_names(type(value))}
    if isinstance(value, tuple):
        return _collection(value)
    if isinstance(value, str) and ("\n" in value or len(value) > MAX_SHOWN):
        return digest_of(value)
    return value


def digest_of(text: str) -> dict[str, str]:
    """Return how the record keeps a long text: an object, where any text is a string."""
    return {DIGEST_KEY: sha256(text.encode())}


@cache  # by class: asked of every value of every job
def _is_record(cls: Any) -> bool:
    """Whether values of `cls` have named parts: a dataclass or a named tuple."""
    return dataclasses.is_dataclass(cls) or (
        isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields"))


@cache
def field_names(cls: type) -> tuple[str, ...]:
    """Return the names of a record's fields, in order."""
    if dataclasses.is_dataclass(cls):
        return tuple(field.name for field in dataclasses.fields(cls))
    return cls._fields  # type: ignore[attr-defined]


def _field(owner: Any, name: str) -> Any:
    value = getattr(owner, name)
    plain = _plain(value)
    if _is_record(type(value)) and _is_variant(type(owner), name):
        return {VARIANT_KEY: snake_case(type(value).__name__), **plain}
    return plain


@cache
def _is_variant(owner: type, name: str) -> bool:
    """Whether a field may hold one of several dataclasses (a runtime), so the record must say
    which."""
    return part_of(hints(owner)[name]).kind == "variant"


def snake_case(name: str) -> str:
    """Return a class name as a field-like one: `Container` → container."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _collection(items: tuple) -> Any:
    if items and all(_is_record(type(item)) for item in items):
        key = KEY_FIELDS.get(type(items[0]), field_names(type(items[0]))[0])
        keys = [str(getattr(item, key)) for item in items]
        if len(set(keys)) < len(keys):  # not known by that field: by position, from 1
            return {str(n): _plain(item) for n, item in enumerate(items, 1)}
        return {k: {name: v for name, v in _plain(item).items() if name != key}
                for k, item in zip(keys, items, strict=True)}
    if items and all(isinstance(item, tuple) and len(item) == 2 for item in items):
        return {str(name): _plain(value) for name, value in items}
    return [_plain(item) for item in items]


@dataclass(frozen=True, slots=True)
class Digest:
    """A text the record keeps as its sha256 (HEX, as the record has it)."""

    sha256: str


PartKind = typing.Literal["record", "variant", "items", "names", "text", "list", "value"]


@dataclass(frozen=True, slots=True)
class Part:
    """What the model's type says one part of a record is, so that reading the record never
    guesses from the values in it: a record's fields (`of`: its class), a variant (`of`: the
    classes it may be), items keyed by a field (`of`: their class), names and their values
    (`of`: the values' type), a text, a list (`of`: its items' type), or any other value
    (`of`: its type, None where the model does not say)."""

    kind: PartKind
    of: Any = None

    def child(self, key: str) -> Part:
        """Return the part at `key` of this mapping; one the model does not know: any value."""
        if self.kind == "record":
            return part_of(hints(self.of).get(key, Any))
        if self.kind in ("items", "names"):
            return part_of(self.of)
        return ANY

    def variant(self, tag: Any) -> Part:
        """Return the record part of the variant named `tag` (one the model lacks: any)."""
        return next((part_of(cls) for cls in self.of if snake_case(cls.__name__) == tag), ANY)

    def read(self, value: Any) -> Any:
        """Return a value of this part as plan shows it: a text kept as its hash a Digest."""
        if self.kind == "text" and isinstance(value, dict) and list(value) == [DIGEST_KEY] \
                and isinstance(value[DIGEST_KEY], str):
            return Digest(value[DIGEST_KEY])
        if self.kind == "list" and isinstance(value, list):
            return [part_of(self.of).read(item) for item in value]
        return value


ANY = Part("value")


@cache
def hints(cls: type) -> dict[str, Any]:
    """Return the types of a record's fields, by name."""
    return typing.get_type_hints(cls)


@cache
def part_of(hint: Any) -> Part:
    """Return the part a value of type `hint` is (`X | None` as X)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        options = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if sum(_is_record(option) for option in options) > 1:
            return Part("variant", tuple(options))
        return part_of(options[0]) if len(options) == 1 else Part("value", hint)
    if _is_record(hint):
        return Part("record", hint)
    if hint is str:
        return Part("text")
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _collection_part(args[0])
    return Part("value", hint)


def _collection_part(item: Any) -> Part:
    """The part a `tuple[item, ...]` is: items keyed by a field, names, or a list."""
    if _is_record(item):
        return Part("items", item)
    pair = typing.get_args(item)
    if typing.get_origin(item) is tuple and len(pair) == 2 and pair[1] is not Ellipsis:
        return Part("names", pair[1])
    return Part("list", item)


JOB = part_of(Job)
SWEEP = part_of(Sweep)


def record_lines(job: Job | Sweep | Submit) -> list[str]:
    """Return the record of `job` as the two comment lines that end its script: the marker,
    then the meaning as one line of JSON. A reviewer reads the job above it and `obc plan`
    reads this; one line costs the script's reader one line, and a changed job changes it
    whole, which the plan, not the diff, explains."""
    return [RECORD_MARKER, json.dumps(meaning(job), separators=(",", ":"))]


def read_record(text: str) -> dict[str, Any] | None:
    """Return the meaning recorded in a script's text, or None if it holds no record that
    reads (a script from an obc before records, or one edited by hand)."""
    lines = text.split("\n")
    marker = next((f"# {m}" for m in READABLE_MARKERS if f"# {m}" in lines), None)
    if marker is None:
        return None
    body = "\n".join(line.removeprefix("#") for line in lines[lines.index(marker) + 1:])
    try:
        record = json.loads(body)
    except (json.JSONDecodeError, RecursionError):  # not JSON, or nested beyond Python's stack
        return None
    return record if isinstance(record, dict) and not _too_deep(record) else None


class NotWhole(ValueError):
    """A record that does not say its value whole: a part missing, of another kind than its
    type says, or a text kept as its hash."""


class Hashed(NotWhole):
    """A record that keeps a text as its hash (of several lines, or over MAX_SHOWN
    characters): what it stands for cannot be read back."""


def read_back(record: Any, cls: type) -> Any:
    """Return the value of `cls` whose meaning is `record`, for a record that keeps no text
    as its hash (a sweep.sh's, a submit.sh's: names, numbers, hashes, short lines); raise
    NotWhole where it does not say one. A job's record is read back by `obc plan`, which
    finds its hashed texts (compiler/plan/recorded.py)."""
    return _read_back(record, part_of(cls))


def _read_back(value: Any, part: Part) -> Any:
    if part.kind == "record":
        if not isinstance(value, dict) or set(value) != set(field_names(part.of)):
            raise NotWhole(f"not a record of {part.of.__name__}")
        return part.of(**{name: _read_back(item, part.child(name))
                          for name, item in value.items()})
    if value == [] and part.kind in ("items", "list"):  # empty, whatever its items would be
        return ()
    if part.kind == "items" and isinstance(value, dict):
        key = KEY_FIELDS.get(part.of, field_names(part.of)[0])
        return tuple(_read_back({**item, key: name} if isinstance(item, dict) else item,
                                part_of(part.of)) for name, item in value.items())
    if part.kind == "list" and isinstance(value, list):
        return tuple(_read_back(item, part_of(part.of)) for item in value)
    if part.kind == "text" and isinstance(value, dict) and set(value) == {DIGEST_KEY}:
        raise Hashed(f"a text kept as its hash: {value[DIGEST_KEY]:.12}")
    if part.kind in ("items", "list", "names", "variant") or \
            (part.kind == "text" and not isinstance(value, str)):
        raise NotWhole(f"not a value its type says: {value!r:.40}")
    return value


def _too_deep(value: Any, depth: int = 0) -> bool:
    """Whether `value` nests deeper than a job's meaning ever does: such a record is not one
    obc wrote, and comparing it would recurse as deep."""
    if depth > MAX_DEPTH:
        return True
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) \
        else ()
    return any(_too_deep(item, depth + 1) for item in items)
