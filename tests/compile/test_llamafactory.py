"""trainer.llamafactory at compile time: its config checked against the schema made from
LLaMA-Factory's own dataclasses (schemas/trainers/llamafactory-0.9.json), located in the
config; its configs embedded, its steps and environment, and what is wrong located
(tests/llamafactory/ runs the job with the real LLaMA-Factory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.pipeline.pipeline import compile_files
from compiler.read.load import display_name
from tests.compile.diagnostics.harness import run_obc
from tests.conftest import compile_text


def validate(tmp_path, trainer: str, more: str = "") -> list[tuple[int, int, str, str]]:
    run_file = tmp_path / "run.yaml"
    run_file.write_text(f"version: 1\nid: r\nruntime: {{kind: native}}\ntrainer: {{{trainer}}}\n"
                        f"{more}")
    outcome = run_obc("validate", str(run_file), "--format", "json")
    return [(d["line"], d["column"], d["field"], d["message"]) for d in outcome.diagnostics()]


def test_a_config_file_that_is_no_mapping_is_located_in_it(tmp_path):
    (tmp_path / "sft.yaml").write_text("- a list\n")
    found = validate(tmp_path, "llamafactory: {config: sft.yaml}")
    assert [(line, column, message.partition(",")[0]) for line, column, _, message in found] \
        == [(1, 1, "does not hold a YAML mapping")]


def test_a_missing_export_config_is_an_error_at_its_field(tmp_path):
    found = validate(tmp_path, "llamafactory: {config: {output_dir: o}, export: nothere.yaml}")
    assert [(line, field) for line, _, field, _ in found] == \
        [(4, "trainer.llamafactory.export")]


def test_a_native_job_has_llamafactory_save_a_checkpoint_on_term(tmp_path):
    script = compile_text(tmp_path, "version: 1\nid: r\nruntime: {kind: native}\n"
                          "trainer: {llamafactory: {config: {output_dir: o}}}\n"
                          "checkpoint: {grace: 10}\n")
    # The config as the job writes it turns transformers' JIT checkpoint on, and train gets
    # the grace to save one.
    assert "output_dir: o\n\n# Added by obc (checkpoint.on_signal): when the job is told to " \
        "stop, job.sh\n# passes TERM on to train, and transformers' Trainer saves a " \
        "checkpoint at its\n# next step, before it stops.\nenable_jit_checkpoint: true\n" \
        "OBC_EOF\n" in script
    assert "OBC_CHECKPOINT_TRIGGER='' OBC_GIVE_GRACE=train OBC_CHECKPOINT_GRACE=10" in script
    assert "# stop        during train: TERM, on which transformers' Trainer saves a checkpoint " \
        "(enable_jit_checkpoint), then KILL after 10 s (grace) + 60 s" in script


@pytest.mark.parametrize(("setting", "added"), [
    ("{checkpoint: {on_signal: false}}", False), ("{config: {enable_jit_checkpoint: true}}", False),
    ("{}", True)])
def test_obc_adds_the_switch_only_when_the_run_file_asks_and_the_config_has_none(
        tmp_path, setting, added):
    checkpoint = "checkpoint: {on_signal: false}\n" if "on_signal" in setting else ""
    config = "{output_dir: o, enable_jit_checkpoint: true}" if "config" in setting \
        else "{output_dir: o}"
    script = compile_text(tmp_path, "version: 1\nid: r\nruntime: {kind: native}\n"
                          f"trainer: {{llamafactory: {{config: {config}}}}}\n{checkpoint}")
    assert ("# Added by obc (checkpoint.on_signal)" in script) is added
    assert ("OBC_GIVE_GRACE=train" in script) is (checkpoint == "")


def test_a_config_that_turns_the_switch_off_is_an_error_with_checkpoint_on_signal(tmp_path):
    found = validate(tmp_path, "llamafactory: {config: {output_dir: o, "
                     "enable_jit_checkpoint: false}}")
    assert [(field, message) for _, _, field, message in found] == [
        ("trainer.llamafactory.config.enable_jit_checkpoint", "turns off "
         "enable_jit_checkpoint, which checkpoint.on_signal needs")]


def test_a_container_job_takes_no_checkpoint_on_a_signal_from_llamafactory(tmp_path):
    run_file = tmp_path / "run.yaml"
    run_file.write_text("version: 1\nid: r\nruntime: {kind: docker, image: lf:1}\n"
                        "trainer: {llamafactory: {config: {output_dir: o}}}\n"
                        "checkpoint: {grace: 10}\n")
    outcome = run_obc("validate", str(run_file), "--format", "json")
    assert [(d["field"], d["message"], d["hint"]) for d in outcome.diagnostics()] == [
        ("checkpoint", "only applies to a trainer (trainer.axolotl, trainer.torchrun; "
         "trainer.trl and trainer.llamafactory in a native job), whose train checkpoints when "
         "asked", "LLaMA-Factory saves a checkpoint on TERM only in a native job: a "
         "container's init passes TERM to its launcher alone, which ends without passing it "
         "on; docs/trainers.md")]


def test_the_steps_and_the_rendezvous_on_several_nodes(tmp_path):
    run_file = tmp_path / "run.yaml"
    run_file.write_text("version: 1\nid: r\nruntime: {kind: native}\n"
                        "trainer: {llamafactory: {config: {output_dir: o},\n"
                        "                         export: {export_dir: m}}}\n"
                        "slurm: {nodes: 2, gpus_per_node: 4}\n")
    assert run_obc("compile", str(run_file), "-o", str(tmp_path / "out")).code == 0
    lines = (tmp_path / "out/r/job.sh").read_text().splitlines()
    assert "  obc_step 1 train llamafactory-cli train llamafactory.yaml" in lines
    assert "  obc_step 2 export llamafactory-cli export llamafactory-export.yaml" in lines
    assert "# steps       1. train (on every node): llamafactory-cli train llamafactory.yaml" \
        in lines
    # LLaMA-Factory starts torchrun itself: train's command gets no launcher options.
    assert "OBC_NODE_STEPS=train OBC_MASTER_PORT=29500 OBC_GPUS_PER_NODE=4 " \
        "OBC_TORCHRUN_STEP='' OBC_TORCHRUN_PROGRAM_STEP=''" in lines
    assert "  export MASTER_ADDR MASTER_PORT NNODES NODE_RANK GPUS_PER_NODE" in lines
    assert "# env         FORCE_TORCHRUN=1" in lines and "#             NPROC_PER_NODE=4" in lines


RUN_FILE = """\
version: 1
id: lora
runtime: {kind: native}
trainer:
  llamafactory:
    config: lora.yaml
