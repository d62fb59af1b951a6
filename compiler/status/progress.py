"""How far a job's training got, from what the trainer left in its output_dir: the newest
whole checkpoint (the rule of the script's resume, templates/lib/checkpoints.sh) and the
last training step and loss logged in a `trainer_state.json` (transformers' log_history)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

# A checkpoint is whole when it has trainer_state.json (which transformers writes last) and
# weights: obc_whole_checkpoint's globs, which tests/unit/test_status.py holds it to.
WEIGHTS = ("adapter_model.*", "model.safetensors*", "pytorch_model*", "global_step*")
TRAINER_STATE = "trainer_state.json"
CHECKPOINT = re.compile(r"checkpoint-([0-9]+)")


@dataclass(frozen=True, slots=True)
class Progress:
    """The newest whole checkpoint's folder name, and the last logged step and loss."""

    checkpoint: str | None = None
    step: int | None = None
    loss: float | None = None


def read_progress(output_dir: Path | None) -> Progress:
    """What train in `output_dir` got to: its newest whole checkpoint, and the last loss
    logged there or in output_dir's own trainer_state.json (written when training ends),
    whichever logged the later step."""
    if output_dir is None:
        return Progress()
    newest = newest_checkpoint(output_dir)
    states = [output_dir / TRAINER_STATE]
    if newest is not None:
        states.append(output_dir / newest / TRAINER_STATE)
    logged = max((_last_loss(state) for state in states), key=lambda found: found[0] or -1)
    return Progress(newest, *logged)


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


def _last_loss(state: Path) -> tuple[int | None, float | None]:
    """The step and loss of the last entry of log_history that logged a training loss."""
    try:
        history = json.loads(state.read_text(encoding="utf-8")).get("log_history") or []
    except (OSError, UnicodeError, ValueError, AttributeError):
        return None, None
    logged = [(entry.get("step"), entry["loss"]) for entry in history
              if isinstance(entry, dict) and _is_number(entry.get("loss"))
              and _is_number(entry.get("step"))]
    return logged[-1] if logged else (None, None)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
