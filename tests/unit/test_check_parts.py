"""A job's script checked in its two parts (compiler/check/parts.py) finds what shellcheck
finds in the whole script: on random jobs of every runtime, trainer, Slurm setting, steps,
env, secrets and files, with hostile values (test_shapes.py's run files), and with hostile
lines put into the job part, which raise findings of their own or in the library (a name
misspelt, a variable never used or never set, a call that never returns, a function never
called). With the real shellcheck."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from compiler.check import shellcheck
from compiler.check.parts import split
from compiler.check.shellcheck import check_in_parts, check_scripts, check_texts
from compiler.core.cache import Store
from compiler.pipeline.build import build_jobs
from compiler.render.render import render_job
from tests.conftest import REPO, compile_text
from tests.unit.test_shapes import run_files

# Lines for a function of the job part (obc_steps, the first to run the steps).
IN_A_FUNCTION = (
    "  echo $foo",                        # SC2086, SC2154
    "  unused_var=1",                     # SC2034
    '  echo "$OBC_RUN_DIRR"',             # SC2153: like a name the library assigns
    '  echo "$OBC_LOCKD"',                # like one only the library uses
    "  OBC_DRY_RUN=1",                    # read by the library only: no finding
    '  echo "$1"',                        # SC2120 in the job, SC2119 in the library
    "  obc_help x",                       # a function of the job, with an argument
    "  obc_quote",                        # one of the library's, without
    "  obc_fail x; echo after",           # never returns: SC2317 after it
    "  exit 256",                         # SC2242; and the library's code after the call
    "  cd /tmp",                          # SC2164
    '  x=$(obc_now)',                     # a call in a command substitution
    "  read -r OBC_WORD <<EOF\n$OBC_NOT_SET\nEOF",
)
# Lines for the top level of the job part, before its settings.
AT_THE_TOP = ("obc_never() { :; }", "foo=1", 'echo "$bar"', "obc_usage x",
              "obc_exit() { :; }")
SCRIPT = REPO / "out" / "slurm-multinode" / "job.sh"
STORE = Store(None, "findings")
SEEN: dict = {}  # the library's checks, the same for many examples


def inject(text: str, line: str | None, top: bool) -> str:
    if line is None:
        return text
    if top:
        return text.replace("\n# --- the job ---", f"\n{line}\n# --- the job ---", 1)
    return text.replace("\nobc_steps() {\n", f"\nobc_steps() {{\n{line}\n", 1)


@pytest.mark.slow  # minutes: shellcheck on 25 whole scripts and their parts
@settings(derandomize=True, database=None, max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(run=run_files(), hostile=st.sampled_from(
    [None, *((line, False) for line in IN_A_FUNCTION), *((line, True) for line in AT_THE_TOP)]))
def test_a_script_checked_in_parts_gets_the_whole_scripts_findings(run, hostile,
                                                                   tmp_path_factory):
    data, content = run
    root = tmp_path_factory.mktemp("parts")
    (root / "notes.txt").write_text(content, encoding="utf-8")
    (root / "run.yaml").write_text(json.dumps(data), encoding="utf-8")
    built = build_jobs(root / "run.yaml", {})
    assume(built.jobs)  # a value the schema refuses: nothing to check
    ((_, job),) = built.jobs
    text = inject(render_job(job), *(hostile or (None, False)))
    event(f"runtime: {data['runtime']['kind']}, hostile: {hostile is not None}")
    whole = check_texts([text], STORE, seen=SEEN)[text]
    in_parts = check_in_parts([text], STORE, seen=SEEN)[text]
    event("in parts: the same findings" if in_parts == whole else
          f"in parts: other findings ({sorted({f.code for f in {*in_parts} ^ {*whole}})}),"
          " so checked whole")
    # A clean check in parts means a clean script; one with findings has the script
    # checked whole, so what obc reports is always the whole script's findings.
    assert in_parts or not whole, (hostile, whole)
    assert check_scripts([("job.sh", text, text)], STORE, seen=SEEN) == \
        check_scripts([("job.sh", text, None)], STORE, seen=SEEN)
    # Only whether code is reached can differ: shellcheck's reachability analysis of a
    # whole script does not always follow a call that never returns as it does in a part.
    assert {f for f in in_parts if f.code not in (2317, 2329)} == \
        {f for f in whole if f.code not in (2317, 2329)}


def test_the_job_part_is_checked_as_written_and_the_library_once(tmp_path):
    texts = [compile_text(tmp_path, f"""\
version: 1
id: run-{i}
runtime: {{kind: docker}}
secrets: [{secrets}]
steps: [{{name: train, run: [python, train.py]}}]
""") for i, secrets in enumerate(["HF_TOKEN", "HF_TOKEN, WANDB_API_KEY"])]
    (job, library), (other_job, other_library) = split(texts[0]), split(texts[1])
    assert job.text.startswith(texts[0][:texts[0].index("# --- obc's library")])
    assert library.text == other_library.text  # one check for both: the library's
    assert job.text != other_job.text
    assert "# --- obc plan record" in job.text  # the record is the job's
    lines = texts[0].split("\n")
    for part in (job, library):
        for number, line in zip(part.lines, part.text.removesuffix("\n").split("\n"),
                                strict=True):
            assert number is None or lines[number - 1] == line


def test_scripts_of_one_shape_are_split_once(tmp_path, monkeypatch):
    # A chunk's 64 scripts share a few shapes: splitting each again made a cold compile of
    # 2,000 run files 1.4 times as slow.
    text = compile_text(tmp_path, "version: 1\nid: j\nruntime: {kind: native}\n"
                                  "steps: [{name: a, run: [echo]}]\n")
    splits = []
    monkeypatch.setattr(shellcheck, "split", lambda text: splits.append(text) or split(text))
    found = check_in_parts([text] * 3, STORE, parallel=False, seen=SEEN)
    assert (splits, found) == ([text], {text: ()})


def test_a_shape_is_split_once_in_a_process_not_once_a_chunk(tmp_path, monkeypatch):
    # 10,000 run files are 157 chunks of the same few shapes: splitting each shape again in
    # every chunk was a sixth of a cold compile.
    text = compile_text(tmp_path, "version: 1\nid: j\nruntime: {kind: native}\n"
                                  "steps: [{name: a, run: [echo]}]\n")
    splits = []
    monkeypatch.setattr(shellcheck, "split", lambda text: splits.append(text) or split(text))
    seen = {}
    found = [check_in_parts([text], STORE, parallel=False, seen=seen) for _ in range(3)]
    assert (splits, found) == ([text], [{text: ()}] * 3)


def test_the_parts_read_the_same_in_every_process():
    # The cache knows a check by its text: a summary in another order would check the
    # library again in each new process.
    program = ("import hashlib, sys; from compiler.check.parts import split; "
               "print(*(hashlib.sha256(p.text.encode()).hexdigest() for p in "
               "split(open(sys.argv[1]).read())))")
    digests = {subprocess.run([sys.executable, "-c", program, str(SCRIPT)], check=True,
                              capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}).stdout
               for seed in ("1", "2", "3")}
    assert len(digests) == 1
