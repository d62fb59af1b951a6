"""The grounds of obc's rules for container options, on the real podman: a mount target is
the job's own once podman cleans it, whatever the run file wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.pipeline.pipeline import compile_files
from tests.support.engines import Engine

RUN = """\
version: 1
id: r
runtime:
  kind: podman
  mounts: [{{source: /b, target: '{target}'}}]
steps: [{{name: a, run: [x]}}]
"""


def podman_mounts(podman: Engine, folder: Path, target: str):
    """Start a container with the job's run dir mount and a run file's mount at `target`."""
    for name in ("run", "data"):
        (folder / name).mkdir(exist_ok=True)
    return podman("run", "--rm", "-v", f"{folder / 'run'}:/workspace/run",
                  "-v", f"{folder / 'data'}:{target}", podman.image, "true", check=False)


@pytest.mark.parametrize("target", ["/workspace//run", "/workspace/run/.", "/workspace/./run",
                                    "/workspace/x/../run", "//workspace/run"])
def test_podman_cleans_a_target_into_the_jobs_own_and_obc_refuses_it(podman, tmp_path,
                                                                       target):
    (tmp_path / "r.yaml").write_text(RUN.format(target=target))

    (problem,) = compile_files([tmp_path / "r.yaml"]).diagnostics
    started = podman_mounts(podman, tmp_path, target)

    assert problem.message.endswith("is taken by the job's own mounts")
    assert started.returncode != 0
    assert '"/workspace/run": duplicate mount destination' in started.stderr


def test_a_target_beside_the_jobs_own_is_legal_and_mounts(podman, tmp_path):
    (tmp_path / "r.yaml").write_text(RUN.format(target="/workspace/runs"))

    assert not compile_files([tmp_path / "r.yaml"]).diagnostics
    assert podman_mounts(podman, tmp_path, "/workspace/runs").returncode == 0
