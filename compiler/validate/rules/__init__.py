"""The rules of a run file that its JSON Schema cannot express, one module per part of it.

Each rule reads the raw data defensively (the schema may have failed on the same file, and
every problem is reported at once) and yields `Problem`s; validate.py locates them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...read.axolotl import AXOLOTL_CONFIG_NAME
from . import (
    engine_options,
    health,
    images,
    names,
    notify,
    paths,
    runtime,
    slurm,
    steps,
    stop,
    system_limits,
    torchrun,
)
from .common import Problem, get

__all__ = ["AXOLOTL_CONFIG_NAME", "Problem", "check"]


def check(data: Any) -> Iterator[Problem]:
    """Yield every broken rule of a run file's data."""
    if not isinstance(data, dict):
        return  # the schema says what a run file is
    kind = get(data, "runtime", "kind")
    yield from steps.check(data)
    yield from runtime.check(data, kind)
    yield from images.check(data, kind)
    yield from names.check(data, kind)
    yield from slurm.check(data)
    yield from paths.check(data)
    yield from stop.check(data)
    yield from engine_options.check(data)
    yield from system_limits.check(data)
    yield from torchrun.check(data)
    yield from health.check(data, kind)
    yield from notify.check(data)
