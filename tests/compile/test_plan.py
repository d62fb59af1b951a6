"""`obc plan` through the command line: a change set that touches every kind of field, shown
as text, JSON and a pull-request comment (snapshots); an unchanged tree; exit codes; that it
writes nothing, agrees with what compile then does, and says the same every time.

Update the snapshots after an intended change with
`pytest tests/compile/test_plan.py --snapshot-update`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from tests.conftest import REPO

OBC = [sys.executable, "-m", "compiler"]
DIGEST_BEFORE = "sha256:" + "a" * 64
DIGEST_AFTER = "sha256:" + "b" * 64
BUSYBOX = "docker.io/library/busybox:1.36@sha256:" + "c" * 64


def snapshot_extension(suffix: str) -> type[SingleFileSnapshotExtension]:
    return type(f"{suffix}Snapshot", (SingleFileSnapshotExtension,),
                {"_write_mode": WriteMode.TEXT, "file_extension": suffix})


@pytest.fixture(params=[("text", "txt"), ("json", "json"), ("github", "md")],
                ids=["text", "json", "github"])
def report(request, snapshot):
    """A format of `obc plan`, and the snapshot its output is compared with."""
    format_, suffix = request.param
    return format_, snapshot.use_extension(snapshot_extension(suffix))


def hello(job_id: str) -> str:
    """A run file of one native step."""
    return (f"version: 1\nid: {job_id}\nruntime: {{kind: native}}\n"
            "steps: [{name: hello, run: [echo, hello]}]\n")


BEFORE = {
    # Docker: nearly every field changes.
    "runs/alpha.yaml": """\
version: 1
id: alpha
description: |
  Alpha, before.
  Two lines.
runtime:
  kind: docker
  image: registry.example.com/team/trainer:1.0
  mounts:
    - {source: /data/sets, target: /data, readonly: true}
  extra_args: [--network=none]
paths: {run_dir: /scratch/alpha}
steps:
  - {name: prep, run: [python, prep.py]}
  - {name: train, run: [python, train.py, --lr, "1e-4"]}
files: {prep.py: prep.py, conf.yaml: ../configs/train.yaml}
env: {LR: "1e-4", KEEP: same, DROP: gone}
secrets: [HF_TOKEN]
""",
    "runs/prep.py": "print('prepare')\n",
    "configs/train.yaml": "learning_rate: 0.0002\nnum_epochs: 1\nwandb_project: alpha\n",
    "obc.lock": f"registry.example.com/team/trainer:1.0 {DIGEST_BEFORE}\n",
    # Native under Slurm becomes podman on two nodes; its steps swap places.
    "runs/beta.yaml": """\
version: 1
id: beta
runtime: {kind: native, venv: /opt/venv}
steps:
  - {name: first, run: [sh, -c, echo one]}
  - {name: second, run: [sh, -c, echo two]}
slurm: {partition: gpu, time: "02:00:00", gpus_per_node: 2}
""",
    # Its run file goes: the script is removed.
    "runs/gamma.yaml": """\
version: 1
id: gamma
runtime: {kind: native}
steps: [{name: run, run: [python, -V]}]
""",
    "runs/same.yaml": hello("same"),
    # Only a comment changes: the inputs hash does, the meaning does not.
    "runs/comment.yaml": hello("comment"),
    # The same job; its script loses its execute bits.
    "runs/mode.yaml": hello("mode"),
    # The same job; its script on disk lost its record (an earlier obc).
    "runs/old.yaml": hello("old"),
    # Not given to plan: its script is kept.
    "other/kept.yaml": hello("kept"),
}

AFTER = {
    "runs/alpha.yaml": """\
version: 1
id: alpha
description: |
  Alpha, after.
  Two lines.
runtime:
  kind: docker
  image: registry.example.com/team/trainer:1.0
  gpus: [0, 1]
  shm_size: 8g
  stop_timeout: 90
  user: root
  mounts:
    - {source: /data/sets, target: /data}
    - {source: /models, target: /models, readonly: true}
