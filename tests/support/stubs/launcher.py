"""A stand-in for `torchrun` (or `accelerate`) and the user's script it starts, for the
trainer.torchrun tests in every shell: it records its argv in the sandbox's log.jsonl, then
takes steps from the checkpoint that `--resume_from_checkpoint DIR` names (or 0) to
OBC_STUB_MAX_STEPS (default 100), one every OBC_STUB_STEP_SECONDS (default 0.05), printing
`step N`. On TERM, as a script that saves on TERM does, it takes OBC_STUB_SAVE_SECONDS
(default 0) to write checkpoint-N in `--output_dir` (weights, then trainer_state.json last)
and exits 143.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

STOP = {"asked": False}


def option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def save(output_dir: Path, step: int) -> None:
    time.sleep(float(os.environ.get("OBC_STUB_SAVE_SECONDS", "0")))
    folder = output_dir / f"checkpoint-{step}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytorch_model.bin").write_text("weights\n")
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))


def main(args: list[str]) -> int:
    with open(Path(os.environ["OBC_STUB_STATE"], "log.jsonl"), "a", encoding="utf-8") as log:
        log.write(json.dumps({"program": Path(sys.argv[0]).name, "argv": args,
                              "cwd": os.getcwd(), "env": {}, "pid": os.getpid()}) + "\n")
    signal.signal(signal.SIGTERM, lambda *_: STOP.update(asked=True))
    output_dir = Path(option(args, "--output_dir") or "output")
    resume = option(args, "--resume_from_checkpoint")
    step = json.loads((Path(resume) / "trainer_state.json").read_text())["global_step"] \
        if resume else 0
    seconds = float(os.environ.get("OBC_STUB_STEP_SECONDS", "0.05"))
    while step < int(os.environ.get("OBC_STUB_MAX_STEPS", "100")):
        time.sleep(seconds)
        step += 1
        print(f"step {step}", flush=True)
        if STOP["asked"]:
            save(output_dir, step)
            return 143
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
