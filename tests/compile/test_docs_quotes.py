"""What docs/script.md quotes of the generated scripts is in them, line for line. (The
run-file reference is generated from the schema when the site is built: tools/.)"""

from __future__ import annotations

from tests.conftest import REPO

SCRIPT_PAGE = REPO / "docs" / "script.md"


def test_the_docs_quote_the_generated_scripts_as_they_are():
    text = SCRIPT_PAGE.read_text(encoding="utf-8")
    quoted = text.split("The container version of a step (from `out/docker-qlora/job.sh`):")[1]
    snippet = quoted.split("```sh\n", 1)[1].split("```", 1)[0]
    script = (REPO / "out/docker-qlora/job.sh").read_text(encoding="utf-8")
    assert [line for line in snippet.splitlines() if line not in script] == []
    steps = text.split("and `obc_steps`, one line a step:")[1]
    steps = steps.split("```sh\n", 1)[1].split("```")[0]
    eval_script = (REPO / "out/steps-eval/job.sh").read_text(encoding="utf-8")
    assert [line for line in steps.splitlines() if line not in eval_script] == []
