"""trainer.llamafactory at compile time: its configs embedded, its steps and environment,
and what is wrong located (tests/script/test_llamafactory_jobs.py runs the job)."""

from __future__ import annotations

from tests.compile.diagnostics.harness import run_obc


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


def test_llamafactory_takes_no_checkpoint_on_a_signal(tmp_path):
    found = validate(tmp_path, "llamafactory: {config: {output_dir: o}}",
                     "checkpoint: {grace: 10}\n")
    assert [(field, message) for _, _, field, message in found] == [
        ("checkpoint", "only applies to a trainer (trainer.axolotl, trainer.torchrun), whose "
         "train checkpoints when asked")]


def test_the_steps_and_the_rendezvous_on_several_nodes(tmp_path):
    run_file = tmp_path / "run.yaml"
    run_file.write_text("version: 1\nid: r\nruntime: {kind: native}\n"
                        "trainer: {llamafactory: {config: {output_dir: o}, export: {x: 1}}}\n"
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
