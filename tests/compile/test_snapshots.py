"""Snapshots of generated scripts: one readable .sh file each, reviewed like the output.

Update after an intended change with `pytest tests/compile/test_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from compiler.pipeline import Options, compile_files
from tests.conftest import REPO, compile_text


class ShellScriptSnapshot(SingleFileSnapshotExtension):
    _write_mode = WriteMode.TEXT
    file_extension = "sh"


@pytest.fixture
def script_snapshot(snapshot):
    return snapshot.use_extension(ShellScriptSnapshot)


EXAMPLES = sorted(p.name for p in (REPO / "examples").glob("*.yaml"))


@pytest.mark.parametrize("example", EXAMPLES)
def test_example(example, script_snapshot, monkeypatch):
    monkeypatch.chdir(REPO)
    # Rendered and checked now: with the cache (the session shares one), an earlier compile
    # of the examples, into any folder, would have this one reuse out/, which holds the same
    # bytes, and render nothing.
    result = compile_files([Path("examples") / example], out=Path("out"),
                           options=Options(cache=False))
    assert not result.diagnostics
    assert result.scripts[0].text == script_snapshot


@pytest.mark.parametrize("gpus", ["all", "none", "[0, 1]"])
@pytest.mark.parametrize("kind", ["docker", "podman", "native"])
def test_runtime_and_gpus(kind, gpus, script_snapshot, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = compile_text(Path("."), f"""\
version: 1
id: {kind}-gpus
runtime: {{kind: {kind}, gpus: {gpus}}}
trainer: {{axolotl: {{config: {{base_model: x}}}}}}
""")
    assert text == script_snapshot


@pytest.mark.parametrize("runtime", [
    "{kind: apptainer, image: '${IMAGES}/axolotl.sif', cleanenv: false}",
    "{kind: enroot, image: /shared/axolotl.sqsh, image_sha256: "
    "9de7c7a5b8830480a7d2eb3b6d49759586615f5f8eb1126d5df29f8bd9fa324b}",
], ids=["apptainer", "enroot"])
def test_apptainer_and_enroot(runtime, script_snapshot, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = compile_text(Path("."), f"""\
version: 1
id: hpc
runtime: {runtime}
steps: [{{name: eval, run: [python, -m, eval, --out, "results dir"]}}]
env: {{WANDB_PROJECT: "a,b"}}
secrets: [HF_TOKEN]
slurm: {{gpus_per_node: 2}}
""")
    assert text == script_snapshot
