"""Work over many run files in two processes: each file's load, validation and rendering is
pure Python, so a second core halves a large batch. Forked, so that the workers start with
everything imported and the caller's state; results come back in order."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TypeVar

Item = TypeVar("Item")
Outcome = TypeVar("Outcome")

# Below this many files a second process costs more than it saves (fork, pickling).
MIN_PARALLEL = 48
MAX_WORKERS = 2


def map_files(function: Callable[[Item], Outcome], items: Sequence[Item]) -> list[Outcome]:
    """Return `function` applied to each item, in order: in two forked processes for a large
    batch on a machine with cores to spare, else here."""
    workers = min(MAX_WORKERS, cores())
    if len(items) < MIN_PARALLEL or workers < 2 or not hasattr(os, "fork"):
        return [function(item) for item in items]
    import multiprocessing  # noqa: PLC0415 -- only a large batch pays for importing it

    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return pool.map(function, items, chunksize=max(1, len(items) // (workers * 8)))


def cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
