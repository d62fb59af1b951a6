"""Every shell of the matrix runs every script the same way, byte for byte.

The examples run under each shell against the recording stub engines and trainer, and must
give one outcome; then Hypothesis generates arbitrary text (everything but NUL) for env
values, step arguments, paths, the description and embedded files, and each shell must
deliver exactly that text to the steps, to the run dir and to `--help`.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from hashlib import sha256
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from compiler.core.text import is_invisible
from compiler.pipeline.pipeline import compile_files
from compiler.render.render import help_lines
from tests.conftest import (
    REPO,
    SHELLS,
    Sandbox,
    compile_text,
    install_slurm_stubs,
    install_stub,
    make_sandbox,
    timeless_status,
    write_script,
)

EXAMPLES = sorted(p.name for p in (REPO / "examples").glob("*.yaml"))


# Variables a shell adds to the environment of what it starts, which native steps inherit:
# OLDPWD after `cd` (all but mksh, posh and ksh93), ksh93's A__z (attributes of exported
# variables). They are the shell's bookkeeping, not the job's.
SHELL_BOOKKEEPING = {"OLDPWD", "A__z"}


def outcome(run, sandbox: Sandbox, run_dir: Path) -> dict:
    """Everything a run produced that must not depend on the shell (times aside)."""
    # (A step on every node names the first node's temporary folder, whose name is random.)
    records = json.loads(re.sub(r"\.obc/tmp\.\w{6}/", ".obc/tmp.XXXXXX/",
                                json.dumps(run.records)))
    records = [{k: v for k, v in r.items() if k not in ("pid", "pgid", "path")}
               for r in records]
    for record in records:
        for name in SHELL_BOOKKEEPING:
            record.get("env", {}).pop(name, None)
    files = {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*"))
             if p.is_file()} if run_dir.is_dir() else {}
    if ".obc/status.json" in files:
        files[".obc/status.json"] = timeless_status(files[".obc/status.json"])
    return {"code": run.returncode, "stdout": run.stdout, "stderr": run.messages,
            "records": records, "files": files}


# The image file and datasets of the apptainer and enroot examples, made to exist here.
SIF = b"a SIF image"


# The venvs the native examples name (under /shared/venvs/, here ~/venvs/), and the programs
# their steps run there, recording stubs (TRL's merge is `python3 -c …`).
EXAMPLE_VENVS = {"axolotl": ("axolotl",), "torch": ("torchrun",),
                 "llamafactory": ("llamafactory-cli",), "trl": ("torchrun", "python3")}


def example_sandbox(root: Path) -> Sandbox:
    """A sandbox with the stubs, the venvs under ~/venvs/ the native examples expect, the
    image and datasets the apptainer and enroot examples name, and srun and scontrol for a
    job on two nodes (used only where SLURM_JOB_ID is set)."""
    box = make_sandbox(root, programs=("axolotl", "record", "python"))
    for venv, programs in EXAMPLE_VENVS.items():
        (box.home / "venvs" / venv / "bin").mkdir(parents=True)
        (box.home / "venvs" / venv / "bin/python").symlink_to(sys.executable)
        for program in programs:
            install_stub(box.home / "venvs" / venv / "bin" / program, "record")
    (box.home / "images").mkdir()
    (box.home / "images/axolotl-0.19.0.sif").write_bytes(SIF)
    (box.home / "datasets").mkdir()
    install_slurm_stubs(box)
    return box


def login_env(box: Sandbox, **extra: str) -> dict[str, str]:
    """The sandbox's environment with LOGNAME set, as a login or Slurm sets it: zsh exports
    a LOGNAME of its own when there is none, which native steps would then inherit."""
    return box.env(LOGNAME="obc", **extra)


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_runs_alike_in_every_shell(example, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(REPO / "examples", project)
    env_file = tmp_path / "job.env"
    env_file.write_text("export FROM_ENV_FILE='it'\\''s here'\n")
    source = project / example
    text = source.read_text()
    # Paths of the examples' clusters, made to exist here.
    for theirs, ours in (("/etc/overbrainer/job.env", str(env_file)),
                         ("/shared/venvs/", "~/venvs/"),
                         ("/shared/images/", "~/images/"), ("/shared/datasets", "~/datasets")):
        text = text.replace(theirs, ours)
    text = re.sub("image_sha256: [0-9a-f]{64}", f"image_sha256: {sha256(SIF).hexdigest()}", text)
    source.write_text(text)
    # An enroot job runs in a Slurm job only: this one is job 42, on n1 and n2.
    in_job = {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_NUM_NODES": "2"} \
        if "kind: enroot" in text else {}
    result = compile_files([source], out=tmp_path / "out")
    assert not result.diagnostics, [d.text() for d in result.diagnostics]
    script = write_script(tmp_path, result.scripts[0].text)
    outcomes = {}
    for shell in SHELLS:
        # One home, run dir and cache dir for all shells: they appear in the output.
        box = example_sandbox(tmp_path / shell)
        run_dir = tmp_path / "run"
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.rmtree(tmp_path / "home", ignore_errors=True)
        shutil.copytree(box.home, tmp_path / "home")
        run = box.run(script, "--run-dir", str(run_dir), "--cache-dir", str(tmp_path / "cache"),
                      shell=shell, env=login_env(box, HF_TOKEN="hf_x", WANDB_API_KEY="w",
                                                 # Nothing listens there: notify fails, the
                                                 # job does not.
                                                 TEAM_WEBHOOK="http://127.0.0.1:9/hook",
                                                 HOME=str(tmp_path / "home"),
                                                 SCRATCH=str(tmp_path / "home"), **in_job))
        outcomes[shell] = outcome(run, box, run_dir)
    assert outcomes["dash"]["code"] == 0, outcomes["dash"]["stderr"]
    assert outcomes["dash"]["records"], "no step ran"
    for shell, seen in outcomes.items():
        assert seen == outcomes["dash"], f"{shell} differs from dash"


# --- property: arbitrary text arrives byte for byte ------------------------------------

# Text a run file may hold: anything but NUL, the control characters obc refuses (all of C0
# but TAB and LF, DEL, C1) and invisible ones (compiler.text.is_invisible), because a
# terminal would show them differently.
REFUSED = "".join(map(chr, [*range(0x01, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]))
NOT_SCRIPT_TEXT = ("Cs", "Cf", "Zl", "Zp")
TEXT = st.text(st.characters(exclude_categories=NOT_SCRIPT_TEXT,
                             exclude_characters="\0" + REFUSED).filter(
    lambda char: not is_invisible(char)), max_size=30)
# A path segment: no `/`, no newline, not `.` or `..`, short enough for any file system; no
# `$`, which a path keeps for ${NAME}.
SEGMENT = st.text(st.characters(exclude_categories=NOT_SCRIPT_TEXT,
                                exclude_characters="\0\n/$" + REFUSED).filter(
    lambda char: not is_invisible(char)),
                  min_size=1, max_size=12).filter(lambda s: s not in (".", ".."))
NAMES = st.from_regex(r"[A-Z][A-Z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: not n.startswith("OBC_") and n not in {
        "IFS", "ENV", "CDPATH", "PS4", "SHELLOPTS", "BASHOPTS", "HF_HOME", "PATH", "HOME",
        "PWD", "SHLVL", "LANG", "LC_CTYPE", "OLDPWD", "CUDA_VISIBLE_DEVICES", "PYTHONPATH"})


def yaml_string(value: str) -> str:
    """A YAML double-quoted scalar holding exactly `value`: everything but printable ASCII
    escaped, so that no character is folded, normalised or refused by the YAML reader."""
    out = []
    for char in value:
        code = ord(char)
        if 0x20 <= code < 0x7F and char not in '"\\':
            out.append(char)
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


JOBS = st.fixed_dictionaries({
    "kind": st.sampled_from(["native", "docker"]),
    "description": TEXT,
    "args": st.lists(TEXT, max_size=4),
    "env": st.dictionaries(NAMES, TEXT, max_size=3),
    "run_dir": st.lists(SEGMENT, min_size=1, max_size=2),
    "cache_dir": st.lists(SEGMENT, min_size=1, max_size=2),
    "file_name": SEGMENT,
    # An embedded file is copied as it is, control characters included.
    "file_content": st.text(st.characters(exclude_categories=("Cs",),
                                          exclude_characters="\0"), max_size=60),
})


@settings(max_examples=12, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(job=JOBS)
def test_arbitrary_text_reaches_the_steps_byte_for_byte_in_every_shell(job, tmp_path_factory):
    root = tmp_path_factory.mktemp("prop")
    run_dir = generated_dir(root / "runs", job["run_dir"], job["kind"])
    cache_dir = generated_dir(root / "caches", job["cache_dir"], job["kind"])
    (root / "content").write_bytes(job["file_content"].encode())
    env = ", ".join(f"{name}: {yaml_string(value)}" for name, value in job["env"].items())
    text = compile_text(root, f"""\
