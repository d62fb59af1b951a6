"""trainer.llamafactory's job in every shell of the matrix, judged by a recording stub as
`llamafactory-cli` (stubs/record.py): real LLaMA-Factory proves the job under sh in
tests/llamafactory, too slow to run under nine shells. Here the words and environment the job
gives it: `train CONFIG` with FORCE_TORCHRUN and NPROC_PER_NODE, then `export EXPORT_CONFIG`,
and the newest whole checkpoint in the config's output_dir as one
`resume_from_checkpoint=PATH` word (the library's one case of a flag that ends in `=`)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import SHELLS, compile_text, install_stub, write_script

RUN_FILE = """\
version: 1
id: lf
runtime: {kind: native, gpus: [0, 1]}
trainer:
  llamafactory:
    config: {stage: sft, do_train: true, output_dir: saves/lora, save_steps: 2}
    export: {adapter_name_or_path: saves/lora, export_dir: merged}
    resume: any
"""


def whole_checkpoint(folder, step: int) -> None:
    folder.mkdir(parents=True)
    (folder / "adapter_model.safetensors").write_text("weights\n")
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))


@pytest.mark.parametrize("shell", SHELLS)
def test_llamafactory_trains_from_the_newest_whole_checkpoint_then_exports(
        sandbox, tmp_path, shell):
    install_stub(sandbox.bin / "llamafactory-cli", "record")
    run_dir = tmp_path / "run"
    whole_checkpoint(run_dir / "saves/lora/checkpoint-2", 2)
    whole_checkpoint(run_dir / "saves/lora/checkpoint-4", 4)
    (run_dir / "saves/lora/checkpoint-6").mkdir()  # a save that was cut short
    script = write_script(tmp_path, compile_text(tmp_path, RUN_FILE))
    result = sandbox.run(script, "--run-dir", str(run_dir), shell=shell)
    assert result.returncode == 0, result.stderr
    train, export = sandbox.records()
    assert (train["argv"], export["argv"]) == (
        ["train", "llamafactory.yaml", "resume_from_checkpoint=saves/lora/checkpoint-4"],
        ["export", "llamafactory-export.yaml"])
    assert {name: train["env"].get(name) for name in ("FORCE_TORCHRUN", "NPROC_PER_NODE")} \
        == {"FORCE_TORCHRUN": "1", "NPROC_PER_NODE": "2"}
    assert "output_dir: saves/lora" in (run_dir / "llamafactory.yaml").read_text()
    assert (run_dir / "saves/lora/checkpoint-6.incomplete").is_dir()
