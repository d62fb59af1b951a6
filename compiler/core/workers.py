"""Work over many run files in two processes: each file's load, validation and rendering is
pure Python, so a second core halves a large batch. Forked, so that the workers start with
everything imported and the caller's state; results come back in order.

The files go a chunk at a time, so that what a chunk holds (its scripts) is gone before the
next one: memory does not grow with the number of files. The function is handed to the
workers as they fork, not pickled with each chunk, so that what it remembers (the findings
of the shapes it has checked) lasts from one chunk to the next; and a small first chunk is
done here before they fork, so that both start with what it learnt rather than each
checking the same few shapes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import TypeVar

Item = TypeVar("Item")
Outcome = TypeVar("Outcome")

# Below this many files a second process costs more than it saves (fork, pickling).
MIN_PARALLEL = 48
MAX_WORKERS = 2
# Files per chunk: enough that a chunk's shellcheck run is worth starting, few enough that
# a chunk's scripts (about 35 KB each, and their shapes) stay a few MB.
MAX_CHUNK = 64
# Files done before the workers fork: enough to meet the usual few shapes.
FIRST_CHUNK = 16


def pooled(count: int) -> bool:
    """Whether `count` files go to two forked processes (else this one does them all)."""
    return count >= MIN_PARALLEL and _workers() >= 2 and hasattr(os, "fork")


def map_chunks(function: Callable[[list[Item]], list[Outcome]],
               items: Sequence[Item]) -> list[Outcome]:
    """Return `function` applied to the items a chunk at a time (one outcome per item), in
    order: in two forked processes for a large batch on a machine with cores to spare, else
    here."""
    if not pooled(len(items)):
        size = MAX_CHUNK if len(items) >= MIN_PARALLEL else max(1, len(items))
        return [outcome for chunk in _chunks(items, size) for outcome in function(chunk)]
    import multiprocessing  # noqa: PLC0415 -- only a large batch pays for importing it

    global _function  # noqa: PLW0603 -- what each forked worker inherits
    workers = _workers()
    first = function(list(items[:FIRST_CHUNK]))
    rest = items[FIRST_CHUNK:]
    if not rest:
        return first
    size = min(MAX_CHUNK, math.ceil(len(rest) / workers))
    _function = function
    try:
        with multiprocessing.get_context("fork").Pool(workers, initializer=_become_worker) \
                as pool:
            return first + [outcome for outcomes in pool.imap(_call, _chunks(rest, size))
                            for outcome in outcomes]
    finally:
        _function = None


# The function of the pool being made, in the parent; in a worker, the one it was forked for.
_function: Callable[[list], list] | None = None


# Whether this process is one of map_chunks' workers, each of which has a core of its own.
_in_worker = False


def in_worker() -> bool:
    """Whether this process is a worker of map_chunks: one core is its share. Its parent,
    which does a batch's first chunk before the workers start and a small batch alone, has
    every core to itself meanwhile."""
    return _in_worker


def _become_worker() -> None:
    global _in_worker  # noqa: PLW0603 -- set once, as the worker starts
    _in_worker = True


def _call(chunk: list) -> list:
    assert _function is not None, "a worker runs the function it was forked for"
    return _function(chunk)


def _chunks(items: Sequence[Item], size: int) -> list[list[Item]]:
    return [list(items[start:start + size]) for start in range(0, len(items), size)]


def _workers() -> int:
    return min(MAX_WORKERS, cores())


def cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
