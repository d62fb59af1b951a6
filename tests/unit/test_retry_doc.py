"""docs/retry.md's table of causes is generated from compiler/model/causes.py, the one table
the job's retry reads, so the two cannot drift.

After changing the table, rewrite the page's block with:

    python -m tests.unit.test_retry_doc
"""

from __future__ import annotations

import re

from compiler.model.causes import CAUSES, CGROUP_OOM_KILL, Cause
from tests.conftest import REPO

PAGE = REPO / "docs" / "retry.md"
BEGIN = "<!-- causes: generated from compiler/model/causes.py by tests/unit/test_retry_doc.py -->"
END = "<!-- end of causes -->"
WHAT_OBC_DOES = {
    "retry": "**retry**: the step runs again (under Slurm: the job requeues itself), up to "
             "`retry.max` times",
    "stop": "**stop**: not retried; the job ends with the step's exit code",
}


def _told_by(cause: Cause) -> str:
    codes = " or ".join(map(str, cause.exit_codes))
    pattern = cause.log.replace("|", "\\|")  # a bar in a markdown table's cell
    log = f"a log line that matches `{pattern}`" if cause.log else ""
    if re.search(cause.log or "^$", CGROUP_OOM_KILL):
        log += " (or the job's cgroup counted an OOM kill)"
    return f"exit code {codes} and {log}" if codes and log else log or f"exit code {codes}"


def table() -> str:
    """Return the page's block: one row per cause, in the order they are tried."""
    rows = "\n".join(f"| {n} | {cause.name} | {_told_by(cause)} | {WHAT_OBC_DOES[cause.action]} |"
                     for n, cause in enumerate(CAUSES, 1))
    return f"{BEGIN}\n| | cause | told by | what obc does |\n|---|---|---|---|\n{rows}\n{END}"


def test_the_page_tabulates_the_causes_the_job_reads():
    block = re.search(re.escape(BEGIN) + ".*?" + re.escape(END), PAGE.read_text("utf-8"), re.S)
    assert block, "docs/retry.md has no table of causes"
    assert block.group(0) == table(), "run: python -m tests.unit.test_retry_doc"


def main() -> None:
    text = PAGE.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    PAGE.write_text(text[:start] + table() + text[end:], encoding="utf-8")


if __name__ == "__main__":
    main()
