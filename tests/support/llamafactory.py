"""Real LLaMA-Factory for the tests: its venv, the tiny model and its dataset folder, a config
that trains on CPU and one that exports.

tests/run installs LLaMA-Factory 0.9.5 into a venv of its own, OBC_LLAMAFACTORY_VENV
(default /opt/obc-llamafactory), from tests/llamafactory-requirements.txt. The tiny model is
tiny_model.py's random Llama, built by that venv's python with no hub access; the dataset
folder holds its alpaca rows and the dataset_info.json that names them, as LLaMA-Factory's
`dataset` and `dataset_dir` read a local dataset.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.axolotl import built_tiny_model, installed_venv

LLAMAFACTORY_VENV = Path(os.environ.get("OBC_LLAMAFACTORY_VENV", "/opt/obc-llamafactory"))
# Where a run of lora_config leaves its outputs, and export its merged model, in the run dir.
OUTPUT_DIR = "saves/lora"
EXPORT_DIR = "merged"
DATASET = "tiny"


@dataclass(frozen=True)
class TinyFactory:
    """The tiny model (a save_pretrained folder) and the dataset_dir LLaMA-Factory reads."""

    model: Path
    data: Path


@pytest.fixture(scope="session")
def llamafactory_venv() -> Path:
    return installed_venv(LLAMAFACTORY_VENV, "LLaMA-Factory", "OBC_LLAMAFACTORY_VENV")


@pytest.fixture(scope="session")
def tiny_factory(llamafactory_venv: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> TinyFactory:
    root = built_tiny_model(llamafactory_venv, tmp_path_factory, "llamafactory",
                            with_dataset_dir)
    return TinyFactory(root / "model", root / "data")


def with_dataset_dir(root: Path) -> None:
    """The alpaca rows as the dataset_dir `data` LLaMA-Factory reads, DATASET in its
    dataset_info.json."""
    data = root / "data"
    data.mkdir()
    (root / "data.jsonl").rename(data / "tiny.jsonl")
    (data / "dataset_info.json").write_text(json.dumps({DATASET: {"file_name": "tiny.jsonl"}}))


def lora_config(tiny: TinyFactory, **overrides: object) -> dict:
    """A `llamafactory-cli train` config for the tiny model on CPU: LoRA SFT into OUTPUT_DIR,
    a checkpoint every `save_steps`; `overrides` replace or add keys."""
    return {
        "model_name_or_path": str(tiny.model),
        "stage": "sft",
        "do_train": True,
        "finetuning_type": "lora",
        "lora_rank": 4,
        "lora_target": "all",
        "dataset": DATASET,
        "dataset_dir": str(tiny.data),
        "template": "default",
        "cutoff_len": 64,
        "output_dir": OUTPUT_DIR,
        "use_cpu": True,
        "report_to": "none",
        "per_device_train_batch_size": 2,
        "max_steps": 6,
        "save_steps": 1,
        "logging_steps": 1,
        "learning_rate": 0.001,
        "seed": 0,
        **overrides,
    }


def export_config(tiny: TinyFactory) -> dict:
    """A `llamafactory-cli export` config: the adapter in OUTPUT_DIR merged into the tiny
    model, saved with its tokenizer into EXPORT_DIR."""
    return {"model_name_or_path": str(tiny.model), "adapter_name_or_path": OUTPUT_DIR,
            "template": "default", "finetuning_type": "lora", "export_dir": EXPORT_DIR,
            "export_device": "cpu"}
