"""Slurm jobs on a real cluster: two emulated nodes with fake GPUs (tests/support/slurm_cluster.py).

Each test compiles a run file with a `slurm` block, submits the job.sh with sbatch exactly as
an admin would, follows it with scontrol, and reads what the stub trainer recorded.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.pipeline.pipeline import compile_files
from compiler.validate.rules.sbatch_options import (
    NEWER_SBATCH_OPTIONS,
    SBATCH_22_05_OPTIONS,
    SBATCH_OPTIONS,
    sbatch_matches,
)
from tests.conftest import REPO, Sandbox, compile_text, container_name, untimed, write_script
from tests.support.engines import trainer_records
from tests.support.processes import alive
from tests.support.slurm_cluster import SlurmCluster

pytestmark = pytest.mark.slow


def submit(slurm: SlurmCluster, sandbox: Sandbox, tmp_path: Path, text: str, **env: str):
    """Compile `text` and sbatch it from tmp_path, with the sandbox's environment; return
    the job id."""
    script = write_script(tmp_path, compile_text(tmp_path, text))
    return slurm.submit(script, cwd=tmp_path, env=sandbox.env(**env))


def output(tmp_path: Path, name: str, job_id: str) -> str:
    """The job's output file (the default --output=%x-%j.out, in the submit dir)."""
    return (tmp_path / f"{name}-{job_id}.out").read_text()


def test_single_node_native_job_runs_every_step_with_the_gpus_slurm_picked(
        slurm, sandbox, venv, tmp_path):
    job_id = submit(slurm, sandbox, tmp_path, f"""\
version: 1
id: single
runtime: {{kind: native, venv: {venv}}}
trainer:
  axolotl: {{config: {{base_model: x}}, preprocess: true, merge: true}}
secrets: [HF_TOKEN]
slurm: {{partition: debug, time: 10, gpus_per_node: 2, cpus_per_task: 1}}
""", HF_TOKEN="t0ken")
    job = slurm.wait(job_id)
    log = output(tmp_path, "single", job_id)
    assert (job.state, job.exit_code) == ("COMPLETED", 0), log
    run_dir = sandbox.home / "overbrainer/runs/single"
    steps = [r for r in sandbox.records() if "program" in r]
    assert [(s["argv"], s["cwd"]) for s in steps] == [
        (["preprocess", "axolotl.yaml"], str(run_dir)),
        (["train", "axolotl.yaml"], str(run_dir)),
        (["merge-lora", "axolotl.yaml"], str(run_dir)),
    ]
    for step in steps:
        assert step["env"]["CUDA_VISIBLE_DEVICES"] == "0,1"
        assert step["env"]["HF_TOKEN"] == "t0ken"
        assert step["env"]["SLURM_JOB_ID"] == job_id
        # A one-node job sets no rendezvous.
        assert "MASTER_ADDR" not in step["env"] and "NODE_RANK" not in step["env"]
    assert "obc: single done" in log and "t0ken" not in log


def test_a_failing_step_fails_the_job_with_its_exit_code(slurm, sandbox, tmp_path):
    job_id = submit(slurm, sandbox, tmp_path, """\
version: 1
id: failing
runtime: {kind: native}
steps:
  - {name: fails, run: [record, --exit, "7"]}
  - {name: never, run: [record]}
slurm: {time: "00:05:00"}
""")
    job = slurm.wait(job_id)
    assert (job.state, job.exit_code) == ("FAILED", 7)
    assert [r["argv"] for r in sandbox.records()] == [["--exit", "7"]]
    assert "obc: step 1/2 fails failed with exit code 7" in untimed(
        output(tmp_path, "failing", job_id))


