"""A stand-in for Slurm's `srun` with pyxis, for running enroot jobs without a cluster.

It records its argv, options and environment, then runs the command once per task
(`--ntasks`, one per node; one after the other), each with SLURM_NODEID and SLURM_PROCID
set, on this machine and in its working directory, and passes TERM and INT on to the task
as srun does. The real srun
with pyxis's options is proven on the test cluster (tests/support/pyxis); this stub proves what
the script hands srun, in every shell.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

STATE = Path(os.environ["OBC_STUB_STATE"])
FLAGS = {"--no-container-mount-home"}
# Variables every process has, or that the test harness itself sets (as record.py's).
HARNESS = {"PATH", "PWD", "SHLVL", "_", "OBC_STUB_STATE", "LC_CTYPE"}
# What `srun --help` lists for pyxis's options; OBC_STUB_NO_PYXIS leaves them out.
PYXIS_HELP = """\
Options provided by plugins:
      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH
      --container-mounts=SRC:DST[:FLAGS][,SRC:DST...]
      --container-workdir=PATH
      --container-env=NAME[,NAME...]
      --no-container-mount-home
"""


def parse(args: list[str]) -> tuple[dict[str, str], list[str]]:
    """srun's options, each `--name=value` or a flag obc gives, then the command."""
    options: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i].startswith("--"):
        name, equals, value = args[i][2:].partition("=")
        if not equals and args[i] not in FLAGS:
            raise SystemExit(f"srun stub: {args[i]} without a value")
        options[name] = value if equals else ""
        i += 1
    return options, args[i:]


def main(args: list[str]) -> int:
    if args == ["--help"]:
        print("Usage: srun [OPTIONS(0)... [executable(0) [args(0)...]]]")
        print("" if "OBC_STUB_NO_PYXIS" in os.environ else PYXIS_HELP, end="")
        return 0
    options, command = parse(args)
    with open(STATE / "log.jsonl", "a", encoding="utf-8") as log:
        log.write(json.dumps({"srun": args, "options": options, "env": {
            name: value for name, value in os.environ.items() if name not in HARNESS}}) + "\n")
    # One task after the other (a real srun starts them at once), so that what they record
    # comes in one order.
    running: list[subprocess.Popen] = []
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda received, _frame: [t.send_signal(received) for t in running])
    statuses = []
    for task in range(int(options.get("ntasks", "1"))):
        running[:] = [subprocess.Popen(command, env={**os.environ, "SLURM_NODEID": str(task),
                                                     "SLURM_PROCID": str(task)})]
        statuses.append(running[0].wait())
    failed = [status for status in statuses if status != 0]
    status = failed[0] if failed else 0
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