paths: {run_dir: /scratch/alpha2}
steps:
  - {name: prep, run: [python, prep.py]}
  - {name: train, run: [python, train.py, --lr, "2e-4"]}
  - {name: eval, run: [python, eval.py]}
files: {prep.py: prep.py, conf.yaml: ../configs/train.yaml}
env: {LR: "2e-4", KEEP: same, WANDB_MODE: offline}
secrets: [{name: HF_TOKEN, required: false}, WANDB_API_KEY]
""",
    "runs/prep.py": "print('prepare, better')\n",
    "configs/train.yaml": "learning_rate: 0.0001\nnum_epochs: 2\n",
    "obc.lock": f"registry.example.com/team/trainer:1.0 {DIGEST_AFTER}\n",
    "runs/beta.yaml": f"""\
version: 1
id: beta
runtime: {{kind: podman, image: "{BUSYBOX}"}}
steps:
  - {{name: second, run: [sh, -c, echo two]}}
  - {{name: first, run: [sh, -c, echo one]}}
slurm: {{partition: gpu, time: "1-00:00:00", gpus_per_node: 4, nodes: 2}}
""",
    "runs/gamma.yaml": None,
    # A new job: Axolotl pushing to the Hub, offline otherwise, 8 GPUs for 90 minutes.
    "runs/delta.yaml": """\
version: 1
id: delta
runtime: {kind: docker}
trainer:
  axolotl:
    config: {base_model: org/base, hub_model_id: org/tuned, output_dir: output}
env: {HF_HUB_OFFLINE: "1"}
slurm: {time: 90, gpus_per_node: 8}
""",
    "runs/comment.yaml": hello("comment") + "# reviewed\n",
}


def write_files(root: Path, files: dict[str, str | None]) -> None:
    for name, text in files.items():
        path = root / name
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")


def obc(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*OBC, *args], cwd=cwd, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


@pytest.fixture(scope="module")
def changed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project compiled from BEFORE, its run files then changed to AFTER (not compiled)."""
    root = tmp_path_factory.mktemp("changed")
    (root / ".git").mkdir()
    write_files(root, BEFORE)
    compiled = obc(root, "compile", "runs", "other", "-o", "out")
    assert compiled.returncode == 0, compiled.stderr
    (root / "out/mode/job.sh").chmod(0o644)
    old = root / "out/old/job.sh"
    text = old.read_text(encoding="utf-8")
    old.write_text(text[:text.index("\n# --- obc plan record")] + "\n", encoding="utf-8")
    write_files(root, AFTER)
    return root


@pytest.mark.slow
def test_plan_of_a_change_set(changed, report):
    format_, snapshot = report
    result = obc(changed, "plan", "runs", "-o", "out", "--format", format_)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == snapshot


def test_detailed_exitcode_is_2_with_changes(changed):
    result = obc(changed, "plan", "runs", "-o", "out", "--detailed-exitcode")
    assert result.returncode == 2
    assert "plan: 1 to add, 5 to change, 1 to remove, 2 unchanged" in result.stdout


def test_plan_writes_nothing(changed):
    def state() -> dict[str, tuple[int, int, bytes]]:
        return {path.relative_to(changed).as_posix():
                (path.stat().st_mode, path.stat().st_mtime_ns, path.read_bytes())
                for path in sorted(changed.rglob("*")) if path.is_file()}

    before = state()
    for format_ in ("text", "json", "github"):
        assert obc(changed, "plan", "runs", "-o", "out", "--format", format_).returncode == 0
    assert state() == before


