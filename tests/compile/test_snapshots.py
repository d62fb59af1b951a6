"""Snapshots of generated scripts: one readable .sh file each, reviewed like the output.

The examples' snapshots are the committed out/ itself (tests/support/out_snapshot.py); the
other scripts' are under __snapshots__/. Update both after an intended change with
`pytest tests/compile/test_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from compiler.pipeline.pipeline import Options, compile_files
from tests.conftest import REPO, compile_text
from tests.support.out_snapshot import OutSnapshot


class ShellScriptSnapshot(SingleFileSnapshotExtension):
    _write_mode = WriteMode.TEXT
    file_extension = "sh"


@pytest.fixture
def script_snapshot(snapshot):
    return snapshot.use_extension(ShellScriptSnapshot)


@pytest.fixture
def out_snapshot(snapshot):
    return snapshot.use_extension(OutSnapshot)


EXAMPLES = sorted(p.name for p in (REPO / "examples").glob("*.yaml"))


@pytest.mark.parametrize("example", EXAMPLES)
def test_example(example, out_snapshot, monkeypatch):
    monkeypatch.chdir(REPO)
    # Rendered and checked now: with the cache (the session shares one), an earlier compile
    # of the examples, into any folder, would have this one reuse out/, which holds the same
    # bytes, and render nothing.
    result = compile_files([Path("examples") / example], out=Path("out"),
                           options=Options(cache=False))
    assert not result.diagnostics
    assert result.outputs
    for output in result.outputs:
        assert output == out_snapshot(name=output.relative_path)


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


def repository_copy(root: Path) -> Path:
    """What running this file needs of the checkout, copied to `root`."""
    keep = ("compiler", "templates", "schemas", "examples", "out", "tests", "pyproject.toml")
    for name in keep:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy2
        copy(REPO / name, root / name,
             **({"ignore": shutil.ignore_patterns("__pycache__")} if copy is shutil.copytree
                else {}))
    return root


def pytest_in(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/compile/test_snapshots.py", "-k", "test_example", *args],
                          cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                          capture_output=True, text=True, check=False)


@pytest.mark.slow
def test_out_edited_by_hand_fails_and_snapshot_update_rewrites_it(tmp_path):
    root = repository_copy(tmp_path)
    script, table = root / "out/docker-qlora/job.sh", root / "out/lr-sweep/runs.tsv"
    committed = script.read_bytes()
    script.write_text(script.read_text().replace("# gpus        all", "# gpus        none", 1))
    table.unlink()

    failed = pytest_in(root, "-k", "docker-qlora or sweep-lr")
    assert failed.returncode == 1, failed.stdout
    assert "2 failed" in failed.stdout
    assert "# gpus        none" in failed.stdout  # syrupy's diff names the edited line

    updated = pytest_in(root, "-k", "docker-qlora or sweep-lr", "--snapshot-update")
    assert updated.returncode == 0, updated.stdout
    assert script.read_bytes() == committed
    assert table.read_bytes() == (REPO / "out/lr-sweep/runs.tsv").read_bytes()
    assert [stat.S_IMODE(path.stat().st_mode) for path in (script, table)] == [0o755, 0o644]
    assert not list((root / "tests/compile/__snapshots__/test_snapshots").glob("test_example*"))
