"""The site policy (issue 20): an admin's obc-policy.yaml, found at the project's root or named
with --policy, judges every normalised job. validate, compile, compile --check and plan refuse
what it refuses at the run file's field, naming the rule and where the policy says it; plan
shows every verdict. tests/slurm/test_slurm.py proves the same against the real sbatch."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from compiler.lock.lock import find_tags
from compiler.validate.policy import read_policy
from compiler.validate.rules.sbatch_options import SBATCH_DEFAULT_ALLOWED
from tests.compile.diagnostics.harness import run_obc
from tests.conftest import REPO

POLICY = """\
version: 1
partitions: [debug, gpu]
accounts: [ml-team]
qos: [normal]
job: {max_time: "04:00:00", max_nodes: 2, max_gpus: 8, max_gpu_hours: 20}
sweep: {max_gpus: 4, max_gpu_hours: 10}
sbatch:
  allowed: [nice]
  refused: [mem]
  required: [account]
runtimes: [native, apptainer]
registries: [nvcr.io]
shared_run_dirs: false
"""
NATIVE = "version: 1\nid: r\nruntime: {kind: native}\nsteps: [{name: a, run: [x]}]\n"
GOOD_SLURM = "slurm: {partition: gpu, account: ml-team, time: '01:00:00', gpus_per_node: 2"


def write(folder: Path, run: str, policy: str | None = POLICY) -> None:
    (folder / "run.yaml").write_text(run, encoding="utf-8")
    if policy is not None:
        (folder / "obc-policy.yaml").write_text(policy, encoding="utf-8")


def refusals(*args: str) -> list[tuple[int, int, str, str]]:
    outcome = run_obc("validate", "--format", "json", "run.yaml", *args)
    assert outcome.code == (1 if outcome.diagnostics() else 0), outcome
    return [(d["line"], d["column"], d["field"], d["message"] + " | " + (d["hint"] or ""))
            for d in outcome.diagnostics()]


@pytest.mark.parametrize(("slurm", "field", "words"), [
    ("{partition: long, account: ml-team, time: 10}", "slurm.partition",
     ["partition long is not allowed by site policy rule partitions (obc-policy.yaml:2:1)",
      "use one of debug, gpu"]),
    ("{partition: gpu, account: other, time: 10}", "slurm.account",
     ["account other", "accounts (obc-policy.yaml:3:1)"]),
    ("{account: ml-team, qos: high, time: 10}", "slurm.qos",
     ["qos high", "rule qos (obc-policy.yaml:4:1)"]),
    ("{account: ml-team, time: '04:00:01'}", "slurm.time",
     ["time limit of the job: 14460 s (at most 14400 s)", "job.max_time (obc-policy.yaml:5:7)"]),
    # No time limit is none the policy can bound.
    ("{account: ml-team, time: UNLIMITED}", "slurm.time",
     ["time limit of the job: unbounded", "job.max_time"]),
    ("{account: ml-team, time: 10, nodes: 3, gpus_per_node: 1}", "slurm.nodes",
     ["nodes of the job: 3 (at most 2)", "job.max_nodes"]),
    ("{account: ml-team, time: 10, gpus_per_node: 9}", "slurm.gpus_per_node",
     ["GPUs of the job: 9 (at most 8)", "job.max_gpus"]),
    ("{account: ml-team, time: '04:00:00', gpus_per_node: 6}", "slurm.time",
     ["GPU-hours of the job: 24 (at most 20)", "job.max_gpu_hours"]),
    ("{time: 10}", "slurm",
     ["a job without --account is not allowed by site policy rule sbatch.required "
      "(obc-policy.yaml:10:3)", "set slurm.account"]),
    ("{account: ml-team, time: 10, mem: 4G}", "slurm.mem",
     ["--mem is not allowed by site policy rule sbatch.refused (obc-policy.yaml:9:3)"]),
    ("{account: ml-team, time: 10, extra: [--uid=0]}", "slurm.extra[0]",
     ["--uid is not allowed by obc's built-in sbatch allow-list", "or site policy rule "
      "sbatch.allowed (obc-policy.yaml:8:3)", "sbatch: {allowed: [uid]}"]),
])
def test_a_policy_refuses_at_the_run_files_field_naming_its_rule(tmp_path, monkeypatch, slurm,
                                                                 field, words):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, NATIVE + f"slurm: {slurm}\n")
    ((found_line, found_column, found_field, said),) = refusals()
    # At the value of the field (the mapping itself for a missing one).
    key = field.removeprefix("slurm").lstrip(".").partition("[")[0]
    column = 8 + (slurm.index(f"{key}: ") + len(key) + 2 if key else 0)
    column += 1 if "[" in field else 0
    assert (found_line, found_column, found_field) == (5, column, field), said
    assert all(word in said for word in words), said


@pytest.mark.parametrize(("run", "field", "words"), [
    ("version: 1\nid: r\nruntime: {kind: docker, image: 'nvcr.io/o/i:1'}\n"
     "steps: [{name: a, run: [x]}]\n", "runtime.kind", "runtime docker"),
    ("version: 1\nid: r\nruntime: {kind: apptainer, image: 'docker://docker.io/o/i@sha256:"
     + "a" * 64 + "'}\nsteps: [{name: a, run: [x]}]\n", "runtime.image",
     "from docker.io is not allowed by site policy rule registries (obc-policy.yaml:12:1)"),
    (NATIVE + "paths: {run_dir: /team/r, shared: true}\n", "paths.shared",
     "a run dir in a folder the team shares is not allowed by site policy rule "
     "shared_run_dirs"),
])
def test_runtimes_registries_and_shared_run_dirs_are_the_policys(tmp_path, monkeypatch, run,
                                                                 field, words):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, run)
    ((_, _, found_field, said),) = refusals()
    assert (found_field, words in said) == (field, True), said


def test_what_the_policy_allows_compiles_and_plan_shows_every_verdict(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, NATIVE + GOOD_SLURM + ", extra: [--nice=10, --mail-type=END]}\n")
    assert run_obc("compile", "run.yaml", "-o", "out").code == 0
    assert run_obc("compile", "run.yaml", "-o", "out", "--check").code == 0
    plan = json.loads(run_obc("plan", "run.yaml", "-o", "out2", "--format", "json").stdout)
    (script,) = plan["scripts"]
    verdicts = {(v["rule"], v["asks"]): v["verdict"] for v in script["policy"]["verdicts"]}
    assert script["policy"]["file"] == "obc-policy.yaml" and script["policy"]["allowed"]
    assert verdicts == {
        ("runtimes", "runtime native"): "allowed",
        ("partitions", "partition gpu"): "allowed",
        ("accounts", "account ml-team"): "allowed",
        ("job.max_time", "time limit of the job: 3600 s (at most 14400 s)"): "allowed",
        ("job.max_nodes", "nodes of the job: 1 (at most 2)"): "allowed",
        ("job.max_gpus", "GPUs of the job: 2 (at most 8)"): "allowed",
        ("job.max_gpu_hours", "GPU-hours of the job: 2 (at most 20)"): "allowed",
        ("sbatch.allowed", "--nice"): "allowed",
        ("sbatch.allowed", "--mail-type"): "allowed",
        ("sbatch.required", "--account"): "allowed",
    }
    text = run_obc("plan", "run.yaml", "-o", "out2").stdout
    assert "  policy      obc-policy.yaml\n              allowed  runtimes: runtime native\n" \
        in text
    github = run_obc("plan", "run.yaml", "-o", "out2", "--format", "github").stdout
    assert "allowed  sbatch.allowed: --nice" in github


def test_compile_and_check_refuse_what_the_policy_refuses(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, NATIVE + GOOD_SLURM + "}\n")
    assert run_obc("compile", "run.yaml", "-o", "out").code == 0
    # The admin narrows the policy: the committed script no longer passes --check.
    (tmp_path / "obc-policy.yaml").write_text(POLICY.replace("[debug, gpu]", "[debug]"))
    for args in (["compile", "run.yaml", "-o", "out", "--check"], ["plan", "run.yaml", "-o",
                                                                  "out"]):
        outcome = run_obc(*args, "--format", "json")
        assert outcome.code == 1
        assert [d["field"] for d in outcome.diagnostics()] == ["slurm.partition"]


def test_a_policy_named_with_policy_may_live_outside_the_project(tmp_path, monkeypatch):
    project, admin = tmp_path / "project", tmp_path / "etc"
    project.mkdir()
    admin.mkdir()
    monkeypatch.chdir(project)
    write(project, NATIVE + "slurm: {partition: gpu, time: 10}\n", policy=None)
    (admin / "site.yaml").write_text("version: 1\npartitions: [debug]\n")
    # Without it, obc's defaults: any partition.
    assert refusals() == []
    ((_, _, field, said),) = refusals("--policy", str(admin / "site.yaml"))
    assert field == "slurm.partition" and "(../etc/site.yaml:2:1)" in said


def test_without_a_policy_obcs_allow_list_applies(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, NATIVE + "slurm: {partition: any, time: 99999, extra: [--exclusive]}\n",
          policy=None)
    ((_, _, field, said),) = refusals()
    assert field == "slurm.extra[0]" and "obc's built-in sbatch allow-list" in said


@pytest.mark.parametrize(("policy", "line", "column", "words"), [
    ("version: 1\npartition: [gpu]\n", 2, 1, "not a rule of a site policy; did you mean "
     "'partitions'?"),
    ("version: 1\npartitions: !!python/object:os.system [x]\n", 2, 13,
     "YAML tag '!!python/object:os.system' is not allowed"),
    ("version: 1\njob: {max_time: 1 day}\n", 2, 17, "does not match"),
    ("version: 1\nsbatch: {allowed: [--uid]}\n", 2, 20, "does not match"),
    ("version: 1\njob: {max_nodes: 2, max_gpu: 8}\n", 2, 21, "did you mean 'max_gpus'?"),
    ("version: 1\nversion: 1\n", 2, 1, "duplicate key"),
    ("partitions: [gpu]\n", 1, 1, "'version' is a required property"),
])
def test_a_broken_policy_is_reported_in_the_policy_file(tmp_path, monkeypatch, policy, line,
                                                        column, words):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, NATIVE, policy=policy)
    outcome = run_obc("validate", "--format", "json", "run.yaml")
    (found,) = outcome.diagnostics()
    assert outcome.code == 1
    assert (found["file"], found["line"], found["column"]) == ("obc-policy.yaml", line, column)
    assert words in found["message"], found


def test_a_hostile_policy_file_is_neither_followed_nor_opened(tmp_path, monkeypatch):
    """A link out of the policy's own folder, and a named pipe that would block a reader."""
    outside, project = tmp_path / "outside", tmp_path / "project"
    outside.mkdir()
    project.mkdir()
    monkeypatch.chdir(project)
    (outside / "p.yaml").write_text("version: 1\npartitions: [x]\n")
    write(project, NATIVE, policy=None)
    (project / "obc-policy.yaml").symlink_to(outside / "p.yaml")
    (found,) = run_obc("validate", "--format", "json", "run.yaml").diagnostics()
    assert "this policy file is a symbolic link to a file outside the project" in \
        found["message"]
    (project / "obc-policy.yaml").unlink()
    os.mkfifo(project / "obc-policy.yaml")
    (found,) = run_obc("validate", "--format", "json", "run.yaml").diagnostics()
    assert "is a named pipe (FIFO), not a regular file" in found["message"]
    (project / "obc-policy.yaml").unlink()
    (project / "obc-policy.yaml").write_text("version: 1\n" + "#" * 1024 * 1024)
    (found,) = run_obc("validate", "--format", "json", "run.yaml").diagnostics()
    assert "a policy file holds at most 1,048,576 bytes" in found["message"]


