"""The job a script's plan record stands for, read back by the model's types, and the script
this obc writes for it: `obc plan` compares that with the script on disk to find edits.

A record keeps a long text as its hash. Each is taken from the job compile would write now
where that has a text with the same hash at the same place, else from the script's own
here-document (an embedded file); a text found nowhere, or a value not of its field's type,
leaves the job not known (None).
"""

from __future__ import annotations

import types
import typing
from typing import Any

from ..model.job import Job
from ..render.meaning import (
    DIGEST_KEY,
    KEY_FIELDS,
    VARIANT_KEY,
    Part,
    field_names,
    hints,
    meaning,
    part_of,
)
from ..render.provenance import sha256
from ..render.render import render_job, render_sweep
from ..render.sweep import Sweep
from .files import embedded_text


def rendered_again(record: dict[str, Any], now: Job | Sweep, script: str) -> str | None:
    """Return the script this obc writes for the job (or sweep) `record` (read from `script`)
    stands for; None if the record does not say it whole, or says one no run file makes."""
    job = recorded_job(record, now, script)
    if job is None:
        return None
    try:
        return render_job(job) if isinstance(job, Job) else render_sweep(job)
    # Values of the right types can still break what normalise guarantees the templates (an
    # empty argv): such a job is not one obc compiled.
    except (IndexError, KeyError, TypeError, ValueError, AttributeError):
        return None


class _NotKnown(Exception):
    """The record does not say the job whole: a text it hashes is nowhere, or a value is not
    of its field's type."""


def recorded_job(record: dict[str, Any], now: Job | Sweep, script: str) -> Job | Sweep | None:
    """Return the job (or sweep) `record` (read from `script`) stands for, `now` lending the
    texts it keeps as hashes; None if the record does not say it whole."""
    try:
        job = _Reader(now, script).value(record, part_of(type(now)), now, ())
    except _NotKnown:
        return None
    return job if meaning(job) == record else None


class _Reader:
    def __init__(self, now: Job | Sweep, script: str) -> None:
        self.now, self.script = now, script

    def value(self, value: Any, part: Part, now: Any, path: tuple[str, ...]) -> Any:
        """Return the Python value of `value`, a part of the record at `path`; `now` is the
        value at the same place in the job compile would write now (None if it has none)."""
        if part.kind == "variant":
            part = part.variant(value.get(VARIANT_KEY) if isinstance(value, dict) else None)
            if part.kind != "record":
                raise _NotKnown
        if part.kind == "record":
            return self.record(value, part.of, now, path)
        if part.kind in ("items", "names", "list"):
            return self.collection(value, part, now, path)
        if part.kind == "text":
            return self.text(value, now, path)
        return _scalar(tuple(value) if isinstance(value, list) else value, part.of)

    def record(self, value: Any, cls: type, now: Any, path: tuple[str, ...]) -> Any:
        if not isinstance(value, dict):
            raise _NotKnown
        names = field_names(cls)
        if any(name not in value for name in names):
            raise _NotKnown
        same = isinstance(now, cls)
        return cls(**{name: self.field(value[name], hints(cls)[name],
                                       getattr(now, name) if same else None, (*path, name))
                      for name in names})

    def field(self, value: Any, hint: Any, now: Any, path: tuple[str, ...]) -> Any:
        """A field's value: None only where its type allows it (`X | None`)."""
        if value is None:
            return _scalar(None, hint)
        return self.value(value, part_of(hint), now, path)

    def collection(self, value: Any, part: Part, now: Any, path: tuple[str, ...]) -> tuple:
        if value == []:  # an empty collection, whatever its items would be
            return ()
        if part.kind == "list":
            if not isinstance(value, list):
                raise _NotKnown
            lent = list(now) if isinstance(now, tuple) and len(now) == len(value) else []
            return tuple(self.value(item, part_of(part.of), lent[n] if lent else None,
                                    (*path, str(n))) for n, item in enumerate(value))
        if not isinstance(value, dict):
            raise _NotKnown
        if part.kind == "names":
            lent = dict(now) if isinstance(now, tuple) else {}
            return tuple((name, self.value(item, part_of(part.of), lent.get(name),
                                           (*path, name))) for name, item in value.items())
        key = KEY_FIELDS.get(part.of, field_names(part.of)[0])
        lent = {str(getattr(item, key)): item for item in now} if isinstance(now, tuple) else {}
        return tuple(self.value(item if key in item else {key: name, **item}, part_of(part.of),
                                lent.get(name), (*path, name))
                     for name, item in value.items() if isinstance(item, dict))

    def text(self, value: Any, now: Any, path: tuple[str, ...]) -> str:
        if isinstance(value, str):
            return value
        digest = value.get(DIGEST_KEY) if isinstance(value, dict) else None
        if not isinstance(digest, str):
            raise _NotKnown
        if isinstance(now, str) and sha256(now.encode()) == digest:
            return now
        found = None
        if path[:1] == ("files",) and path[2:] == ("content",):
            found = embedded_text(self.script, path[1], digest)
        if found is None:
            raise _NotKnown
        return found


def _scalar(value: Any, hint: Any) -> Any:
    """A scalar (or a tuple of them) of the record, if it is of its field's type."""
    if hint is None or hint is Any or _fits(value, hint):
        return value
    raise _NotKnown


def _fits(value: Any, hint: Any) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return value in args
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in args)
    if origin is tuple:
        return isinstance(value, tuple) and all(_fits(item, args[0]) for item in value)
    if hint is type(None):
        return value is None
    if isinstance(hint, type):
        return isinstance(value, hint) and not (isinstance(value, bool) and hint is not bool)
    return False