def test_every_node_gets_its_rank_and_the_same_rendezvous(slurm, sandbox, tmp_path):
    job_id = submit(slurm, sandbox, tmp_path, """\
version: 1
id: ranks
runtime: {kind: native}
steps:
  - {name: everywhere, run: [record, rank], nodes: all}
  - {name: once, run: [record, once]}
secrets: [HF_TOKEN]
slurm: {nodes: 2, gpus_per_node: 2, rendezvous_port: 29611}
""", HF_TOKEN="t0ken")
    job = slurm.wait(job_id)
    assert (job.state, job.exit_code) == ("COMPLETED", 0), output(tmp_path, "ranks", job_id)
    records = sandbox.records()
    steps = sorted((r["env"] for r in records if r["argv"] == ["rank"]),
                   key=lambda env: env["NODE_RANK"])
    assert [(env["NODE_RANK"], env["SLURMD_NODENAME"]) for env in steps] == [
        ("0", "n1"), ("1", "n2")]
    # A step that says nothing of nodes, and is not train, runs once, on the first node.
    (once,) = [r["env"] for r in records if r["argv"] == ["once"]]
    assert (once["NODE_RANK"], once["SLURMD_NODENAME"]) == ("0", "n1")
    for env in steps:
        assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("n1", "29611")
        assert (env["NNODES"], env["GPUS_PER_NODE"]) == ("2", "2")
        assert env["CUDA_VISIBLE_DEVICES"] == "0,1"
        assert env["HF_TOKEN"] == "t0ken"


def test_axolotl_trains_on_every_node_and_preprocesses_and_merges_once(
        slurm, sandbox, venv, tmp_path):
    job_id = submit(slurm, sandbox, tmp_path, f"""\
version: 1
id: multi
runtime: {{kind: native, venv: {venv}}}
trainer:
  axolotl: {{config: {{base_model: x}}, preprocess: true, merge: true}}
slurm: {{nodes: 2, gpus_per_node: 2, cpus_per_task: 2, requeue: true}}
""")
    job = slurm.wait(job_id)
    assert (job.state, job.exit_code) == ("COMPLETED", 0), output(tmp_path, "multi", job_id)
    torchrun = ["--launcher", "torchrun", "--", "--nnodes", "2", "--nproc_per_node", "2",
                "--rdzv_backend", "c10d", "--rdzv_endpoint", "n1:29500", "--rdzv_id", job_id]
    records = sandbox.records()
    assert [r["argv"] for r in records] == [
        ["preprocess", "axolotl.yaml"],
        ["train", "axolotl.yaml", *torchrun],
        ["train", "axolotl.yaml", *torchrun],
        ["merge-lora", "axolotl.yaml"],
    ]
    assert sorted(r["env"]["SLURMD_NODENAME"] for r in records[1:3]) == ["n1", "n2"]
    assert records[0]["env"]["SLURMD_NODENAME"] == records[3]["env"]["SLURMD_NODENAME"] == "n1"


@pytest.mark.parametrize("nodes", [1, 2])
def test_slurms_signal_to_the_script_stops_the_running_step(slurm, sandbox, tmp_path, nodes):
    job_id = submit(slurm, sandbox, tmp_path, f"""\
version: 1
id: stopped
runtime: {{kind: native}}
steps: [{{name: long, run: [record, --sleep, "300"], nodes: all}}]
slurm: {{nodes: {nodes}, gpus_per_node: 1}}
""")
    slurm.wait_for(lambda: len(sandbox.records()) == nodes, 60, "the step to start")
    # What --signal=B:TERM@120 does before the time limit: TERM to the job script only.
    assert slurm.run("scancel", "--batch", "--signal=TERM", job_id).returncode == 0
    job = slurm.wait(job_id)
    log = output(tmp_path, "stopped", job_id)
    assert job.exit_code == 128 + 15, log
    assert "obc: TERM received, stopping" in log
    for record in sandbox.records():
        slurm.wait_for(lambda pid=record["pid"]: not alive(pid), 30, "the step to end")


