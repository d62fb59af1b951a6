"""sweep.sh, run as a user would (docs/sweeps.md): --list, --dry-run and --run alike in
every shell of the matrix, runs in parallel lanes, signals, a job.sh edited after compile
refused with exit 3, and usage errors. The runs are native jobs of the stub trainer."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from compiler.pipeline.changes import changes_to as plan
from compiler.pipeline.pipeline import compile_files
from compiler.pipeline.write import apply
from tests.conftest import SHELLS, Sandbox, make_sandbox, start_script, untimed
from tests.support.processes import alive

SWEEP = """\
version: 1
id: sw
runtime: {kind: native}
steps: [{name: s, run: [record, step]}]
matrix:
  axes:
    a: {set: env.A, values: [x, y]}
    b: {set: env.B, values: [1, 2]}
  exclude: [{a: y, b: 2}]
"""
IDS = ["sw-x-1", "sw-x-2", "sw-y-1"]


def compile_out(root: Path, text: str) -> Path:
    """Compile the sweep `text` into root/out as `obc compile` does; return OUT."""
    (root / "sweep.yaml").write_text(text)
    result = compile_files([root / "sweep.yaml"], out=root / "out")
    assert not result.diagnostics, [d.text() for d in result.diagnostics]
    apply(plan(root / "out", result.outputs))
    return root / "out"


def compile_script(root: Path, text: str) -> Path:
    """Compile the sweep `text` (id sw) into root/out; return its sweep.sh."""
    return compile_out(root, text) / "sw/sweep.sh"


def run(script: Path, *args: str, shell: str = "dash", box: Sandbox,
        **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([*SHELLS[shell], str(script), *args], env=box.env(**env),
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=120, check=False)


def records(box: Sandbox) -> list[dict]:
    return [{"argv": r["argv"], "A": r["env"].get("A"), "B": r["env"].get("B"),
             "group": r["env"].get("WANDB_RUN_GROUP"), "cwd": r["cwd"]} for r in box.records()]


@pytest.mark.parametrize("shell", SHELLS)
def test_list_dry_run_and_run_do_the_same_in_every_shell(tmp_path, shell):
    script = compile_script(tmp_path, SWEEP)
    box = make_sandbox(tmp_path / "box")
    out = tmp_path / "out"

    listed = run(script, "--list", shell=shell, box=box)
    assert (listed.returncode, listed.stderr) == (0, "")
    assert listed.stdout == "index\tid\ta\tb\n0\tsw-x-1\tx\t1\n1\tsw-x-2\tx\t2\n2\tsw-y-1\ty\t1\n"
    assert listed.stdout == "".join((out / "sw/runs.tsv").read_text().splitlines(True)[2:])

    dry = run(script, "--dry-run", shell=shell, box=box)
    assert (dry.returncode, dry.stderr) == (0, "")
    assert dry.stdout == "".join(f"/bin/sh {out}/{run_id}/job.sh\n" for run_id in IDS)
    assert box.records() == [] and not (box.home / "overbrainer").exists()

    done = run(script, "--run", shell=shell, box=box)
    assert done.returncode == 0, done.stderr
    runs = box.home / "overbrainer/runs"
    assert records(box) == [
        {"argv": ["step"], "A": a, "B": b, "group": "sw", "cwd": str(runs / f"sw-{a}-{b}")}
        for a, b in (("x", "1"), ("x", "2"), ("y", "1"))]
    messages = [line for line in untimed(done.stderr) if "step 1/1" not in line]
    assert messages == [
        "obc: run 1/3 sw-x-1: started", "obc: sw-x-1 done", "obc: run 1/3 sw-x-1: done",
        "obc: run 2/3 sw-x-2: started", "obc: sw-x-2 done", "obc: run 2/3 sw-x-2: done",
        "obc: run 3/3 sw-y-1: started", "obc: sw-y-1 done", "obc: run 3/3 sw-y-1: done",
        "obc: sweep sw: 3 runs done"]

    # An edited job.sh: nothing starts, and the sweep says which file and why.
    job = out / "sw-x-2/job.sh"
    job.write_text(job.read_text() + "# edited\n")
    for args in (["--run"], ["--dry-run"], ["--run", "sw-y-1", "sw-x-2"]):
        refused = run(script, *args, shell=shell, box=box)
        assert (refused.returncode, refused.stdout) == (3, ""), args
        assert refused.stderr == (
            f"obc: {job} is not the job.sh obc compiled for run sw-x-2 (its sha256 differs): "
            "compile the sweep again, or restore the file\n")
    assert len(box.records()) == 3


def test_named_runs_run_alone_in_the_order_given(tmp_path):
    script = compile_script(tmp_path, SWEEP)
    box = make_sandbox(tmp_path / "box")
    done = run(script, "--run", "sw-y-1", "sw-x-1", "sw-y-1", box=box)
    assert done.returncode == 0, done.stderr
    assert [(r["A"], r["B"]) for r in records(box)] == [("y", "1"), ("x", "1")]
    assert "obc: sweep sw: 2 runs done" in done.stderr


def test_a_failed_run_fails_the_sweep_and_the_others_still_run(tmp_path):
    script = compile_script(tmp_path, SWEEP.replace(
        "    b: {set: env.B, values: [1, 2]}",
        "    b: {set: env.B, values: [1, 2]}\n"
        "    code: {zero: {}, seven: {steps: [{name: s, run: [record, --exit, '7']}]}}"))
    box = make_sandbox(tmp_path / "box")
    done = run(script, "--run", box=box)
    assert done.returncode == 1
    assert len(box.records()) == 6
    assert "obc: run 2/6 sw-x-1-seven: failed with exit code 7" in done.stderr.splitlines()
    assert done.stderr.endswith("obc: sweep sw: not every run succeeded (see above)\n")


# Each run's step says it is running (a file named after it), waits for the run named by
# PARTNER to say so too (or gives up after 30 s), and records how many were running.
RENDEZVOUS = """\
version: 1
id: sw
runtime: {kind: native}
steps:
  - name: s
    run:
      - sh
      - -c
      - >-
        d=$OBC_STUB_STATE/running; mkdir -p "$d"; : > "$d/$ME";
        i=0; while [ -n "$PARTNER" ] && [ ! -e "$d/$PARTNER" ] && [ ! -e "$d/../$PARTNER.done" ];
        do i=$((i+1)); [ $i -lt 300 ] || exit 9; sleep 0.1; done;
        ls "$d" | wc -l >> "$OBC_STUB_STATE/counts"; : > "$d/../$ME.done"; rm "$d/$ME"
