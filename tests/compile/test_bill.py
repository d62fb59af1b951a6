"""The bill of materials: what a reviewer approves, said in full, and variations of what
once slipped past it: the venv and env file, every #SBATCH line and the GPUs Slurm
allocates, embedded files, root in any spelling, and a sweep's own settings."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from compiler.pipeline.pipeline import compile_files
from compiler.plan.bill import bill_of
from compiler.plan.report import bill_json, bill_lines
from compiler.render.render import render_job
from tests.compile.test_plan import obc, write_files
from tests.conftest import allow_sbatch, compile_text, write_script
from tests.support.slurm_cluster import FINISHED, GPUS_PER_NODE


def bill_of_text(folder: Path, text: str):
    run_file = folder / "run.yaml"
    run_file.write_text(text, encoding="utf-8")
    result = compile_files([run_file])
    assert not result.diagnostics, [d.text() for d in result.diagnostics]
    return bill_of(result.scripts[0].job)


def plan_json(root: Path) -> dict:
    result = obc(root, "plan", "runs", "-o", "out", "--format", "json")
    assert result.returncode == 0, result.stderr
    return {script["path"]: script for script in json.loads(result.stdout)["scripts"]}


def plan_text(root: Path) -> str:
    result = obc(root, "plan", "runs", "-o", "out")
    assert result.returncode == 0, result.stderr
    return result.stdout


def project(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / ".git").mkdir()
    write_files(tmp_path, files)
    return tmp_path


STEP = "steps: [{name: s, run: [python, train.py]}]\n"


# F6: the bill never mentioned runtime.env_file or runtime.venv.
def test_an_added_native_job_bills_its_venv_and_env_file(tmp_path):
    root = project(tmp_path, {"runs/n.yaml": "version: 1\nid: n\nruntime: {kind: native, "
                              "venv: /shared/x/venv, env_file: /shared/x/job.env}\n" + STEP})
    bill = plan_json(root)["out/n/job.sh"]["bill"]
    assert (bill["venv"], bill["env_file"]) == ("/shared/x/venv", "/shared/x/job.env")
    text = plan_text(root)
    assert "  venv        /shared/x/venv: its bin/ comes first on PATH" in text
    assert "  env file    /shared/x/job.env: sourced as shell code" in text


def test_a_native_job_without_them_says_so(tmp_path):
    lines = bill_lines(bill_of_text(tmp_path, "version: 1\nid: n\nruntime: {kind: native}\n"
                                    + STEP))
    assert "venv        none: programs from PATH" in lines
    assert "env file    none" in lines


def test_the_pull_request_comment_bills_a_relative_env_file(tmp_path):
    root = project(tmp_path, {"runs/n.yaml": "version: 1\nid: n\nruntime: {kind: native, "
                              "venv: ~/venvs/x, env_file: ./job.env}\n" + STEP})
    comment = obc(root, "plan", "runs", "-o", "out", "--format", "github").stdout
    assert "venv        ~/venvs/x: its bin/ comes first on PATH" in comment
    assert "env file    ./job.env: sourced as shell code before the steps" in comment


def test_a_container_jobs_bill_has_no_venv_or_env_file(tmp_path):
    root = project(tmp_path, {"runs/d.yaml": "version: 1\nid: d\nruntime: {kind: docker}\n"
                              + STEP})
    bill = plan_json(root)["out/d/job.sh"]["bill"]
    assert (bill["venv"], bill["env_file"], bill["runtime"]) == (None, None, "docker")
    assert "venv" not in plan_text(root)


def test_a_changed_venv_or_env_file_is_a_change_line(tmp_path):
    root = project(tmp_path, {"runs/n.yaml": "version: 1\nid: n\nruntime: {kind: native, "
                              "venv: /opt/venv}\n" + STEP})
    assert obc(root, "compile", "runs", "-o", "out").returncode == 0
    write_files(root, {"runs/n.yaml": "version: 1\nid: n\nruntime: {kind: native, "
                       "venv: /shared/x/venv, env_file: /shared/x/job.env}\n" + STEP})
    assert plan_text(root).startswith("~ out/n/job.sh: venv /opt/venv → /shared/x/venv; "
                                      "env file none → /shared/x/job.env\n")


# F7: GPU-hours ignored slurm.extra; the bill listed no Slurm options.
ARRAY_RUN = """\
version: 1
id: m
runtime: {kind: native}
paths: {run_dir: "~/runs/m-${SLURM_ARRAY_TASK_ID}"}
slurm: {partition: gpu, time: "01:00:00", gpus_per_node: 1, extra: [%s]}
""" + STEP


@pytest.mark.parametrize(("extra", "text"), [
    ("--array=0-31", "1 GPU × 1 node × 1 h × 32 array tasks (--array=0-31) = 32 GPU-hours"),
    ("--gres=gpu:8", "8 GPUs × 1 node (--gres=gpu:8) × 1 h = 8 GPU-hours"),
    ("--gpus=64", "64 GPUs (--gpus=64) × 1 h = 64 GPU-hours"),
    # Variations: an array with a throttle, a step and a list; GPUs per task; the whole node.
    ("'--array=1,3,5-7%2'", "1 GPU × 1 node × 1 h × 5 array tasks (--array=1,3,5-7%2) = "
                          "5 GPU-hours"),
    ("'--array=0-15:4', '--gpus-per-task=a100:3'",
     "3 GPUs (--gpus-per-task=a100:3) × 1 h × 4 array tasks (--array=0-15:4) = 12 GPU-hours"),
    ("'--gres=tmpfs:10G,gpu:h100:2'",
     "2 GPUs × 1 node (--gres=tmpfs:10G,gpu:h100:2) × 1 h = 2 GPU-hours"),
    ("--exclusive", "all GPUs of 1 node (--exclusive) × 1 h = unbounded"),
])
def test_gpu_hours_count_what_slurm_allocates(tmp_path, extra, text):
    allow_sbatch(tmp_path, "array", "gres", "gpus", "gpus-per-task", "exclusive")
    assert bill_of_text(tmp_path, ARRAY_RUN % extra).compute.text() == text


def test_every_sbatch_line_is_billed_as_the_script_carries_it(tmp_path):
    extra = "--mail-user=x@example.com, --uid=0, --chdir=/, --array=0-31"
    allow_sbatch(tmp_path, "uid", "chdir", "array")
    bill = bill_of_text(tmp_path, ARRAY_RUN % extra)
    script = render_job(compile_files([tmp_path / "run.yaml"]).scripts[0].job)
    carried = [line.removeprefix("#SBATCH ") for line in script.split("\n")
               if line.startswith("#SBATCH ")]
    assert list(bill.slurm.directives) == carried
    assert {"--mail-user=x@example.com", "--uid=0", "--chdir=/"} <= set(carried)
    assert list(bill_json(bill)["slurm"]["directives"]) == carried


def test_a_slurm_job_that_asks_for_no_gpus_is_zero_gpu_hours(tmp_path):
    bill = bill_of_text(tmp_path, "version: 1\nid: c\nruntime: {kind: native}\n"
                        "slurm: {time: '02:00:00', nodes: 1}\n" + STEP)
    assert bill.compute.text() == "0 GPUs × 1 node × 2 h = 0 GPU-hours"


@pytest.mark.slow
@pytest.mark.parametrize(("gpus_per_node", "extra"), [
    (1, "--array=0-3"), (2, "--array=0-15:4"), (1, "--gres=gpu:8"), (None, "--gpus=6"),
    (1, "--exclusive"), (None, "--comment=cpu-only"),
])
def test_the_gpus_billed_are_what_a_real_slurm_allocates(slurm, sandbox, tmp_path,
                                                         gpus_per_node, extra):
    """Each task's step sees the GPUs Slurm gave its job (CUDA_VISIBLE_DEVICES): the bill's
    GPUs of a job, in as many jobs as it says."""
    gpus = "" if gpus_per_node is None else f", gpus_per_node: {gpus_per_node}"
    allow_sbatch(tmp_path, "array", "gres", "gpus", "exclusive")
    text = (f"version: 1\nid: g\nruntime: {{kind: native}}\n"
            f"paths: {{run_dir: '{tmp_path}/runs/${{SLURM_JOB_ID}}'}}\n"
            f"steps: [{{name: s, run: [record]}}]\n"
            f"slurm: {{partition: debug, time: 10{gpus}, extra: [{extra}]}}\n")
    script = write_script(tmp_path, compile_text(tmp_path, text))
    billed = bill_of(compile_files([tmp_path / "run.yaml"]).scripts[0].job).compute
    job_id = slurm.submit(script, cwd=tmp_path, env=sandbox.env())
    slurm.wait_for(lambda: ended(slurm, job_id), 120, f"every task of job {job_id} to end")
    assert set(ended(slurm, job_id)) == {"COMPLETED"}
    seen = [len(record["env"]["CUDA_VISIBLE_DEVICES"].split(","))
            if record["env"].get("CUDA_VISIBLE_DEVICES") else 0
            for record in sandbox.records() if "program" in record]
    assert seen == [GPUS_PER_NODE if billed.gpus == "all" else billed.gpus] * billed.tasks


def ended(slurm, job_id: str) -> list[str]:
    """The states of a job's tasks if all have ended, else []."""
    shown = slurm.run("scontrol", "show", "job", "-o", job_id).stdout.split()
    states = [word.partition("=")[2] for word in shown if word.startswith("JobState=")]
    return states if states and all(state in FINISHED for state in states) else []


