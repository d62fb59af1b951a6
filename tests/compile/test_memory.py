"""Memory stays flat in the number of run files: no stage holds every script (issue 22).

A compile goes a chunk of run files at a time, and each chunk's scripts are checked,
compared with OUT and staged there before the next chunk is made; only small facts of each
run are kept. So three times the run files take about the memory of one time as many."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from compiler.cli.main import main
from compiler.core import workers
from tests.support.memory import traced_peak

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from compile_bench import make_runs  # noqa: E402


def peak_bytes(tmp_path: Path, runs: int, check: bool) -> int:
    """The largest heap of a compile of `runs` generated run files: into an empty OUT, or
    `--check` of the OUT it wrote."""
    make_runs(tmp_path / f"runs{runs}", runs)
    command = ["compile", str(tmp_path / f"runs{runs}"), "-o", str(tmp_path / f"out{runs}")]
    if check:
        assert main(command) == 0
    code, peak = traced_peak(lambda: main([*command, *(["--check"] if check else [])]))
    assert code == 0
    return peak


@pytest.mark.slow  # compiles 600 run files
@pytest.mark.parametrize("check", [False, True], ids=["cold", "check"])
def test_three_times_the_run_files_take_about_the_same_memory(tmp_path, monkeypatch, check):
    monkeypatch.setattr(workers, "cores", lambda: 1)  # in this process, where it is measured
    monkeypatch.setenv("OBC_COMPILE_CACHE", str(tmp_path / "cache"))
    small = peak_bytes(tmp_path, 150, check)
    large = peak_bytes(tmp_path, 450, check)
    assert large < 1.5 * small, (small, large)
