"""A stand-in trainer: records its argv, working directory and environment, then exits.

`--exit N` among its arguments makes it exit with N; `--sleep S` makes it wait S seconds
first (for signal tests); `--touch FILE` creates FILE in the working directory;
`--grandchild` starts a `sleep` that outlives it unless its process group is ended.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

# Variables every process has, or that the test harness itself sets: not the job's.
HARNESS = {"PATH", "PWD", "SHLVL", "_", "OBC_STUB_STATE", "LC_CTYPE"}


def main(args: list[str]) -> int:
    entry = {"program": Path(sys.argv[0]).name, "argv": args, "cwd": os.getcwd(),
             "env": {k: v for k, v in os.environ.items() if k not in HARNESS},
             "pid": os.getpid(), "pgid": os.getpgid(0), "path": os.environ.get("PATH", "")}
    if "--grandchild" in args:
        entry["grandchild"] = subprocess.Popen(["sleep", "300"]).pid
    with open(Path(os.environ["OBC_STUB_STATE"], "log.jsonl"), "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")
    if "--touch" in args:
        Path(args[args.index("--touch") + 1]).write_text("made by a step\n")
    if "--sleep" in args:
        time.sleep(float(args[args.index("--sleep") + 1]))
    return int(args[args.index("--exit") + 1]) if "--exit" in args else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
