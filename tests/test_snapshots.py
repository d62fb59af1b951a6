"""Snapshots of generated scripts: one readable .sh file each, reviewed like the output.

Update after an intended change with `pytest tests/test_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from compiler.pipeline import compile_files
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
    result = compile_files([Path("examples") / example], out=Path("out"))
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
