"""Benchmark: obc at scale, 10,000 run files, against the goals and a baseline obc.

    python bench/scale_bench.py [--runs 10000] [--repeat 1] [--baseline DIR]

Generates the run files of compile_bench.py in a temporary folder and, each round, times a
compile into an empty OUT with an empty cache (cold), then `compile --check` of the result
(unchanged, the cache warm): the wall time of the process, its processor time (user and
system, of it and every process it waited for: what compares on a machine other work
loads), and its peak memory, the largest resident size of obc's process or any it waited
for (wait4's rusage), as `/usr/bin/time -v` reports it. --baseline DIR runs the same with
the obc whose `compiler` package is in DIR (a checkout, or `git archive main | tar -x -C
DIR`), in turn with this one, so that both are measured under the same load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compile_bench import compile_bytecode, make_runs

REPO = Path(__file__).resolve().parent.parent
GOALS = {"cold": (20.0, 200), "check": (3.0, 200)}


def obc_environment(code: Path) -> dict[str, str]:
    """The environment in which `python -m compiler` is the obc in `code`."""
    return {**os.environ, "PYTHONPATH": str(code)}


# What one run of obc took: wall seconds, processor seconds, peak RSS (KiB).
Taken = tuple[float, float, int]


def run_obc(code: Path, root: Path, cache: str, *args: str) -> Taken:
    """Run the obc in `code` in `root`, its cache `root/cache`; return what it took."""
    env = {**obc_environment(code), "OBC_COMPILE_CACHE": str(root / cache)}
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "compiler", *args], cwd=root, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    stderr = process.stderr.read().decode() if process.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"obc {' '.join(args)} failed:\n{stderr}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def one_round(code: Path, root: Path, number: int) -> dict[str, Taken]:
    """A cold compile and a --check, with an OUT and a cache of the round's own. Nothing is
    deleted between rounds: deleting a round's 30,000 files, on a disk mounted with `discard`
    (this machine's), makes each file made in the minute after cost ten times as much, which
    is the disk's time, not obc's."""
    out, cache = f"out-{number}", f"cache-{number}"
    return {"cold": run_obc(code, root, cache, "compile", "runs", "-o", out),
            "check": run_obc(code, root, cache, "compile", "runs", "-o", out, "--check")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--baseline", type=Path, help="a folder holding another obc's compiler/")
    options = parser.parse_args()
    codes = {"obc": REPO, **({"baseline": options.baseline.resolve()} if options.baseline
                             else {})}
    with tempfile.TemporaryDirectory() as tmp:
        roots = {}
        for name, code in codes.items():
            roots[name] = Path(tmp, name)
            make_runs(roots[name] / "runs", options.runs)
            compile_bytecode(sys.executable, code, obc_environment(code))
        rounds: dict[str, list[dict[str, Taken]]] = {name: [] for name in codes}
        for number in range(options.repeat):
            for name, code in codes.items():
                rounds[name].append(one_round(code, roots[name], number))
    report(options.runs, rounds)


def report(runs: int, rounds: dict[str, list[dict[str, Taken]]]) -> None:
    print(f"{runs} run files, {os.cpu_count()} cores, median of {len(rounds['obc'])} rounds, "
          f"load average {os.getloadavg()[0]:.1f} at the end")
    print(f"{'':<8}{'obc: wall, CPU, peak':>26}{'goal':>16}{'baseline':>28}")
    for key, (goal_seconds, goal_mb) in GOALS.items():
        line = f"{key:<8}" + _cell(rounds["obc"], key) + f"{goal_seconds:>8.1f}s{goal_mb:>6}MB"
        if "baseline" in rounds:
            line += "  " + _cell(rounds["baseline"], key)
        print(line)


def _cell(results: list[dict[str, Taken]], key: str) -> str:
    seconds, cpu, peak = (statistics.median(r[key][n] for r in results) for n in range(3))
    return f"{seconds:>8.2f}s{cpu:>8.2f}s{peak / 1024:>6.0f}MB"


if __name__ == "__main__":
    main()