def test_scancel_stops_the_job_and_its_step(slurm, sandbox, tmp_path):
    job_id = submit(slurm, sandbox, tmp_path, """\
version: 1
id: cancelled
runtime: {kind: native}
steps: [{name: long, run: [record, --sleep, "300"]}]
slurm: {}
""")
    slurm.wait_for(lambda: len(sandbox.records()) == 1, 60, "the step to start")
    assert slurm.run("scancel", job_id).returncode == 0
    job = slurm.wait(job_id)
    assert job.state == "CANCELLED"
    (record,) = sandbox.records()
    slurm.wait_for(lambda: not alive(record["pid"]), 30, "the step to end")


def test_a_requeued_job_skips_the_steps_it_finished(slurm, sandbox, tmp_path):
    # `second` waits the first time it runs (until the job is requeued) and ends at once on
    # the second: the file it leaves says it ran before.
    job_id = submit(slurm, sandbox, tmp_path, """\
version: 1
id: requeued
runtime: {kind: native}
steps:
  - {name: first, run: [record, first]}
  - {name: second, run: [sh, -c, "record second; [ -e again ] || { : > again; exec sleep 300; }"]}
  - {name: third, run: [record, third]}
slurm: {requeue: true}
""")
    slurm.wait_for(lambda: len(sandbox.records()) == 2, 60, "the second step to start")
    assert slurm.run("scontrol", "requeue", job_id).returncode == 0
    slurm.start_requeued(job_id)
    job = slurm.wait(job_id)
    log = output(tmp_path, "requeued", job_id)
    assert (job.state, job.exit_code, job.fields["Restarts"]) == ("COMPLETED", 0, "1"), log
    assert [r["argv"] for r in sandbox.records()] == [["first"], ["second"], ["second"], ["third"]]
    assert "obc: step 1/3 first: finished before for these inputs, skipped" in untimed(log)
    done = sandbox.home / "overbrainer/runs/requeued/.obc/done"
    assert sorted(p.name for p in done.iterdir()) == ["first", "second", "third"]
    assert (done / "third").read_text().startswith("sha256:")


def podman_job(podman, tmp_path: Path, job: str, body: str) -> str:
    return f"""\
version: 1
id: {job}
runtime: {{kind: podman, image: {podman.image}, extra_args: [--network=none]}}
paths: {{run_dir: {tmp_path / "run"}, cache_dir: {tmp_path / "cache"}}}
{body}"""


def test_a_podman_job_gets_the_gpus_slurm_picked_and_its_secrets_by_name(
        slurm, sandbox, podman, tmp_path):
    name = f"slurm-podman-{os.getpid()}"
    job_id = submit(slurm, sandbox, tmp_path, podman_job(podman, tmp_path, name, """\
steps:
  - {name: first, run: [record, one]}
  - {name: fails, run: [record, --exit, "5"]}
secrets: [HF_TOKEN]
slurm: {gpus_per_node: 2}
"""), PATH="/usr/local/bin:/usr/bin:/bin", HF_TOKEN="t0ken", **podman.env)
    job = slurm.wait(job_id)
    assert (job.state, job.exit_code) == ("FAILED", 5), output(tmp_path, name, job_id)
    first, fails = trainer_records(tmp_path / "run")
    assert (first.argv, fails.argv) == (["one"], ["--exit", "5"])
    assert first.env["CUDA_VISIBLE_DEVICES"] == "0,1" and first.env["HF_TOKEN"] == "t0ken"
    assert "SLURM_JOB_ID" not in first.env  # only what the job passes by name
    assert not podman.container_exists(container_name(name, tmp_path / "run"))


def test_scancel_stops_a_podman_jobs_container(slurm, sandbox, podman, tmp_path):
    name = f"slurm-podman-stop-{os.getpid()}"
    job_id = submit(slurm, sandbox, tmp_path, podman_job(podman, tmp_path, name, """\
steps: [{name: long, run: [record, --sleep, "300"]}]
slurm: {}
"""), PATH="/usr/local/bin:/usr/bin:/bin", **podman.env)
    try:
        slurm.wait_for(lambda: len(trainer_records(tmp_path / "run")) == 1, 60,
                       "the container to start")
        assert slurm.run("scancel", job_id).returncode == 0
        assert slurm.wait(job_id).state == "CANCELLED"
        slurm.wait_for(lambda: not podman.container_exists(container_name(name, tmp_path / "run")),
                       60, "the container to be gone")
    finally:
        podman("rm", "-f", container_name(name, tmp_path / "run"), check=False)