matrix:
  axes:
    run:
      one: {env: {ME: one, PARTNER: two}}
      two: {env: {ME: two, PARTNER: one}}
      three: {env: {ME: three, PARTNER: ""}}
      four: {env: {ME: four, PARTNER: ""}}
      five: {env: {ME: five, PARTNER: ""}}
"""


@pytest.mark.parametrize("shell", ["dash", "bash", "posh", "yash", "ksh93"])
def test_parallel_lanes_run_runs_side_by_side_and_never_more_than_n(tmp_path, shell):
    script = compile_script(tmp_path, RENDEZVOUS)
    box = make_sandbox(tmp_path / "box")
    # In two lanes, `one` and `two` start together (the first of each lane) and meet; one
    # after the other, `one` would wait for `two` in vain, and fail.
    done = run(script, "--run", "--parallel", "2", shell=shell, box=box)
    assert done.returncode == 0, done.stderr
    counts = [int(n) for n in (box.state / "counts").read_text().split()]
    assert len(counts) == 5 and max(counts) <= 2


@pytest.mark.parametrize("shell", SHELLS)
def test_a_signal_stops_every_running_run_and_its_step(tmp_path, shell):
    script = compile_script(tmp_path, SWEEP.replace("run: [record, step]",
                                                 "run: [record, --sleep, '300']"))
    box = make_sandbox(tmp_path / "box")
    sweep = start_script(script, "--run", "--parallel", "2", shell=shell, env=box.env())
    try:
        deadline = 600
        while len(box.records()) < 2 and deadline:
            deadline -= 1
            subprocess.run(["sleep", "0.1"], check=True)
        assert len(box.records()) == 2, "the first two runs did not start"
        sweep.send_signal(signal.SIGTERM)
        stdout, stderr = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 128 + 15, stderr
    assert "obc: TERM received, stopping the runs" in stderr
    assert stderr.count("obc: TERM received, stopping\n") == 2  # each job.sh stopped its step
    for record in box.records():
        assert not alive(record["pid"])
    assert len(box.records()) == 2  # the third never started
    statuses = [json.loads((box.home / f"overbrainer/runs/{run_id}/.obc/status.json")
                           .read_text())["state"] for run_id in IDS[:2]]
    assert statuses == ["stopped", "stopped"]


@pytest.mark.parametrize(("args", "message"), [
    ([], "give one of --list, --status, --run, --submit"),
    (["--list", "--run"], "give one of --list, --status, --run, --submit"),
    (["--status", "--run"], "give one of --list, --status, --run, --submit"),
    (["--status", "--dry-run"], "--status takes no --dry-run"),
    (["--run", "--parallel", "0"], "--parallel takes a number of runs, 1 or more"),
    (["--run", "--parallel"], "--parallel needs a value"),
    (["--run", "sw-z-1"], "no run is named 'sw-z-1' (sweep.sh --list shows them)"),
    (["--run", "--", "--partition=x"], "only --submit takes sbatch options after --"),
    (["--list", "sw-x-1"], "--list takes no runs and no --dry-run"),
    (["--what"], "unknown option: --what"),
])
def test_usage_errors_exit_2(tmp_path, args, message):
    script = compile_script(tmp_path, SWEEP)
    box = make_sandbox(tmp_path / "box")
    result = run(script, *args, box=box)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines()[0] == f"sweep.sh: {message}"
    assert result.stderr.splitlines()[1].startswith("usage: sweep.sh --list")


def test_help_prints_the_summary_of_the_header(tmp_path):
    script = compile_script(tmp_path, SWEEP)
    result = run(script, "--help", box=make_sandbox(tmp_path / "box"))
    header = [line[2:] for line in script.read_text().splitlines()[3:]
              if line.startswith("# ")][:len(result.stdout.splitlines())]
    assert result.returncode == 0 and result.stdout.splitlines()[0] == (
        "sweep       sw: 3 runs: 3 of the 4 combinations of the axes (1 excluded)")
    assert [line.rstrip() for line in result.stdout.splitlines()] == header


def test_a_sweep_without_slurm_cannot_be_submitted(tmp_path):
    script = compile_script(tmp_path, SWEEP)
    result = run(script, "--submit", box=make_sandbox(tmp_path / "box"))
    assert (result.returncode, result.stderr) == (
        2, "obc: sweep sw cannot be submitted: sw-x-1, sw-x-2, sw-y-1 have no slurm block\n")


SLURM = SWEEP + "  max_parallel: 2\n" + "slurm: {partition: debug}\n"


def test_submit_dry_run_prints_the_sbatch_of_the_array_or_of_each_run(tmp_path):
    script = compile_script(tmp_path, SLURM)
    box = make_sandbox(tmp_path / "box")
    out = tmp_path / "out"
    every = run(script, "--submit", "--dry-run", "--", "--test-only", box=box)
    assert (every.returncode, every.stderr) == (0, "")
    assert every.stdout == (f"sbatch '--array=0-2%2' --test-only {out}/sw/sweep.sh "
                            f"--array-task {out}\n")
    some = run(script, "--dry-run", "--submit", "sw-y-1", "sw-x-1", box=box)
    assert some.stdout == f"sbatch '--array=2,0%2' {out}/sw/sweep.sh --array-task {out}\n"
    # A run whose #SBATCH lines differ: each run is its own sbatch.
    script = compile_script(tmp_path, SLURM.replace("{a: y, b: 2}]", "{a: y, b: 2}]\n"
                                                 "  runs: {long: {slurm: {time: 60}}}"))
    each = run(script, "--submit", "--dry-run", "sw-long", "sw-x-1", box=box)
    assert (each.returncode, each.stderr) == (0, "")
    assert each.stdout == f"sbatch {out}/sw-long/job.sh\nsbatch {out}/sw-x-1/job.sh\n"


def test_each_run_its_own_sbatch_stops_at_the_first_that_fails(tmp_path):
    script = compile_script(tmp_path, SLURM.replace("{a: y, b: 2}]", "{a: y, b: 2}]\n"
                                                    "  runs: {long: {slurm: {time: 60}}}"))
    box = make_sandbox(tmp_path / "box")
    # An sbatch that takes the first script and refuses the second.
    fake = box.bin / "sbatch"
    fake.write_text('#!/bin/sh\nif [ -e "$OBC_STUB_STATE/once" ]; then echo "sbatch: error: '
                    'no" >&2; exit 1; fi\n: > "$OBC_STUB_STATE/once"\necho "Submitted batch '
                    'job 7 for $*"\n')
    fake.chmod(0o755)
    result = run(script, "--submit", "--", "--hold", box=box)
    out = tmp_path / "out"
    assert result.returncode == 1
    assert result.stdout == f"Submitted batch job 7 for --hold {out}/sw-x-1/job.sh\n"
    assert result.stderr == ("sbatch: error: no\n"
                             "obc: sbatch failed for run sw-x-2; the runs before it were "
                             "submitted\n")


EACH = SLURM.replace("{a: y, b: 2}]", "{a: y, b: 2}]\n  runs: {long: {slurm: {time: 60}}}")


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("option", [["--array=4-5"], ["--array", "4-5"], ["-a4-5"],
                                    ["--hold", "-a", "1"], ["--arr=0-1%1"]])
def test_submit_refuses_an_array_of_its_own(tmp_path, shell, option):
    script = compile_script(tmp_path, SLURM)
    result = run(script, "--submit", "--", *option, shell=shell,
                 box=make_sandbox(tmp_path / "box"))
    assert (result.returncode, result.stdout) == (2, "")
    word = next(word for word in option if word.startswith("-a") or word.startswith("--ar"))
    assert result.stderr.splitlines()[0] == (
        "sweep.sh: --submit makes the job array itself, one task per run: name the runs to "
        f"submit rather than pass {word} to sbatch")


def test_submit_of_runs_each_their_own_job_refuses_an_array_too(tmp_path):
    script = compile_script(tmp_path, EACH)
    result = run(script, "--submit", "--dry-run", "--", "--array=0-3",
                 box=make_sandbox(tmp_path / "box"))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines()[0] == (
        "sweep.sh: each run is a job of its own, whose array tasks would run one after the "
        "other in its one run dir: --array=0-3 cannot be passed to sbatch")


def test_submit_passes_on_options_that_only_look_like_array(tmp_path):
    script = compile_script(tmp_path, SLURM)
    result = run(script, "--submit", "--dry-run", "--", "--account=a", "-A", "arr",
                 "--comment=--array", box=make_sandbox(tmp_path / "box"))
    out = tmp_path / "out"
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (f"sbatch '--array=0-2%2' '--account=a' -A arr '--comment=--array' "
                             f"{out}/sw/sweep.sh --array-task {out}\n")