# F10: the bill of an added script listed no embedded files.
def test_an_added_jobs_bill_lists_its_embedded_files(tmp_path):
    shadow = "print('not the json module')\n"
    root = project(tmp_path, {"lib/j.py": shadow, "runs/t.yaml": (
        "version: 1\nid: t\nruntime: {kind: native}\nfiles: {json.py: ../lib/j.py}\n"
        "steps: [{name: s, run: [python3, -m, timeit, 'import json']}]\n")})
    (file,) = plan_json(root)["out/t/job.sh"]["bill"]["files"]
    digest = hashlib.sha256(shadow.encode()).hexdigest()
    assert file == {"path": "json.py", "origin": "../lib/j.py", "bytes": len(shadow),
                    "sha256": digest, "obc_adds": {}}
    assert f"  files       json.py  (from ../lib/j.py; {len(shadow)} bytes, sha256 {digest})" \
        in plan_text(root)


def test_what_obc_adds_to_the_trainers_config_is_billed(tmp_path):
    bill = bill_of_text(tmp_path, "version: 1\nid: a\nruntime: {kind: native}\n"
                        "trainer: {axolotl: {config: {base_model: b}}}\n"
                        "checkpoint: {check_interval: 5}\n")
    (config,) = [file for file in bill.files if file.path == "axolotl.yaml"]
    assert config.obc_adds == (("dynamic_checkpoint.enabled", "true"),
                               ("dynamic_checkpoint.check_interval", "5"))
    assert any("obc adds dynamic_checkpoint.enabled: true, "
               "dynamic_checkpoint.check_interval: 5" in line for line in bill_lines(bill))


