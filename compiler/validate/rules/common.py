"""What every rule module shares: the `Problem` a rule yields, and defensive access to data
that may not have the shape the schema promises (every problem is reported at once, so the
rules run on files the schema has already found fault with)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...read.load import Path_


@dataclass(frozen=True, slots=True)
class Problem:
    """A rule broken at `path` (at its key when `at_key`), with an optional fix; `first` is
    where a name given twice was first given (at its key when `first_at_key`)."""

    path: Path_
    message: str
    hint: str | None = None
    at_key: bool = False
    first: Path_ | None = None
    first_at_key: bool = False


def get(data: Any, *keys: str) -> Any:
    """Return data[k1][k2]..., or None where a level is missing or not a mapping."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data
