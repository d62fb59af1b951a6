"""The memory a piece of obc allocates, measured apart from what the test process holds."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def traced_peak(action: Callable[[], T]) -> tuple[T, int]:
    """What `action` returned, and the peak in bytes of what Python allocated while it ran:
    traced only then, so that neither what earlier tests left behind nor the test's own work
    around it (Hypothesis drawing inputs, which tracing slows) counts."""
    tracemalloc.start()
    try:
        result = action()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
