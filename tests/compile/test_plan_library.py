"""`obc plan` says a change of the library once, as one line for all scripts, and each
script's line only that its library changes (issue 22): never the hundreds of lines a part's
change moves in each script, nor a new bill for a job whose meaning is the same."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from compiler import __version__
from compiler.render.library import part_sha256
from tests.compile.test_plan_reads import change_line, plan, project

TWO_JOBS = ("version: 1\nid: j\nruntime: {kind: native}\n"
            "steps: [{name: a, run: [echo, one]}]\n"
            "env: {N: '0'}\nmatrix: {axes: {n: {set: env.N, values: ['1', '2']}}}\n")


def _scripts(root: Path) -> list[Path]:
    return sorted((root / "out").glob("*/job.sh"))


def _rewrite(script: Path, edit) -> None:
    script.write_text(edit(script.read_text(encoding="utf-8")), encoding="utf-8")


def _as_another_build(text: str, part: str) -> str:
    """`text` as a build whose part `part` had one more comment line, its header naming it."""
    start = text.index(f"# --- obc's library: {part} ")
    end = text.index("\n\n# --- obc's library: ", start) + 1
    older = text[start:end] + "# an older build\n"
    digest = "sha256:" + hashlib.sha256(older.encode()).hexdigest()
    return (text[:start] + older + text[end:]).replace(part_sha256(part), digest, 1)


def test_a_part_changed_between_builds_is_said_once_for_all_scripts(tmp_path):
    root = project(tmp_path, TWO_JOBS)
    for script in _scripts(root):
        _rewrite(script, lambda text: _as_another_build(text, "core"))
    output = plan(root)
    lines = output.splitlines()
    assert [line for line in lines if line.startswith("library ")] == [
        f"library obc {__version__} in 2 scripts: core changed"]
    for script in _scripts(root):
        path = script.relative_to(root).as_posix()
        assert change_line(output, path) == f"~ {path}: library obc {__version__} (below)"
    # The same meaning: no bill to approve again, and no line of the part in the plan.
    assert "\n~ out/" not in output.split("plan: ")[1] and "older build" not in output


def test_a_new_version_with_the_same_parts_is_one_line(tmp_path):
    root = project(tmp_path, TWO_JOBS)
    for script in _scripts(root):
        _rewrite(script, lambda text: text.replace(f"obc {__version__}", "obc 0.2.9")
                 .replace(f'"obc_version":"{__version__}"', '"obc_version":"0.2.9"'))
    output = plan(root)
    assert [line for line in output.splitlines() if line.startswith("library ")] == [
        f"library obc 0.2.9 → {__version__} in 2 scripts: the same parts"]


def test_a_part_edited_by_hand_is_an_edit_of_that_script(tmp_path):
    root = project(tmp_path, TWO_JOBS)
    edited, other = _scripts(root)
    _rewrite(edited, lambda text: re.sub(r"(# --- obc's library: rundir -*\n)",
                                         r"\1rm -rf ~\n", text, count=1))
    output = plan(root)
    path = edited.relative_to(root).as_posix()
    assert change_line(output, path).endswith(": library part rundir edited")
    assert other.relative_to(root).as_posix() not in output