def test_sbatch_test_only_accepts_every_compiled_example(slurm, tmp_path):
    result = compile_files(sorted((REPO / "examples").glob("*.yaml")), out=tmp_path / "out")
    assert not result.diagnostics
    for script in result.scripts:
        path = write_script(tmp_path, script.text)
        test = slurm.run("sbatch", "--test-only", str(path))
        assert test.returncode == 0, (script, test.stderr)
        assert "to start at" in test.stderr


def test_the_time_limit_signal_reaches_the_trap(slurm, sandbox, tmp_path):
    # A lead time nearly as long as the limit (obc refuses one that leaves no time for the
    # stop): Slurm sends the signal at its first check after 20 s.
    job_id = submit(slurm, sandbox, tmp_path, """\
version: 1
id: timed
runtime: {kind: native, stop_timeout: 10}
steps: [{name: long, run: [record, --sleep, "300"]}]
slurm: {time: 2, signal: "B:TERM@100"}
""")
    job = slurm.wait(job_id, timeout=240)
    log = output(tmp_path, "timed", job_id)
    assert job.exit_code == 128 + 15, log
    assert "obc: TERM received, stopping" in log
    # (Slurm's first check may come before the step has started.)
    for record in sandbox.records():
        slurm.wait_for(lambda pid=record["pid"]: not alive(pid), 30, "the step to end")


# --- how sbatch reads options: the grounds of obc's rules for slurm.extra ----------------

def _getopt_reads(slurm: SlurmCluster, option: str) -> str:
    """How sbatch's getopt_long takes `--option=1`: "unknown", "ambiguous" or "an option".
    (--test-only first, and a script that does not exist: nothing is ever submitted.)"""
    stderr = slurm.run("sbatch", "--test-only", f"--{option}=1", "/nonexistent/job.sh").stderr
    if "unrecognized option" in stderr:
        return "unknown"
    return "ambiguous" if "is ambiguous" in stderr else "an option"


def _obc_reads(option: str) -> str:
    matches = sbatch_matches(option, SBATCH_22_05_OPTIONS)
    return "unknown" if not matches else "an option" if len(matches) == 1 else "ambiguous"


def test_sbatch_22_05_knows_every_option_obc_lists_for_it_and_no_newer_one(slurm):
    assert "slurm-wlm 22.05" in slurm.run("sbatch", "--version").stdout
    answers = {name: _getopt_reads(slurm, name) for name in SBATCH_OPTIONS}

    assert {answers[name] for name in SBATCH_22_05_OPTIONS} == {"an option"}
    # A newer option is unknown to it, or (--extra) an abbreviation of an older one.
    assert {name for name in NEWER_SBATCH_OPTIONS if answers[name] != "unknown"} == {"extra"}
    assert _getopt_reads(slurm, "nodes-x") == "unknown"


def test_sbatch_takes_an_abbreviation_exactly_as_obc_expects(slurm):
    prefixes = sorted({name[:end] for name in SBATCH_22_05_OPTIONS
                       for end in range(1, len(name))})

    differ = {prefix: (_getopt_reads(slurm, prefix), _obc_reads(prefix)) for prefix in prefixes
              if _getopt_reads(slurm, prefix) != _obc_reads(prefix)}

    assert len(prefixes) > 500 and differ == {}


