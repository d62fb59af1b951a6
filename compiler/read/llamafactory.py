"""What obc knows of a `llamafactory-cli train` config beyond its schema: which of its values
name files that LLaMA-Factory will look for in the run dir, where it runs (read/axolotl.py
reads every trainer's config alike)."""

from __future__ import annotations

from .axolotl import PathKeys

# LLaMA-Factory's config names files by these keys (ModelArguments, TrainingArguments); a
# model and an adapter may be a hub id instead. Its datasets are names in
# dataset_dir/dataset_info.json, or on the hub when dataset_dir is ONLINE.
LLAMAFACTORY_PATHS = PathKeys(files=("deepspeed",),
                              files_or_hub=("model_name_or_path", "adapter_name_or_path"),
                              dataset_lists=(), dataset_keys=())
