"""JSON Merge Patch (RFC 7396) on plain data, and what a patch changed, leaf by leaf.

A patch that is a mapping merges into the target key by key; any other value replaces it;
`null` deletes the key. Lists are values like any other: replaced whole, never merged.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

from ..read.load import Path_


class _Missing:
    """Stands for a key that is not there (before a patch adds it, after a patch deletes it)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()

# Called where a mapping patch meets a value that is not a mapping (RFC 7396 would replace it
# with {}): returns the mapping to merge into instead, or None to follow the RFC.
Expand = Callable[[Path_, Any], dict | None]


def merge_patch(target: Any, patch: Any, expand: Expand | None = None,
                path: Path_ = ()) -> Any:
    """Return MergePatch(target, patch) (RFC 7396 §2), leaving both arguments unchanged."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        replacement = expand(path, target) if expand is not None else None
        target = replacement if replacement is not None else {}
    result = dict(target)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value, expand, (*path, key))
    return result


def leaf_changes(before: Any, after: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any, Any]]:
    """Yield (path, old, new) for every value that differs between two trees, at the deepest
    level where both are mappings; MISSING stands for a key one of them lacks."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in (*before, *(k for k in after if k not in before)):
            yield from leaf_changes(before.get(key, MISSING), after.get(key, MISSING),
                                    (*path, key))
    elif not same(before, after):
        yield path, before, after


def same(a: Any, b: Any) -> bool:
    """Whether two plain values are equal, and of the same types all the way down (Python
    takes 1 == 1.0 == True; YAML, and the job, do not)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b