def test_a_sweep_is_judged_as_a_whole(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sweep = (NATIVE + GOOD_SLURM + "}\nenv: {LR: '1'}\nmatrix:\n"
             "  axes: {lr: {set: env.LR, values: ['1', '2', '3']}}\n  max_parallel: %d\n")
    write(tmp_path, sweep % 2)
    # 3 runs of 2 GPUs for 1 h, 2 at once: 4 GPUs, 6 GPU-hours.
    assert refusals() == []
    plan = json.loads(run_obc("plan", "run.yaml", "-o", "out", "--format", "json").stdout)
    (swept,) = [s["policy"] for s in plan["scripts"] if s["path"].endswith("/sweep.sh")]
    assert [(v["rule"], v["asks"], v["verdict"]) for v in swept["verdicts"]] == [
        ("sweep.max_gpus", "GPUs of a sweep of 3 runs, 2 at once: 4 (at most 4)", "allowed"),
        ("sweep.max_gpu_hours", "GPU-hours of a sweep of 3 runs, 2 at once: 6 (at most 10)",
         "allowed")]
    write(tmp_path, sweep % 3)
    ((line, column, field, said),) = refusals()
    assert (line, column, field) == (2, 5, "matrix")
    assert "GPUs of a sweep of 3 runs, 3 at once: 6 (at most 4)" in said
    assert "sweep.max_gpus (obc-policy.yaml:6:9)" in said


def test_the_docs_example_policy_and_allow_list_are_obcs(tmp_path):
    slurm = (REPO / "docs" / "slurm.md").read_text(encoding="utf-8")
    example = slurm.split("## Site policy")[1].split("```yaml\n")[1].split("```")[0]
    (tmp_path / "obc-policy.yaml").write_text(example, encoding="utf-8")
    policy, problems = read_policy(tmp_path / "obc-policy.yaml")
    assert problems == [] and policy.job.max_gpus == 32 and policy.shared_run_dirs is False
    security = (REPO / "docs" / "security.md").read_text(encoding="utf-8")
    listed = security.split("**`slurm.extra` takes options from an allow-list**")[1] \
        .split("The\n  rest is refused")[0]
    assert set(re.findall(r"`([a-z-]+)`", listed)) == SBATCH_DEFAULT_ALLOWED


SWEEP_WITH_THROTTLE = NATIVE + """\
slurm: {time: 10}
env: {LR: '1'}
matrix:
  axes: {lr: {set: env.LR, values: ['1', '2']}}
  max_parallel: 1
"""


@pytest.mark.parametrize(("runs", "warned"), [
    # Issue 20: a run whose #SBATCH lines differ makes sweep.sh submit each run on its own,
    # where max_parallel cannot apply; compile says so, and still compiles.
    ("  runs: {long: {slurm: {time: 20}}}\n", True),
    ("  runs: {other: {env: {LR: '3'}}}\n", False),  # the same lines: one array
    ("", False),
])
def test_compile_warns_when_max_parallel_cannot_apply(tmp_path, monkeypatch, runs, warned):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, SWEEP_WITH_THROTTLE + runs, policy=None)
    warning = ("run.yaml:2:5: warning: matrix.max_parallel: the runs differ in their #SBATCH "
               "lines, so sweep.sh --submit submits each on its own and max_parallel cannot "
               "apply")
    for _ in range(2):  # the second compile reuses the first's scripts: the warning stays
        outcome = run_obc("compile", "run.yaml", "-o", "out")
        assert outcome.code == 0, outcome
        assert (warning in outcome.stderr) is warned, outcome.stderr


def test_a_sweep_whose_runs_go_each_on_its_own_is_judged_all_at_once(tmp_path, monkeypatch):
    """max_parallel cannot hold back runs that differ in their #SBATCH lines."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path, NATIVE + GOOD_SLURM + "}\nenv: {LR: '1'}\nmatrix:\n"
          "  axes: {lr: {set: env.LR, values: ['1', '2']}}\n  max_parallel: 1\n"
          "  runs: {long: {slurm: {time: '02:00:00'}}}\n")
    ((_, _, field, said),) = refusals()
    assert field == "matrix" and "GPUs of a sweep of 3 runs, 3 at once: 6 (at most 4)" in said


def test_obc_lock_reads_images_and_leaves_the_judging_to_compile(tmp_path):
    """obc lock has no --policy: it does not refuse what a policy named to compile allows."""
    (tmp_path / "run.yaml").write_text(
        "version: 1\nid: r\nruntime: {kind: docker, image: 'nvcr.io/o/i:1'}\n"
        "steps: [{name: a, run: [x]}]\nslurm: {extra: [--exclusive]}\n")
    tags, problems = find_tags([tmp_path / "run.yaml"])
    assert (list(tags), problems) == (["nvcr.io/o/i:1"], [])
