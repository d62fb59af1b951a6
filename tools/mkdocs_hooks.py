"""mkdocs hooks (mkdocs.yml `hooks:`): the two pages made at build time, never kept in git.
The site's home page is README.md, its links into docs/ made relative to the site; the
run-file reference is tools/run_file_reference.py's, from the schema obc validates with."""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.structure.files import File, Files

# mkdocs loads this file by its path: the repository's packages are importable from its top.
REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from compiler.core.resources import run_schema  # noqa: E402 -- needs REPO on sys.path
from tools.run_file_reference import reference  # noqa: E402


def home_page(readme: str) -> str:
    """README.md as the site's index.md: its links to docs/PAGE point to PAGE."""
    return readme.replace("](docs/", "](")


def on_files(files: Files, config) -> Files:
    """Add the generated pages to the site's files."""
    # README.md beside mkdocs.yml: the site's own, also when a test builds a copy of it.
    readme = (Path(config.config_file_path).parent / "README.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "index.md", content=home_page(readme)))
    files.append(File.generated(config, "reference.md", content=reference(run_schema())))
    return files
