"""The layers of compiler/ (pyproject.toml's [tool.importlinter], docs/building.md): the
contract holds for the tree, fails on each kind of violation planted in a copy of it, and the
docs' picture of it is the one the contract draws."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO

LINT_IMPORTS = [sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
                "lint_imports_command()", "--no-cache"]
# The picture of the layers in docs/building.md sits in the code block after this line.
PICTURE_PAGE = REPO / "docs" / "building.md"
PICTURE_MARKER = "<!-- layers: generated from [tool.importlinter]; tests/unit/test_layers.py -->"


def _contracts(root: Path = REPO) -> dict[str, dict]:
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    return {contract["id"]: contract for contract in config["tool"]["importlinter"]["contracts"]}


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LINT_IMPORTS, "--config", str(root / "pyproject.toml")],
                          cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, check=False)


def test_the_tree_keeps_every_contract():
    result = _lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    for contract in _contracts().values():
        assert f"{contract['name']} KEPT" in " ".join(result.stdout.split())


@pytest.mark.parametrize(("module", "line", "contract"), [
    ("core/text.py", "from ..cli import main", "layers"),
    ("model/job.py", "from ..read import load", "layers"),
    ("sweep/matrix.py", "from . import expand", "acyclic"),
    ("model/job.py", "import jinja2", "jinja2"),
    ("pipeline/build.py", "import jsonschema", "jsonschema"),
    ("plan/bill.py", "import urllib.request", "network"),
    ("render/summary.py", "import socket", "network"),
    ("plan/diff.py", "from ..pipeline import write", "out"),
    ("extra/__init__.py", "", "layers"),  # a package given no layer
])
def test_a_planted_violation_breaks_its_contract(tmp_path, module, line, contract):
    shutil.copytree(REPO / "compiler", tmp_path / "compiler",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    planted = tmp_path / "compiler" / module
    planted.parent.mkdir(exist_ok=True)
    with planted.open("a", encoding="utf-8") as stream:
        stream.write(f"{line}\n")
    result = _lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    # An upward import also closes a circle of packages: both contracts say so.
    assert f"{_contracts(tmp_path)[contract]['name']} BROKEN" in " ".join(result.stdout.split())


def layers_picture(root: Path = REPO) -> str:
    """The packages of compiler/ from the top floor down, with their modules, then what only
    one package may import: drawn from the contract, so it cannot say otherwise."""
    contracts = _contracts(root)
    package = root / "compiler"
    lines = []
    for floor in contracts["layers"]["layers"]:
        for i, name in enumerate(part.strip() for part in floor.split("|")):
            modules = sorted(p.stem for p in (package / name).glob("*.py") if p.stem != "__init__")
            modules += sorted(f"{p.name}/" for p in (package / name).iterdir()
                              if (p / "__init__.py").is_file())
            label = f"{'  | ' if i else ''}{name}/"
            lines.append(f"{label:<14}{' '.join(modules)}")
    every = {part.strip() for floor in contracts["layers"]["layers"] for part in floor.split("|")}
    for contract in contracts.values():
        if contract["type"] != "forbidden":
            continue
        sources = {source.removeprefix("compiler.") for source in contract["source_modules"]}
        only = " and ".join(f"{name}/" for name in sorted(every - sources))
        lines.append(f"only {only} import {', '.join(contract['forbidden_modules'])}")
    return "\n".join(lines) + "\n"


def test_the_docs_draw_the_layers_the_contract_enforces():
    page = PICTURE_PAGE.read_text(encoding="utf-8")
    block = re.search(re.escape(PICTURE_MARKER) + r"\n```text\n(.*?)```", page, re.S)
    assert block, f"docs/building.md has no code block after {PICTURE_MARKER}"
    assert block[1] == layers_picture(), \
        f"python3 -m tests.unit.test_layers prints it:\n{layers_picture()}"


if __name__ == "__main__":
    print(layers_picture(), end="")
