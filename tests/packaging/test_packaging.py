"""The wheel: it carries the templates and the schema, and once installed in a fresh virtual
environment, away from this checkout, it compiles the examples to the committed out/."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.compile.test_determinism import snapshot
from tests.conftest import REPO

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(REPO)],
                   check=True, capture_output=True, timeout=600)
    (built,) = dist.glob("overbrainer-*-py3-none-any.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel and its dependencies (from PyPI); its bin/."""
    venv = tmp_path_factory.mktemp("venv") / "obc"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", str(wheel)], check=True, timeout=600)
    return venv / "bin"


def away_from_checkout() -> dict[str, str]:
    """An environment in which nothing of this checkout is importable."""
    return {name: value for name, value in os.environ.items()
            if name not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}


def test_the_distribution_is_overbrainer_and_its_command_obc(wheel):
    # `obc` on PyPI is another project (The Open Badges Client).
    archive = zipfile.ZipFile(wheel)
    (info,) = {Path(name).parts[0] for name in archive.namelist() if ".dist-info/" in name}
    metadata = archive.read(f"{info}/METADATA").decode().splitlines()
    assert "Name: overbrainer" in metadata
    scripts = archive.read(f"{info}/entry_points.txt").decode()
    assert "[console_scripts]\nobc = compiler.cli.main:main\n" in scripts


def test_the_wheel_carries_the_templates_and_the_schema(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = {f"compiler/templates/{t.relative_to(REPO / 'templates').as_posix()}"
                 for t in (REPO / "templates").rglob("*") if t.is_file()}
    assert "compiler/templates/lib/core.sh" in templates
    assert templates <= names
    assert "compiler/schemas/run.schema.json" in names


def test_the_installed_wheel_compiles_the_examples_to_the_committed_bytes(installed, tmp_path):
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    probe = [installed / "python", "-c", "import compiler; print(compiler.__file__)"]
    where = subprocess.run(probe, cwd=tmp_path, env=away_from_checkout(), check=True,
                           capture_output=True, text=True).stdout.strip()
    assert Path(where).is_relative_to(installed.parent), where

    result = subprocess.run([installed / "obc", "compile", "examples", "-o", "out"],
                            cwd=tmp_path, env=away_from_checkout(), capture_output=True,
                            text=True, check=False)

    assert result.returncode == 0, result.stderr
    assert snapshot(tmp_path / "out") == snapshot(REPO / "out")


def test_the_installed_obc_schema_prints_the_committed_schema(installed, tmp_path):
    result = subprocess.run([installed / "obc", "schema"], cwd=tmp_path, env=away_from_checkout(),
                            capture_output=True, check=True)
    assert result.stdout == (REPO / "schemas" / "run.schema.json").read_bytes()
