"""How far a job's training got, from what the trainer left in its output_dir: the newest
whole checkpoint (the rule of the script's resume, templates/lib/checkpoints.sh) and the
last training step and loss logged in a `trainer_state.json` (transformers' log_history)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

# A checkpoint is whole when it has trainer_state.json (which transformers writes last) and
# weights: obc_whole_checkpoint's globs, which tests/compile/test_status_table.py holds it to.
WEIGHTS = ("adapter_model.*", "model.safetensors*", "pytorch_model*", "global_step*")
TRAINER_STATE = "trainer_state.json"
CHECKPOINT = re.compile(r"checkpoint-([0-9]+)")


@dataclass(frozen=True, slots=True)
class Progress:
    """The newest whole checkpoint's folder name, and the losses logged: (step, loss) in the
    order of log_history, the loss curve of `obc report`; the last is the table's."""

    checkpoint: str | None = None
    losses: tuple[tuple[int | float, float], ...] = ()

    @property
    def step(self) -> int | float | None:
        return self.losses[-1][0] if self.losses else None

    @property
    def loss(self) -> float | None:
        return self.losses[-1][1] if self.losses else None


def read_progress(output_dir: Path | None) -> Progress:
    """What train in `output_dir` got to: its newest whole checkpoint, and the losses
    logged there or in output_dir's own trainer_state.json (written when training ends),
    whichever logged the later last step."""
    if output_dir is None:
        return Progress()
    newest = newest_checkpoint(output_dir)
    states = [output_dir / TRAINER_STATE]
    if newest is not None:
        states.append(output_dir / newest / TRAINER_STATE)
    logged = max((_losses(state) for state in states),
                 key=lambda losses: losses[-1][0] if losses else -1)
    return Progress(newest, logged)


def newest_checkpoint(output_dir: Path) -> str | None:
    """The name of the newest whole checkpoint-N folder in `output_dir`, if any."""
    numbers = [int(match[1]) for folder in _folders(output_dir)
               if (match := CHECKPOINT.fullmatch(folder.name)) and is_whole(folder)]
    return f"checkpoint-{max(numbers)}" if numbers else None


def is_whole(folder: Path) -> bool:
    """Whether checkpoint `folder` was saved whole: trainer_state.json, and weights."""
    return (folder / TRAINER_STATE).is_file() and \
        any(next(folder.glob(pattern), None) for pattern in WEIGHTS)


def _folders(output_dir: Path) -> list[Path]:
    try:
        return list(output_dir.iterdir())
    except OSError:  # not there (yet), or not readable
        return []


def _losses(state: Path) -> tuple[tuple[int | float, float], ...]:
    """The step and loss of each entry of log_history that logged a training loss."""
    try:
        history = json.loads(state.read_text(encoding="utf-8")).get("log_history") or []
    except (OSError, UnicodeError, ValueError, AttributeError):
        return ()
    return tuple((entry["step"], entry["loss"]) for entry in history
                 if isinstance(entry, dict) and _is_number(entry.get("loss"))
                 and _is_number(entry.get("step")))


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