def test_plan_says_what_compile_then_does(changed, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(changed, project, symlinks=True)
    plan = json.loads(obc(project, "plan", "runs", "-o", "out", "--format", "json").stdout)
    compiled = obc(project, "compile", "runs", "-o", "out")
    totals = plan["totals"]
    assert compiled.returncode == 0, compiled.stderr
    written = totals["add"] + totals["change"]
    assert f"obc: {written} written, {totals['unchanged'] - 1} unchanged, " \
           f"{totals['remove']} removed, 1 kept" in compiled.stderr
    again = obc(project, "plan", "runs", "-o", "out", "--detailed-exitcode")
    assert again.returncode == 0
    assert again.stdout == "plan: no changes (8 script(s) as compile would write them)\n"


# The files the examples compile to: a job.sh each, and a sweep's runs and own two files.
EXAMPLES = sum(1 for path in (REPO / "out").rglob("*") if path.is_file())
NO_CHANGES = f"no changes ({EXAMPLES} script(s) as compile would write them)"


@pytest.mark.slow
def test_plan_of_an_unchanged_tree_says_no_changes(tmp_path):
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    assert obc(tmp_path, "compile", "examples", "-o", "out").returncode == 0
    for options in ([], ["--detailed-exitcode"]):
        result = obc(tmp_path, "plan", "examples", "-o", "out", *options)
        assert (result.returncode, result.stderr) == (0, "")
        assert result.stdout == f"plan: {NO_CHANGES}\n"
    github = obc(tmp_path, "plan", "examples", "-o", "out", "--format", "github")
    assert github.stdout == f"#### obc plan: {NO_CHANGES}\n"
    document = json.loads(obc(tmp_path, "plan", "examples", "-o", "out", "--format",
                              "json").stdout)
    assert document["totals"] == {"add": 0, "change": 0, "remove": 0, "foreign": 0,
                                  "unchanged": EXAMPLES}
    assert {script["action"] for script in document["scripts"]} == {"none"}
    # runs.tsv is a table: it does nothing; submit.sh submits the stages' scripts, each of
    # which has its own bill.
    assert all(script["bill"] for script in document["scripts"]
               if not script["path"].endswith(("/runs.tsv", "/submit.sh")))


def test_committed_out_is_what_plan_calls_unchanged():
    result = obc(REPO, "plan", "examples", "-o", "out")
    assert (result.returncode, result.stdout) == (0, f"plan: {NO_CHANGES}\n")


@pytest.mark.parametrize(("args", "problem"), [
    (["plan", "runs/missing.yaml", "-o", "out"], "no such file or folder"),
    (["plan", "-o", "out"], "the following arguments are required"),
    (["plan", "runs", "--bogus"], "unrecognized arguments"),
])
def test_errors_are_1_with_detailed_exitcode_and_as_usual_without(changed, args, problem):
    assert obc(changed, *args).returncode == 2
    result = obc(changed, *args, "--detailed-exitcode")
    assert result.returncode == 1
    assert problem in result.stderr


def test_invalid_run_file_is_reported_as_compile_reports_it(tmp_path):
    (tmp_path / "bad.yaml").write_text("version: 1\nid: bad\nruntime: {kind: dokcer}\n"
                                       "steps: [{name: a, run: [b]}]\n", encoding="utf-8")
    for options, code in (([], 1), (["--detailed-exitcode"], 1)):
        result = obc(tmp_path, "plan", "bad.yaml", *options)
        assert result.returncode == code
        assert result.stdout == ""
        assert "bad.yaml:3:17: error: runtime.kind: 'dokcer' is not one of" in result.stderr
    as_json = obc(tmp_path, "plan", "bad.yaml", "--format", "json")
    assert json.loads(as_json.stdout)[0]["field"] == "runtime.kind"


@pytest.mark.parametrize("format_", ["text", "json", "github"])
def test_plan_is_the_same_whatever_the_environment(changed, format_):
    outputs = {obc(changed, "plan", "runs", "-o", "out", "--format", format_, env=env).stdout
               for env in ({"PYTHONHASHSEED": "0", "TZ": "UTC", "LC_ALL": "C.UTF-8"},
                           {"PYTHONHASHSEED": "4242", "TZ": "Pacific/Kiritimati",
                            "LC_ALL": "C"})}
    assert len(outputs) == 1