version: 1
id: prop
description: {yaml_string(job["description"])}
runtime: {{kind: {job["kind"]}}}
paths: {{run_dir: {yaml_string(str(run_dir))}, cache_dir: {yaml_string(str(cache_dir))}}}
steps: [{{name: s, run: [record, {", ".join(yaml_string(a) for a in job["args"])}]}}]
files: {{{yaml_string(job["file_name"])}: content}}
env: {{{env}}}
""")
    script = write_script(root, text)
    (compiled,) = compile_files([root / "run.yaml"]).scripts
    expected_help = "\n".join(help_lines(compiled.job)) + "\n"
    for shell in SHELLS:
        box = example_sandbox(root / shell)
        for folder in (root / "runs", root / "caches"):
            shutil.rmtree(folder, ignore_errors=True)
        run = box.run(script, shell=shell, env=login_env(box))
        assert run.returncode == 0, (shell, run.stderr)
        (step,) = run.steps
        assert step["argv"] == job["args"], shell
        assert {k: step["env"].get(k) for k in job["env"]} == job["env"], shell
        assert (run_dir / job["file_name"]).read_bytes() == job["file_content"].encode(), shell
        assert sorted(p.name for p in run_dir.iterdir() if p.name != ".obc") == \
            [job["file_name"]], shell
        assert step["cwd"] == str(run_dir) and cache_dir.is_dir(), shell
        if job["kind"] == "native":
            assert step["env"]["HF_HOME"] == str(cache_dir), shell
        else:
            (engine,) = run.engine_runs
            assert f"{run_dir}:/workspace/run" in engine["argv"], shell
            assert f"{cache_dir}:/workspace/hf-cache" in engine["argv"], shell
        helped = box.run(script, "--help", shell=shell)
        assert (helped.returncode, helped.stdout) == (0, expected_help), shell


def generated_dir(parent: Path, segments: list[str], kind: str) -> Path:
    path = parent.joinpath(*segments)
    if kind == "docker" and re.search("[:,]", str(path)):
        return parent / "no-colon"  # docker splits -v on ':' and ','; preflight refuses them
    return path


def test_yaml_string_round_trips():
    for value in ["", "a\"b\\c", "\x1b\r\n\t\x85\u2028\ufeff\uffff", "\U0001F600 日本"]:
        assert YAML(typ="safe").load(f"k: {yaml_string(value)}")["k"] == value


# --- rerunning after a failure ---------------------------------------------------------

@pytest.mark.parametrize("shell", SHELLS)
def test_from_and_only_rerun_part_of_a_job_after_a_failure(tmp_path, sandbox, shell):
    script = write_script(tmp_path, compile_text(tmp_path, """\
