"""TERM, INT and HUP while an apptainer step runs: the job sends TERM to apptainer, which
passes it on to the program in the container (the stub does as apptainer does), and KILLs
what is left of the step's process group after the stop timeout; it exits 128+N."""

from __future__ import annotations

import signal

import pytest

from tests.conftest import SHELLS, compile_text, start_script, write_script
from tests.script.test_apptainer_jobs import run_file
from tests.script.test_signals import SIGNALS, step_records, stop_with
from tests.support.engines import wait_until
from tests.support.processes import alive, group_members

TWO_STEPS = """\
steps:
  - {name: long, run: [record, --sleep, "300"]}
  - {name: after, run: [record, after]}
"""
# A program that takes a while to end on TERM, and its own child in the step's process
# group, which notes whether the program had ended when TERM reached it (embedded files).
PROGRAM = """\
sh child.sh >/dev/null 2>&1 &
trap 'sleep 2; : > ended; exit 143' TERM
echo "$$ $!" > up.txt
while :; do sleep 0.1; done
"""
CHILD = """\
trap 'if [ -e ended ]; then echo after; else echo before; fi > child.txt; exit 0' TERM
while :; do sleep 0.1; done
"""
WITH_A_CHILD = """\
steps: [{name: long, run: [sh, program.sh]}]
files: {program.sh: program.sh, child.sh: child.sh}
"""


def start(tmp_path, sandbox, body: str, shell: str = "dash", stop_timeout: int = 600):
    """Start the job. Its stop timeout is longer than stop_with waits for the job's output
    to close: what it leaves running for the stop timeout must not hold that output."""
    text = run_file(tmp_path, f"  stop_timeout: {stop_timeout}\n", body)
    return start_script(write_script(tmp_path, compile_text(tmp_path, text)), "--run-dir",
                        str(tmp_path / "run"), shell=shell, env=sandbox.env())


@pytest.mark.parametrize(("shell", "name", "number"),
                         [(shell, "TERM", signal.SIGTERM) for shell in SHELLS]
                         + [("dash", name, number) for name, number in SIGNALS[1:]])
def test_a_signal_stops_the_apptainer_step_and_the_job_exits_128_plus_n(tmp_path, sandbox,
                                                                        shell, name, number):
    script = start(tmp_path, sandbox, TWO_STEPS, shell)
    wait_until(lambda: step_records(sandbox), "the step to start")
    (step,) = step_records(sandbox)
    _, stderr = stop_with(script, number)
    assert script.returncode == 128 + number, stderr
    assert stderr.splitlines()[-1] == f"obc: {name} received, stopping"
    wait_until(lambda: not group_members(step["pgid"]), "the step's process group to end")
    assert len(step_records(sandbox)) == 1  # the next step never started


def test_term_goes_to_apptainer_alone_not_to_the_whole_group(tmp_path, sandbox):
    # apptainer passes TERM on to the program only, as docker's init does; what the program
    # leaves in the step's process group is ended only once the program has.
    (tmp_path / "program.sh").write_text(PROGRAM)
    (tmp_path / "child.sh").write_text(CHILD)
    script = start(tmp_path, sandbox, WITH_A_CHILD)
    up = tmp_path / "run/up.txt"
    wait_until(lambda: up.exists() and up.read_text().endswith("\n"), "the step to start")
    program, child = map(int, up.read_text().split())
    _, stderr = stop_with(script, signal.SIGTERM)
    assert script.returncode == 143, stderr
    wait_until(lambda: not alive(program) and not alive(child), "the step to end")
    assert (tmp_path / "run/child.txt").read_text() == "after\n"


def test_what_ignores_term_is_killed_after_the_stop_timeout(tmp_path, sandbox):
    script = start(tmp_path, sandbox, """\
steps:
  - {name: train, run: [sh, -c, 'trap "" TERM; echo $$ > up.txt; while :; do sleep 1; done']}
""", stop_timeout=1)
    up = tmp_path / "run/up.txt"
    wait_until(lambda: up.exists() and up.read_text(), "the step to start")
    program = int(up.read_text())
    _, stderr = stop_with(script, signal.SIGTERM)
    assert script.returncode == 143, stderr
    wait_until(lambda: not alive(program), "the program to be killed")
