"""Real TRL for the tests: its venv, the tiny model and a prompt/completion dataset, a config
that trains on CPU.

tests/run installs TRL 1.16 with peft, accelerate and a CPU build of torch into a venv of its
own, OBC_TRL_VENV (default /opt/obc-trl). The tiny model is tiny_model.py's random Llama,
built by that venv's python with no hub access; the dataset is a folder with train.jsonl of
prompt/completion rows, as `trl sft`'s dataset_name loads a local folder.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.axolotl import built_tiny_model, installed_venv

TRL_VENV = Path(os.environ.get("OBC_TRL_VENV", "/opt/obc-trl"))
# Where a run of sft_config leaves its outputs, relative to the run dir.
OUTPUT_DIR = "outputs/sft"


@dataclass(frozen=True)
class TinySft:
    """The tiny model (a save_pretrained folder) and the dataset folder TRL loads."""

    model: Path
    data: Path


@pytest.fixture(scope="session")
def trl_venv() -> Path:
    return installed_venv(TRL_VENV, "TRL", "OBC_TRL_VENV")


@pytest.fixture(scope="session")
def tiny_sft(trl_venv: Path, tmp_path_factory: pytest.TempPathFactory) -> TinySft:
    root = built_tiny_model(trl_venv, tmp_path_factory, "trl", with_sft_dataset)
    return TinySft(root / "model", root / "sft")


def with_sft_dataset(root: Path) -> None:
    """The alpaca rows as the dataset folder `sft` of prompt/completion rows TRL loads."""
    data = root / "sft"
    data.mkdir()
    rows = [json.loads(line) for line in (root / "data.jsonl").read_text().splitlines()]
    (data / "train.jsonl").write_text("".join(
        json.dumps({"prompt": row["instruction"], "completion": " " + row["output"]}) + "\n"
        for row in rows))


def sft_config(tiny: TinySft, **overrides: object) -> dict:
    """A trl sft config for the tiny model on CPU: a LoRA adapter in outputs/sft, a
    checkpoint every `save_steps`; `overrides` replace or add keys."""
    return {
        "model_name_or_path": str(tiny.model),
        "dataset_name": str(tiny.data),
        "output_dir": OUTPUT_DIR,
        "use_peft": True,
        "lora_r": 4,
        "lora_alpha": 8,
        "use_cpu": True,
        "report_to": "none",
        "per_device_train_batch_size": 2,
        "max_length": 64,
        "max_steps": 6,
        "save_steps": 1,
        "logging_steps": 1,
        "learning_rate": 0.001,
        "seed": 0,
        **overrides,
    }


def global_step(checkpoint: Path) -> int:
    """The step trainer_state.json of a checkpoint (or output_dir) records."""
    return json.loads((checkpoint / "trainer_state.json").read_text())["global_step"]
