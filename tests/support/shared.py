"""What the processes of one test run share: tests/run starts three pytest-xdist processes,
each with a base temp of its own inside the run's, which is theirs to share."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def run_temp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's base temp: the parent of this process's under pytest-xdist, else its own."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if "PYTEST_XDIST_WORKER" in os.environ else base


def once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str,
                 build: Callable[[Path], None]) -> Path:
    """The folder `name` that `build` filled, once for the whole test run: the first process
    to ask builds while the others wait on a lock, then all get the same folder. Its users
    only read it. A build that failed is done again by the next to ask."""
    shared = run_temp(tmp_path_factory)
    folder, built = shared / name, shared / f"{name}.built"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not built.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            built.touch()
    return folder