version: 1
id: rerun
runtime: {kind: native}
steps:
  - {name: train, run: [record, train]}
  - {name: merge, run: [record, merge, --exit, "5"]}
  - {name: report, run: [record, report]}
"""))

    def steps_run(*args: str) -> tuple[int, list[str], list[str]]:
        before = len(sandbox.records())
        run = sandbox.run(script, *args, shell=shell)
        return (run.returncode, [s["argv"][0] for s in run.steps[before:]],
                [line for line in run.messages if "skipped" in line])

    assert steps_run() == (5, ["train", "merge"], [])
    assert steps_run("--from", "merge") == (5, ["merge"], ["obc: step 1/3 train: skipped"])
    assert steps_run("--only", "report") == (0, ["report"], [
        "obc: step 1/3 train: skipped", "obc: step 2/3 merge: skipped"])
    assert steps_run("--from", "report") == (0, ["report"], [
        "obc: step 1/3 train: skipped", "obc: step 2/3 merge: skipped"])
    helped = sandbox.run(script, "--help", shell=shell)
    assert "1. train: record train" in helped.stdout
    assert "3. report: record report" in helped.stdout
    assert "[--from STEP] [--only STEP]" in helped.stdout
    wrong = sandbox.run(script, "--only", "nope", shell=shell)
    assert wrong.returncode == 2
    assert "no step named 'nope' (steps: train merge report)" in wrong.stderr
    # Two names are not a step, though they stand side by side in the list of steps.
    for option in ("--from", "--only"):
        assert sandbox.run(script, option, "train merge", shell=shell).returncode == 2