def test_what_obc_refuses_in_slurm_extra_is_what_sbatch_misreads(slurm, tmp_path):
    extra = ["--comment=ticket#4711", "--requeu", "--signa=KILL@60", "--partitio=debug",
             "--ntasks-per-nod=4"]
    (tmp_path / "run.yaml").write_text(
        "version: 1\nid: misread\nruntime: {kind: native}\nsteps: [{name: a, run: [x]}]\n"
        "slurm: {partition: gpu, output: 'logs/run#1-%j.out', extra: [" + ", ".join(extra)
        + "]}\n")
    refused = {d.field for d in compile_files([tmp_path / "run.yaml"]).diagnostics}
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n#SBATCH --partition=gpu\n#SBATCH --output=logs/run#1-%j.out\n"
                      + "".join(f"#SBATCH {option}\n" for option in extra) + "true\n")

    verbose = slurm.run("sbatch", "--test-only", "-v", str(script)).stderr
    settings = dict(re.findall(r"^sbatch: ([a-z-]+) +: (.*)$", verbose, re.MULTILINE))

    assert refused == {"slurm.output", *(f"slurm.extra[{i}]" for i in range(len(extra)))}
    assert settings["output"].endswith("/logs/run")  # '#' ended the value
    assert settings["comment"] == "ticket"
    assert (settings["requeue"], settings["signal"]) == ("requeue", "KILL")
    assert (settings["partition"], settings["ntasks-per-node"]) == ("debug", "4")


ADMIN_POLICY = """\
version: 1
partitions: [debug]
job: {max_time: "01:00:00"}
sbatch: {allowed: [nice], refused: [exclusive]}
"""


def test_the_site_policy_refuses_at_compile_time_what_sbatch_would_take(slurm, tmp_path):
    """Issue 20: what the admin refuses never reaches sbatch, which would have taken it; what
    the admin allows, the real sbatch accepts; plan --format json carries every verdict."""
    (tmp_path / "obc-policy.yaml").write_text(ADMIN_POLICY)
    run = ("version: 1\nid: {id}\nruntime: {{kind: native}}\nsteps: [{{name: a, run: [x]}}]\n"
           "slurm: {{partition: {partition}, time: '{time}', extra: [{extra}]}}\n")
    (tmp_path / "refused.yaml").write_text(run.format(
        id="refused", partition="gpu", time="02:00:00", extra="--uid=0, --exclusive"))
    refused = compile_files([tmp_path / "refused.yaml"], out=tmp_path / "out")
    assert not refused.scripts
    assert {(d.field, d.message.partition(" (")[0]) for d in refused.diagnostics} == {
        ("slurm.partition", "partition gpu is not allowed by site policy rule partitions"),
        ("slurm.time", "time limit of the job: 7200 s"),
        ("slurm.extra[0]", "--uid is not allowed by obc's built-in sbatch allow-list"),
        ("slurm.extra[1]", "--exclusive is not allowed by site policy rule sbatch.refused"),
    }
    # The same lines, written by hand: sbatch itself takes them (the cluster has a gpu
    # partition, and no time limit).
    by_hand = tmp_path / "by-hand.sh"
    by_hand.write_text("#!/bin/sh\n#SBATCH --partition=gpu\n#SBATCH --time=02:00:00\n"
                       "#SBATCH --uid=0\n#SBATCH --exclusive\ntrue\n")
    assert slurm.run("sbatch", "--test-only", str(by_hand)).returncode == 0

    (tmp_path / "allowed.yaml").write_text(run.format(
        id="allowed", partition="debug", time="00:30:00", extra="--nice=10, --mail-type=END"))
    (script,) = compile_files([tmp_path / "allowed.yaml"], out=tmp_path / "out").scripts
    test = slurm.run("sbatch", "--test-only", str(write_script(tmp_path, script.text)))
    assert test.returncode == 0 and "to start at" in test.stderr, test.stderr
    plan = subprocess.run(
        [sys.executable, "-m", "compiler", "plan", "allowed.yaml", "-o", "out2", "--format",
         "json"], cwd=tmp_path, capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    (planned,) = json.loads(plan.stdout)["scripts"]
    assert [(v["rule"], v["verdict"]) for v in planned["policy"]["verdicts"]] == [
        ("partitions", "allowed"), ("job.max_time", "allowed"), ("sbatch.allowed", "allowed"),
        ("sbatch.allowed", "allowed")]
