"""obc's runtime library (templates/lib/, README "The generated script"): each part is plain
shell that shellcheck passes as written, and the same bytes in every script that uses it."""

from __future__ import annotations

import json
import subprocess

import pytest

from compiler.check.shellcheck import SHELLCHECK_ARGS, find_shellcheck
from compiler.model.slurm import SLURM_ENDED_STATES
from compiler.pipeline.pipeline import Options, compile_files
from tests.conftest import REPO, compile_text

PARTS = {path.stem: path.read_text(encoding="utf-8")
         for path in sorted((REPO / "templates" / "lib").glob("*.sh"))}
# A part alone cannot see the other parts and the job part that use what it sets; the whole
# script, which `obc compile` checks, does.
NEEDS_THE_WHOLE_SCRIPT = ("SC2034",)


def marker(part: str) -> str:
    """The first line of a part, which names it: `# --- obc's library: NAME ---…`."""
    return PARTS[part].partition("\n")[0]


# Jobs that use a part no example does, each compiled twice (as two runs of a sweep would be).
OTHER_JOBS = {
    "resume-never": "trainer: {axolotl: {config: {base_model: x}, resume: never}}",
    "local-retry": "trainer: {axolotl: {config: {base_model: x}}}\n"
                   "retry: {on_exit_codes: [75, 137], max: 2}",
}


@pytest.fixture(scope="module")
def example_scripts(tmp_path_factory) -> dict[str, str]:
    """Every example's job.sh, and those of OTHER_JOBS, by job id."""
    examples = sorted((REPO / "examples").glob("*.yaml"))
    result = compile_files(examples, out=None, options=Options(cache=False))
    assert not result.diagnostics
    scripts = {script.job.id: script.text for script in result.scripts}
    for name, text in OTHER_JOBS.items():
        for copy in (1, 2):
            job_id = f"{name}-{copy}"
            scripts[job_id] = compile_text(tmp_path_factory.mktemp(job_id), f"""\
version: 1
id: {job_id}
runtime: {{kind: docker}}
{text}
""")
    return scripts


def test_every_part_names_itself_in_its_first_line():
    for name in PARTS:
        # As wide as the script's other section lines (`# --- helpers ---…`).
        assert marker(name).startswith(f"# --- obc's library: {name} -")
        assert len(marker(name)) == 89


@pytest.mark.parametrize("part", sorted(PARTS))
def test_a_part_is_the_same_bytes_in_every_script_that_uses_it(part, example_scripts):
    users = [text for text in example_scripts.values() if marker(part) in text]
    assert users, f"no example (nor job of OTHER_JOBS) uses the library part {part}"
    for text in users:
        start = text.index(marker(part))
        assert text[start:start + len(PARTS[part])] == PARTS[part]
        assert text.count(marker(part)) == 1


def test_every_example_uses_the_core(example_scripts):
    assert all(marker("core") in text for text in example_scripts.values())


@pytest.mark.parametrize("part", sorted(PARTS))
def test_shellcheck_passes_each_part_as_written(part):
    path = REPO / "templates" / "lib" / f"{part}.sh"
    done = subprocess.run([find_shellcheck().path, *SHELLCHECK_ARGS,
                           f"--exclude={','.join(NEEDS_THE_WHOLE_SCRIPT)}", str(path)],
                          capture_output=True, text=True, check=False)
    assert json.loads(done.stdout)["comments"] == []


def test_the_records_part_knows_the_slurm_states_obc_status_knows():
    # job.sh --status and obc status judge a run alike (README, "Run records").
    function = PARTS["records"].split("obc_slurm_job_ended() {", 1)[1]
    patterns = function.split("case $OBC_WORD in\n", 1)[1].split("esac", 1)[0]
    states = {state.strip() for line in patterns.splitlines()
              for state in line.split(")")[0].split("|") if line.strip()}
    assert states == set(SLURM_ENDED_STATES)
