"""trainer.trl (docs/trainers.md, "TRL: from a trl sft config to a finished job"): trl sft's config
is checked at compile time against the schema made from TRL's own dataclasses
(schemas/trainers/trl-1.16.json), located in the config; its relative model and data paths must
be in the run dir; the job's steps, resume option, telemetry switch and multi-node launch are
TRL's."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.pipeline.pipeline import compile_files
from compiler.read.load import display_name
from tests.conftest import compile_text

RUN_FILE = """\
version: 1
id: sft
runtime: {kind: native}
trainer:
  trl:
    config: trl.yaml
"""
CONFIG = """\
model_name_or_path: Qwen/Qwen2.5-0.5B
dataset_name: trl-lib/Capybara
use_peft: true
lora_r: 16
learning_rate: 0.0002
lr_scheduler_type: cosine
"""

# (a line of CONFIG, its replacement, line:col, what compile says).
MISTAKES = [
    ("learning_rate: 0.0002", "learning_rat: 0.0002", "5:1",
     "learning_rat: not a key of TRL 1.16's config; did you mean 'learning_rate'?"),
    ("lr_scheduler_type: cosine", "lr_scheduler_type: cosin", "6:20",
     "lr_scheduler_type: 'cosin' is not one of linear, cosine, "),
    ("lora_r: 16", "lora_r: four", "4:9", "lora_r: expected an integer, got the string 'four'"),
    ("use_peft: true", "use_peft: maybe", "3:11",
     "use_peft: expected true or false, got the string 'maybe'"),
]


def _set(line: str) -> str:
    """CONFIG with the key of `line` set as it says (replaced, or added)."""
    key = line.partition(":")[0]
    kept = [old for old in CONFIG.splitlines() if old.partition(":")[0] != key]
    return "\n".join([*kept, line]) + "\n"


def _compile(folder: Path, config: str, run_file: str = RUN_FILE) -> list[str]:
    (folder / "run.yaml").write_text(run_file)
    (folder / "trl.yaml").write_text(config)
    return [d.text() for d in compile_files([folder / "run.yaml"]).diagnostics]


def test_a_config_trl_takes_compiles(tmp_path: Path):
    assert _compile(tmp_path, CONFIG) == []


@pytest.mark.parametrize(("line", "wrong", "where", "message"), MISTAKES)
def test_a_config_trl_rejects_fails_compile_located_in_it(
        tmp_path: Path, line: str, wrong: str, where: str, message: str):
    [found] = _compile(tmp_path, CONFIG.replace(line, wrong))
    run_file = display_name(tmp_path / "run.yaml")
    assert found.startswith(f"{run_file}:6:13: error: trainer.trl.config: "
                            f"{display_name(tmp_path / 'trl.yaml')}:{where}: {message}"), found


@pytest.mark.parametrize("line", ["lora_r: '16'", "use_peft: yes", "learning_rate: '2e-4'",
                                  "num_processes: 2", "report_to: [wandb]"])
def test_what_trl_reads_as_the_right_type_passes(tmp_path: Path, line: str):
    assert _compile(tmp_path, _set(line)) == []


@pytest.mark.parametrize("key", ["dataset_name: ./data", "model_name_or_path: models/base/v1",
                                 "datasets: [{path: json, data_files: data/train.jsonl}]"])
def test_a_relative_path_nothing_puts_in_the_run_dir_fails(tmp_path: Path, key: str):
    [found] = _compile(tmp_path, _set(key))
    assert "is a path in the run dir, where nothing puts it" in found, found


def test_a_relative_dataset_folder_the_run_file_embeds_passes(tmp_path: Path):
    (tmp_path / "train.jsonl").write_text('{"prompt": "a", "completion": "b"}\n')
    run_file = RUN_FILE + "files:\n  data/train.jsonl: train.jsonl\n"
    assert _compile(tmp_path, _set("dataset_name: ./data"), run_file) == []


def test_merge_needs_use_peft(tmp_path: Path):
    run_file = RUN_FILE + "    merge: true\n"
    [found] = _compile(tmp_path, CONFIG.replace("use_peft: true", "use_peft: false"), run_file)
    assert "trainer.trl.merge: merges a LoRA adapter, which train makes only with " \
        "use_peft: true" in found, found


def test_an_unknown_release_is_refused(tmp_path: Path):
    [found] = _compile(tmp_path, CONFIG, RUN_FILE + "    version: '0.9'\n")
    assert "trainer.trl.version: obc has no schema of TRL 0.9" in found


def test_a_checkpoint_block_is_refused_with_trl_in_a_container(tmp_path: Path):
    run_file = RUN_FILE.replace("{kind: native}", "{kind: podman, image: trl:1}")
    [found] = _compile(tmp_path, CONFIG, run_file + "checkpoint: {grace: 30}\n")
    assert "checkpoint: only applies to a trainer (trainer.axolotl, trainer.torchrun; " \
        "trainer.trl and trainer.llamafactory in a native job)" in found
    assert "TRL saves a checkpoint on TERM only in a native job" in found


def test_a_native_trl_job_has_train_save_a_checkpoint_on_term(tmp_path: Path):
    script = _script(tmp_path, "checkpoint: {grace: 30}\n")
    assert script.count("enable_jit_checkpoint: true\n") == 1
    assert "OBC_CHECKPOINT_TRIGGER='' OBC_GIVE_GRACE=train OBC_CHECKPOINT_GRACE=30" in script


def test_two_trainers_are_refused(tmp_path: Path):
    run_file = RUN_FILE + "  axolotl: {config: trl.yaml}\n"
    found = _compile(tmp_path, CONFIG, run_file)
    assert any("a job has one trainer" in line for line in found), found


def _script(tmp_path: Path, extra: str = "") -> str:
    inline = RUN_FILE.replace("config: trl.yaml", f"config: {{{CONFIG_INLINE}}}")
    return compile_text(tmp_path, inline + extra)


CONFIG_INLINE = "model_name_or_path: /models/base, dataset_name: /data/sft, use_peft: true, " \
    "output_dir: out"


def test_train_is_trl_sft_resumed_with_its_own_option(tmp_path: Path):
    script = _script(tmp_path, "    merge: true\n")
    assert "obc_step 1 train trl sft --config trl.yaml" in script
    # The library's main gives train the checkpoint with the option the job sets.
    assert "OBC_RESUME_FLAG=--resume_from_checkpoint" in script
    assert "OBC_RESUME_FIELD=trainer.trl.resume" in script
    assert "obc_step 2 merge python3 -c 'import sys; from peft import AutoPeftModelForCausalLM" \
        in script
    assert "merge_and_unload()" in script and " out out/merged" in script
    assert "HF_HUB_DISABLE_TELEMETRY=1" in script
    assert "trainer.trl.resume: same-inputs" in script


def test_on_several_nodes_train_is_torchrun_with_the_rendezvous(tmp_path: Path):
    script = _script(tmp_path, "slurm: {nodes: 2, gpus_per_node: 2}\n")
    assert "obc_step 1 train torchrun -m trl.scripts.sft --config trl.yaml" in script
    # The library's part slurm puts the rendezvous after torchrun's name in the step the job
    # names.
    assert "OBC_TORCHRUN_STEP='' OBC_TORCHRUN_PROGRAM_STEP=train" in script
    assert 'set -- "$OBC_RUNNER" "$OBC_WORD" --nnodes "$NNODES" --nproc_per_node ' \
        '"$GPUS_PER_NODE"' in script
    assert '--rdzv_backend c10d --rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT"' in script


def test_on_several_nodes_an_accelerate_launch_key_is_refused(tmp_path: Path):
    slurm = "slurm: {nodes: 2, gpus_per_node: 1}\n"
    [found] = _compile(tmp_path, _set("num_processes: 8"), RUN_FILE + slurm)
    assert f"{display_name(tmp_path / 'trl.yaml')}:7:1: num_processes: trl sft passes it to " \
        "accelerate launch, but on several nodes obc starts train with torchrun, " \
        "which does not read it" in found, found
    # On one node trl sft's accelerate launch reads it.
    assert _compile(tmp_path, _set("num_processes: 8"), RUN_FILE) == []


@pytest.mark.parametrize("kind", ["docker", "podman"])
def test_a_trl_job_in_a_container_names_its_image(tmp_path: Path, kind: str):
    run_file = RUN_FILE.replace("{kind: native}", f"{{kind: {kind}}}")
    [found] = _compile(tmp_path, CONFIG, run_file)
    assert "runtime: a TRL job in docker or podman needs an image" in found, found
    assert "obc's default image is Axolotl's" in found
    assert _compile(tmp_path, CONFIG, run_file.replace(
        f"{{kind: {kind}}}", f"{{kind: {kind}, image: 'org/trl:1.16'}}")) == []
