"""The docs site builds in mkdocs' strict mode (as CI runs it, through this test), and that
build fails on a broken link or anchor, in a page or in README.md (the home page), and on a
page left out of the nav."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` of `config` into `site`."""
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(config), "--site-dir", str(site)],
                          capture_output=True, text=True, check=False, timeout=120,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_the_site_builds_strictly_with_its_generated_pages(tmp_path):
    done = build(REPO / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr
    reference = (tmp_path / "site" / "reference" / "index.html").read_text(encoding="utf-8")
    assert "runtime.kind" in reference and "matrix.max_runs" in reference
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert 'href="trainers/"' in home and 'src="report.png"' in home


def test_a_broken_link_an_anchor_or_a_page_outside_the_nav_fails_the_build(tmp_path):
    # A copy of the site whose hooks are the project's own.
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    hooks = REPO / "tools" / "mkdocs_hooks.py"
    (tmp_path / "mkdocs.yml").write_text(config.replace("tools/mkdocs_hooks.py", str(hooks)),
                                         encoding="utf-8")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (tmp_path / "README.md").write_text(readme + "\n[gone](docs/gone.md)\n", encoding="utf-8")
    with (tmp_path / "docs" / "tests.md").open("a", encoding="utf-8") as page:
        page.write("\n[no such heading](speed.md#no-such-heading)\n")
    (tmp_path / "docs" / "orphan.md").write_text("# Orphan\n", encoding="utf-8")
    done = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 1
    assert "'index.md' contains a link 'gone.md'" in done.stderr
    assert "does not contain an anchor '#no-such-heading'" in done.stderr
    assert "orphan.md" in done.stderr