"""
CONFIG = """\
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
finetuning_type: lora
lora_rank: 8
learning_rate: 1.0e-4
lr_scheduler_type: cosine
output_dir: saves/lora
"""

# The examples, as LLaMA-Factory names its keys: (a line of CONFIG, its replacement,
# line:col, what compile says).
MISTAKES = [
    ("learning_rate: 1.0e-4", "learning_rat: 1.0e-4", "5:1",
     "learning_rat: not a key of LLaMA-Factory 0.9's config; did you mean 'learning_rate'?"),
    ("finetuning_type: lora", "finetuning_type: lroa", "3:18",
     "finetuning_type: 'lroa' is not one of lora, oft, freeze, full; did you mean 'lora'?"),
    ("lora_rank: 8", "lora_rank: four", "4:12",
     "lora_rank: expected an integer, got the string 'four'"),
    ("stage: sft", "stage: sfft", "2:8", "stage: 'sfft' is not one of pt, sft, rm, ppo, dpo, "
     "kto; did you mean 'sft'?"),
    ("lr_scheduler_type: cosine", "lr_scheduler_type: cosin", "6:20",
     "lr_scheduler_type: 'cosin' is not one of linear, cosine, "),
]


def _set(line: str) -> str:
    """CONFIG with the key of `line` set as it says (replaced, or added)."""
    key = line.partition(":")[0]
    kept = [old for old in CONFIG.splitlines() if old.partition(":")[0] != key]
    return "\n".join([*kept, line]) + "\n"


def _compile(folder: Path, config: str, run_file: str = RUN_FILE) -> list[str]:
    (folder / "run.yaml").write_text(run_file)
    (folder / "lora.yaml").write_text(config)
    return [d.text() for d in compile_files([folder / "run.yaml"]).diagnostics]


def test_a_config_llamafactory_takes_compiles(tmp_path: Path):
    assert _compile(tmp_path, CONFIG) == []


@pytest.mark.parametrize(("line", "wrong", "where", "message"), MISTAKES)
def test_a_config_llamafactory_rejects_fails_compile_located_in_it(
        tmp_path: Path, line: str, wrong: str, where: str, message: str):
    [found] = _compile(tmp_path, CONFIG.replace(line, wrong))
    run_file = display_name(tmp_path / "run.yaml")
    assert found.startswith(f"{run_file}:6:13: error: trainer.llamafactory.config: "
                            f"{display_name(tmp_path / 'lora.yaml')}:{where}: {message}"), found


def test_an_unknown_key_says_llamafactory_refuses_it(tmp_path: Path):
    [found] = _compile(tmp_path, CONFIG + "lora_rnak: 8\n")
    assert "did you mean 'lora_rank'?" in found
    assert "hint: llamafactory-cli refuses a key of none of its argument dataclasses" \
        in found, found


def test_an_inline_config_is_located_in_the_run_file(tmp_path: Path):
    run_file = RUN_FILE.replace("config: lora.yaml", "config: {stage: sft, lora_rank: four}")
    [found] = _compile(tmp_path, CONFIG, run_file)
    assert found.startswith(f"{display_name(tmp_path / 'run.yaml')}:6:37: error: "
                            "trainer.llamafactory.config.lora_rank: expected an integer"), found


@pytest.mark.parametrize("line", ["lora_rank: '16'", "do_train: yes", "learning_rate: '2e-4'",
                                  "report_to: none", "report_to: [wandb]"])
def test_what_llamafactory_reads_as_the_right_type_passes(tmp_path: Path, line: str):
    assert _compile(tmp_path, _set(line)) == []


@pytest.mark.parametrize("line", ["model_name_or_path: ./models/base",
                                  "adapter_name_or_path: saves/lora/checkpoint-100",
                                  "deepspeed: ds_z3.json"])
def test_a_relative_path_nothing_puts_in_the_run_dir_fails(tmp_path: Path, line: str):
    [found] = _compile(tmp_path, _set(line))
    assert "is a path in the run dir, where nothing puts it" in found, found


def test_an_unknown_release_is_refused(tmp_path: Path):
    [found] = _compile(tmp_path, CONFIG, RUN_FILE + "    version: '0.8'\n")
    assert "trainer.llamafactory.version: obc has no schema of LLaMA-Factory 0.8" in found


def test_train_resumes_with_its_override_and_sends_no_telemetry(tmp_path: Path):
    (tmp_path / "lora.yaml").write_text(CONFIG)
    script = compile_text(tmp_path, RUN_FILE)
    assert "OBC_RESUME_FLAG='resume_from_checkpoint='" in script
    assert "OBC_RESUME_FIELD=trainer.llamafactory.resume" in script
    assert "HF_HUB_DISABLE_TELEMETRY=1" in script and "FORCE_TORCHRUN=1" in script


def test_the_step_name_export_is_taken_by_llamafactory(tmp_path: Path):
    run_file = RUN_FILE + "steps:\n  - {name: export, run: [echo]}\n"
    [found] = _compile(tmp_path, CONFIG, run_file)
    assert "step name 'export' is taken by trainer.llamafactory" in found, found


# Export runs after train, hours later: its config is checked as the training config, with
# the keys `llamafactory-cli export` reads (no TrainingArguments).
EXPORT = """\
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
adapter_name_or_path: saves/llama3-8b/lora/sft
finetuning_type: lora
export_dir: output/merged
"""


def _compile_export(folder: Path, export: str) -> list[str]:
    (folder / "export.yaml").write_text(export)
    return _compile(folder, CONFIG, RUN_FILE + "    export: export.yaml\n")


def test_an_export_config_llamafactory_takes_compiles(tmp_path: Path):
    # adapter_name_or_path is what train makes: not looked for in the run dir.
    assert _compile_export(tmp_path, EXPORT) == []


@pytest.mark.parametrize(("line", "wrong", "where", "message"), [
    ("export_dir: output/merged", "export_dri: output/merged", "4:1",
     "export_dri: not a key of LLaMA-Factory 0.9's export config; did you mean 'export_dir'?"),
    ("finetuning_type: lora", "learning_rate: 1.0e-4", "3:1",
     "learning_rate: not a key of LLaMA-Factory 0.9's export config"),
    ("finetuning_type: lora", "export_device: gpu", "3:16",
     "export_device: 'gpu' is not one of cpu, auto"),
])
def test_an_export_config_llamafactory_rejects_fails_compile_located_in_it(
        tmp_path: Path, line: str, wrong: str, where: str, message: str):
    [found] = _compile_export(tmp_path, EXPORT.replace(line, wrong))
    assert found.startswith(f"{display_name(tmp_path / 'run.yaml')}:7:13: error: "
                            f"trainer.llamafactory.export: "
                            f"{display_name(tmp_path / 'export.yaml')}:{where}: {message}"), found


def test_an_inline_export_config_is_located_in_the_run_file(tmp_path: Path):
    run_file = RUN_FILE + "    export: {export_dir: merged, export_size: big}\n"
    [found] = _compile(tmp_path, CONFIG, run_file)
    assert found.startswith(f"{display_name(tmp_path / 'run.yaml')}:7:47: error: "
                            "trainer.llamafactory.export.export_size: expected an integer"), found


def test_an_unknown_release_is_said_once(tmp_path: Path):
    (tmp_path / "export.yaml").write_text(EXPORT)
    found = _compile(tmp_path, CONFIG, RUN_FILE + "    export: export.yaml\n    version: '0.8'\n")
    assert len(found) == 1 and "obc has no schema of LLaMA-Factory 0.8" in found[0], found
