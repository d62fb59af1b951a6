"""obc's runtime library (templates/lib/, docs/script.md): each part is plain
shell that shellcheck passes as written, and the same bytes in every script that uses it."""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import re
import subprocess

import pytest

from compiler import __version__
from compiler.check.shellcheck import SHELLCHECK_ARGS, find_shellcheck
from compiler.core import shell
from compiler.model.slurm import SLURM_ENDED_STATES
from compiler.pipeline.pipeline import Options, compile_files
from compiler.render.library import SIGNAL_NUMBERS, library_parts, part_text
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
    "health": "trainer: {axolotl: {config: {base_model: x}}}\nhealth: {}",
    "notify": "steps: [{name: eval, run: [python3, eval.py]}]\n"
              "notify: {on: [step_failed, gave_up], url: {secret: SLACK_WEBHOOK}}",
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
    # job.sh --status and obc status judge a run alike (docs/resume.md, "Run records").
    function = PARTS["records"].split("obc_slurm_job_ended() {", 1)[1]
    patterns = function.split("case $OBC_WORD in\n", 1)[1].split("esac", 1)[0]
    states = {state.strip() for line in patterns.splitlines()
              for state in line.split(")")[0].split("|") if line.strip()}
    assert states == set(SLURM_ENDED_STATES)


# The job part (docs/script.md, "The job first, the library once"): at most this many lines, its
# header included and its embedded files counted apart, for these examples.
JOB_PART_GOALS = {"docker-qlora": 120, "slurm-multinode": 160}


def library_block(text: str) -> tuple[int, int]:
    """Where the library's parts are in a script: from the first part's first character to
    the blank line before `obc_main ${1+"$@"}`."""
    start = text.index("\n# --- obc's library: ") + 1
    return start, text.rindex('\n\nobc_main ${1+"$@"}\n') + 1


# Two runs of examples/sweep-lr.yaml differ in at most this many lines of the job part.
SWEEP_RUNS_GOAL = 6


def job_part(script) -> list[str]:
    """The lines of a script that are not the library's, without its embedded files' bodies."""
    start, end = library_block(script.text)
    text = script.text[:start] + script.text[end:]
    for file in script.job.files:
        assert file.content in text
        text = text.replace(file.content, "", 1)
    return text.splitlines()


def lines_changed(old: list[str], new: list[str]) -> int:
    """How many lines a reviewer reads as changed between two texts: in each change, the
    larger of its sides."""
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    return sum(max(i2 - i1, j2 - j1)
               for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """Every example's scripts, with their jobs, by job id."""
    examples = sorted((REPO / "examples").glob("*.yaml"))
    result = compile_files(examples, out=None, options=Options(cache=False))
    assert not result.diagnostics
    return {script.job.id: script for script in result.scripts}


def test_the_job_part_of_an_example_is_within_its_goal(compiled):
    counts = {job_id: len(job_part(script)) for job_id, script in compiled.items()}
    for job_id, goal in JOB_PART_GOALS.items():
        assert counts[job_id] <= goal, counts


def test_a_script_embeds_the_parts_library_parts_names_in_its_order_and_nothing_between(
        compiled):
    for script in compiled.values():
        start, end = library_block(script.text)
        assert script.text[start:end] == "\n".join(
            part_text(name) for name in library_parts(script.job))


def test_the_header_names_each_embedded_part_by_its_sha256(compiled):
    for script in compiled.values():
        line = next(line for line in script.text.splitlines() if line.startswith("# library  "))
        version, _, listing = line.removeprefix("# library  obc ").partition(" ")
        assert version == __version__
        named = dict(entry.split(" ") for entry in listing.split(", "))
        start, end = library_block(script.text)
        block = script.text[start:end]
        assert list(named) == list(library_parts(script.job))
        for name, digest in named.items():
            assert digest == "sha256:" + hashlib.sha256(part_text(name).encode()).hexdigest()
            assert part_text(name) in block


def test_two_runs_of_a_sweep_differ_in_no_line_of_the_library(compiled):
    runs = [script for script in compiled.values() if script.job.sweep is not None]
    assert len(runs) >= 2
    blocks = {script.text[slice(*library_block(script.text))] for script in runs}
    assert len(blocks) == 1


def test_two_runs_of_the_sweep_example_differ_in_few_lines_of_the_job_part(compiled):
    runs = {job_id: job_part(script) for job_id, script in compiled.items()
            if script.job.source_file == "examples/sweep-lr.yaml"}
    assert len(runs) == 6
    changed = {(a, b): lines_changed(runs[a], runs[b])
               for a, b in itertools.combinations(sorted(runs), 2)}
    assert max(changed.values()) <= SWEEP_RUNS_GOAL, changed
    assert min(changed.values()) >= 4  # at least the job's name, line, settings and record


def test_the_words_part_quotes_as_shell_py_does():
    # obc_quote prints a word bare or quoted by the same rule as compiler/core/shell.py.
    case = PARTS["words"].split("obc_quote() {\n  case $1 in\n", 1)[1].split(")", 1)[0]
    assert case == (f"    '' | *[!{shell.PLAIN_CHARS}]* | "
                    + " | ".join(shell.quote(word) for word in sorted(shell.RESERVED_WORDS)))


def test_the_main_part_numbers_the_signals_as_obc_does():
    function = PARTS["main"].split("obc_signal_number() {", 1)[1].split("\n}", 1)[0]
    numbers = dict(re.findall(r"(\w+)\) echo (\d+) ;;", function))
    assert {name: int(number) for name, number in numbers.items()} == SIGNAL_NUMBERS