def test_a_config_with_its_own_dynamic_checkpoint_gets_nothing_added(tmp_path):
    bill = bill_of_text(tmp_path, "version: 1\nid: a\nruntime: {kind: native}\n"
                        "trainer: {axolotl: {config: {base_model: b, dynamic_checkpoint: "
                        "{enabled: true}}}}\n")
    assert [file.obc_adds for file in bill.files] == [()]


# F18: a numeric user 0 was billed as "steps run as 0:0", not as root.
@pytest.mark.parametrize("user", ["0:0", "0", "00:00", "000", "0:1000"])
def test_a_numeric_user_0_is_root_in_bill_and_header(tmp_path, user):
    text = f"version: 1\nid: r\nruntime: {{kind: docker, user: '{user}'}}\n" + STEP
    bill = bill_of_text(tmp_path, text)
    assert bill.privileges[0].meaning == f"steps run as root in the container (uid 0: {user})"
    header = compile_files([tmp_path / "run.yaml"]).scripts[0].text
    assert f"#             steps run as root (--user {user})" in header


@pytest.mark.parametrize("user", ["1000:0", "10", "1000:1000"])
def test_a_user_other_than_0_is_not_root(tmp_path, user):
    text = f"version: 1\nid: r\nruntime: {{kind: docker, user: '{user}'}}\n" + STEP
    assert bill_of_text(tmp_path, text).privileges[0].meaning == f"steps run as {user}"


# F19: a changed sweep.sh showed as a bare `~ out/sw/sweep.sh`, no changes and no bill.
SWEEP = """\
version: 1
id: sw
runtime: {kind: native}
steps: [{name: s, run: [echo, hi]}]
env: {LR: "1"}
slurm: {time: "01:00:00", gpus_per_node: 2}
matrix:
  axes: {lr: {set: env.LR, values: ["1", "2", "3"]}}
  max_parallel: %s
"""


