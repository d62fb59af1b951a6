"""A stand-in for `axolotl` that checkpoints as Axolotl does, for the resume tests.

`train CONFIG [--resume-from-checkpoint DIR]` counts steps from the checkpoint's step (or
0) to `max_steps`, one every OBC_STUB_STEP_SECONDS (default 0.05). It writes
`checkpoint-N/` (weights, then trainer_state.json last) every `save_steps` steps and when
`axolotl_checkpoint.save` appears in output_dir (which it then removes), as Axolotl's
dynamic_checkpoint does; its trainer_state.json logs a loss of 2/N at each step N. The
config's `output_dir`, `max_steps` and `save_steps` are read from its `key: value` lines.
Other commands only record. Everything it did goes to the sandbox's log.jsonl, as
stubs/record.py's entries do.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def config(path: str) -> dict[str, str]:
    values = {}
    for line in Path(path).read_text().splitlines():
        key, sep, value = line.partition(":")
        if sep and not line.startswith((" ", "#")):
            values[key.strip()] = value.strip()
    return values


def save(output_dir: Path, step: int, every: int) -> None:
    folder = output_dir / f"checkpoint-{step}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_model.safetensors").write_text("weights\n")
    # A loss logged at every step, as transformers' log_history has it: 2/step.
    history = [{"step": n, "loss": round(2 / n, 4)} for n in range(1, step + 1)]
    state = {"global_step": step, "logging_steps": 1, "save_steps": every,
             "log_history": history}
    (folder / "trainer_state.json").write_text(json.dumps(state, indent=2))


def train(config_path: str, resume: str | None) -> int:
    values = config(config_path)
    output_dir = Path(values.get("output_dir", "./model-out"))
    last, every = int(values.get("max_steps", "10")), int(values.get("save_steps", "1000"))
    step = json.loads((Path(resume) / "trainer_state.json").read_text())["global_step"] \
        if resume else 0
    output_dir.mkdir(parents=True, exist_ok=True)
    trigger = output_dir / "axolotl_checkpoint.save"
    seconds = float(os.environ.get("OBC_STUB_STEP_SECONDS", "0.05"))
    while step < last:
        time.sleep(seconds)
        step += 1
        print(f"step {step}", flush=True)
        if trigger.exists():
            trigger.unlink()
            save(output_dir, step, every)
        elif step % every == 0:
            save(output_dir, step, every)
    return 0


def main(args: list[str]) -> int:
    resume = args[args.index("--resume-from-checkpoint") + 1] \
        if "--resume-from-checkpoint" in args else None
    with open(Path(os.environ["OBC_STUB_STATE"], "log.jsonl"), "a", encoding="utf-8") as log:
        log.write(json.dumps({"program": "axolotl", "argv": args, "cwd": os.getcwd(),
                              "env": {}, "pid": os.getpid()}) + "\n")
    if args[0] == "train":
        return train(args[1], resume)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
