"""Benchmark: compile one run file, and a folder of 1,000 generated run files.

    python bench/compile_bench.py [--runs 1000] [--repeat 3]

Each figure is the wall time of a fresh `obc` process (what a user or CI waits for), the
median of --repeat runs. The 1,000 files are variations of the examples, each with its own id.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
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


def make_runs(folder: Path, count: int) -> None:
    kinds = ("docker", "podman", "native")
    for i in range(count):
        text = TEMPLATE.format(i=i, kind=kinds[i % 3], gpu=i % 8, epochs=1 + i % 3)
        (folder / f"run-{i:04d}.yaml").write_text(text)


def timed(args: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "compiler", *args], cwd=cwd, check=True,
                   capture_output=True)
    return time.perf_counter() - start


def median(args: list[str], cwd: Path, repeat: int) -> float:
    return statistics.median(timed(args, cwd) for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    count, repeat = options.runs, options.repeat
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "runs").mkdir()
        make_runs(root / "runs", count)
        one = median(["compile", "runs/run-0000.yaml", "-o", "out1"], root, repeat)
        validate = median(["validate", "runs"], root, repeat)
        many = median(["compile", "runs", "-o", "out"], root, repeat)
    print(f"compile 1 run file:            {one * 1000:8.0f} ms")
    print(f"validate {count} run files:      {validate * 1000:8.0f} ms "
          f"({validate / count * 1000:.1f} ms each)")
    print(f"compile {count} run files:       {many * 1000:8.0f} ms "
          f"({many / count * 1000:.1f} ms each, shellcheck included)")


if __name__ == "__main__":
    main()