def test_a_changed_sweep_script_says_what_changed_and_is_billed(tmp_path):
    root = project(tmp_path, {"runs/sw.yaml": SWEEP % 2})
    assert obc(root, "compile", "runs", "-o", "out").returncode == 0
    write_files(root, {"runs/sw.yaml": SWEEP % 50})
    script = plan_json(root)["out/sw/sweep.sh"]
    # Not the runs' sha256 (each changed job.sh has its line): the settings of sweep.sh.
    assert [change["field"] for change in script["changes"]] == ["max_parallel", "directives"]
    assert script["changes"][0]["text"] == "max parallel 2 → 50"
    assert script["changes"][1]["before"][-1] == "--array=0-2%2"
    assert script["changes"][1]["after"][-1] == "--array=0-2%50"
    assert script["bill"]["max_parallel"] == 50
    assert "--array=0-2%50" in script["bill"]["slurm"]["directives"]
    text = plan_text(root)
    assert "~ out/sw/sweep.sh: max parallel 2 → 50; sbatch: --job-name=sw" in text
    assert "  gpu-hours   2 GPUs × 1 node × 1 h × 3 array tasks (--array=0-2%50) = " \
           "6 GPU-hours" in text


def test_an_added_sweep_script_is_billed(tmp_path):
    root = project(tmp_path, {"runs/sw.yaml": SWEEP % 2})
    bill = plan_json(root)["out/sw/sweep.sh"]["bill"]
    assert (list(bill["runs"]), bill["submission"]) == (["sw-1", "sw-2", "sw-3"], "array")
    assert bill["compute"]["gpu_hours"] == 6


def test_a_sweep_run_added_is_a_change_of_the_sweep_script(tmp_path):
    root = project(tmp_path, {"runs/sw.yaml": SWEEP % 2})
    assert obc(root, "compile", "runs", "-o", "out").returncode == 0
    write_files(root, {"runs/sw.yaml": SWEEP.replace('"3"]', '"3", "4"]') % 2})
    changes = [c["text"] for c in plan_json(root)["out/sw/sweep.sh"]["changes"]]
    assert "runs sw-4 added" in changes


def test_what_obc_adds_to_the_config_is_a_change_line_when_it_changes(tmp_path):
    config = "trainer: {axolotl: {config: {base_model: b}}}\n"
    root = project(tmp_path, {"runs/a.yaml": "version: 1\nid: a\nruntime: {kind: native}\n"
                              + config + "checkpoint: {check_interval: 1}\n"})
    assert obc(root, "compile", "runs", "-o", "out").returncode == 0
    write_files(root, {"runs/a.yaml": "version: 1\nid: a\nruntime: {kind: native}\n"
                       + config + "checkpoint: {check_interval: 30}\n"})
    (script,) = plan_json(root).values()
    assert "file axolotl.yaml: obc adds dynamic_checkpoint.check_interval 1 → 30" in [
        change["text"] for change in script["changes"]]


@pytest.mark.parametrize(("target", "host"), [
    ("url: 'https://ci.example.com:8443/hook?channel=ml'", "ci.example.com"),
    ("url: {secret: SLACK_WEBHOOK}", "the host in $SLACK_WEBHOOK"),
])
def test_a_notify_url_is_egress_to_its_host_and_notify_is_billed(tmp_path, target, host):
    # The script POSTs from where the job runs: egress even when the steps have no network.
    bill = bill_of_text(tmp_path, f"""\
version: 1
id: n
runtime: {{kind: docker, extra_args: [--network=none]}}
steps: [{{name: a, run: [x]}}]
notify: {{on: [step_failed, done], {target}}}
""")
    assert [(e.host, e.purpose) for e in bill.egress if e.purpose.startswith("notify")] == [
        (host, "notify: POSTs the events step_failed, done (job, step, exit code, run dir, "
               "the last lines of a failed step's log)")]
    lines = bill_lines(bill)
    assert any(line.startswith("notify") and "on step_failed, done: POSTs" in line
               for line in lines)


def test_the_header_says_who_hears_which_events_and_what_retry_retries(tmp_path):
    text = compile_text(tmp_path, """\
version: 1
id: n
runtime: {kind: native}
steps: [{name: a, run: [x]}]
retry: {on_exit_codes: [75], max: 2}
notify: {on: [started, gave_up], command: [notify-send, obc run]}
""")
    assert "# retry       a lost node, a network error or preemption and exit codes 75 " \
           "(never out of memory or a config error; docs/retry.md): up to 2 times\n" in text
    assert "# notify      on started, gave_up: runs notify-send 'obc run', the event's JSON on " \
           "its stdin\n#             given up after 6 s; never changes the exit code\n" in text
