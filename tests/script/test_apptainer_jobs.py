"""apptainer jobs, run by every shell against the recording stub apptainer (tests/support/stubs):
the options apptainer gets, the environment its container would get after --cleanenv,
values byte for byte, secrets by name only, singularity where apptainer is missing, the
image checks of preflight, and a --dry-run that pastes back to the same container."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from compiler.model.trainers import AXOLOTL as AXOLOTL_TRAINER
from compiler.pipeline.pipeline import compile_files
from compiler.plan.bill import bill_of
from tests.conftest import SHELLS, compile_text, install_stub, write_script
from tests.script.test_container_jobs import HOSTILE, json_quote
from tests.script.test_env_hostile import CANARY, traced_outputs

# apptainer's PATH in a container; the stub gives it as apptainer does.
APPTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def run_file(tmp_path: Path, runtime: str = "", rest: str = "") -> str:
    """An apptainer run file whose image is a SIF file in tmp_path (written here)."""
    (tmp_path / "axolotl.sif").write_bytes(b"SIF image")
    return f"""\
version: 1
id: app
runtime:
  kind: apptainer
  image: {tmp_path}/axolotl.sif
{runtime}{rest}"""


AXOLOTL = """\
trainer:
  axolotl:
    config: {base_model: x}
    merge: true
env:
  WANDB_PROJECT: demo
secrets: [HF_TOKEN, {name: WANDB_API_KEY, required: false}]
"""


def run_dir_hash(run_dir: Path) -> str:
    """The run dir's own short name, which W&B run ids and container names use."""
    return hashlib.sha256(str(run_dir).encode()).hexdigest()[:12]


def options(record: dict) -> list[str]:
    """apptainer's argv up to the image."""
    argv = record["argv"]
    return argv[:argv.index(record["image"])]


@pytest.mark.parametrize("shell", SHELLS)
def test_apptainer_gets_its_options_and_the_container_only_what_the_job_gives(
        tmp_path, sandbox, shell):
    script = write_script(tmp_path, compile_text(tmp_path, run_file(tmp_path, rest=AXOLOTL)))
    # What the job inherits must not reach the container, the same names with apptainer's
    # prefixes included (an inherited one would make apptainer print both values), and
    # other names with them (the header does not show them). A value with a line that looks
    # like another such variable only unsets that name too.
    env = sandbox.env(HF_TOKEN="t", LOGNAME="me", SINGULARITYENV_HF_TOKEN="old",
                      APPTAINERENV_WANDB_PROJECT="old", APPTAINERENV_LD_PRELOAD="/x.so",
                      SINGULARITYENV_OTHER="o", A="1\nAPPTAINERENV_HF_HOME=/y")
    run = sandbox.run(script, shell=shell, env=env)
    assert run.returncode == 0, run.stderr
    run_dir = sandbox.home / "overbrainer/runs/app"
    cache_dir = sandbox.home / "overbrainer/.hf-cache"
    expected = ["apptainer", "exec", "--cleanenv", "--contain", "--no-eval", "--nv",
                "--home", f"{run_dir}/.obc/home:/workspace/run/.obc/home",
                "--bind", f"{run_dir}:/workspace/run",
                "--bind", f"{cache_dir}:/workspace/hf-cache",
                "--pwd", "/workspace/run", str(tmp_path / "axolotl.sif")]
    assert [r["argv"] for r in run.apptainer_runs] == [
        [*expected, "axolotl", "train", "axolotl.yaml"],
        [*expected, "axolotl", "merge-lora", "axolotl.yaml"],
    ]
    container = {"LANG": "C", "HF_HOME": "/workspace/hf-cache", **dict(AXOLOTL_TRAINER.env),
                 "WANDB_PROJECT": "demo", "WANDB_RUN_ID": f"app-{run_dir_hash(run_dir)}",
                 "HF_TOKEN": "t", "HOME": "/workspace/run/.obc/home"}
    assert [r["container_env"] for r in run.apptainer_runs] == \
        [{**container, "PATH": APPTAINER_PATH}] * 2
    assert [s["env"] for s in run.steps] == [container] * 2
    assert [(s["argv"], s["cwd"]) for s in run.steps] == [
        (["train", "axolotl.yaml"], str(run_dir)), (["merge-lora", "axolotl.yaml"], str(run_dir))]
    assert "WARNING" not in run.stderr
    assert (run_dir / ".obc/home").is_dir()


@pytest.mark.parametrize(("gpus", "nv", "devices"), [
    ("all", True, None), ("none", False, ""), ("[0, GPU-3f2a]", True, "0,GPU-3f2a")])
def test_gpus_are_nv_and_cuda_visible_devices(tmp_path, sandbox, gpus, nv, devices):
    text = run_file(tmp_path, f"  gpus: {gpus}\n", "steps: [{name: s, run: [record]}]\n")
    run = sandbox.run(write_script(tmp_path, compile_text(tmp_path, text)))
    assert run.returncode == 0, run.stderr
    ((record,), (step,)) = run.apptainer_runs, run.steps
    assert ("--nv" in options(record)) == nv
    assert step["env"].get("CUDA_VISIBLE_DEVICES") == devices


def test_cleanenv_and_contain_off_leave_the_host_environment_in(tmp_path, sandbox):
    text = run_file(tmp_path, "  cleanenv: false\n  contain: false\n",
                    "steps: [{name: s, run: [record]}]\nenv: {A: a}\n")
    run = sandbox.run(write_script(tmp_path, compile_text(tmp_path, text)),
                      env=sandbox.env(LOGNAME="me", A="host"))
    assert run.returncode == 0, run.stderr
    ((record,), (step,)) = run.apptainer_runs, run.steps
    assert options(record)[:4] == ["apptainer", "exec", "--no-eval", "--nv"]
    # apptainer passes the host's variables in, but obc's values win.
    assert (step["env"]["LOGNAME"], step["env"]["A"]) == ("me", "a")


@pytest.mark.parametrize("shell", SHELLS)
def test_hostile_values_reach_the_step_byte_for_byte(tmp_path, sandbox, shell):
    env = "\n".join(f"  V{i}: {json_quote(v)}" for i, v in enumerate(HOSTILE))
    args = ", ".join(json_quote(v) for v in HOSTILE)
    (sandbox.home / "data dir/it's").mkdir(parents=True)
    text = run_file(tmp_path, """\
  mounts: [{source: "~/data dir/it's", target: /data, readonly: true}]
""", f"""\
steps:
  - name: go
    run: [record, {args}]
env:
{env}
""")
    run = sandbox.run(write_script(tmp_path, compile_text(tmp_path, text)), shell=shell)
    assert run.returncode == 0, run.stderr
    ((record,), (step,)) = run.apptainer_runs, run.steps
    assert step["argv"] == HOSTILE
    assert {k: v for k, v in step["env"].items() if k.startswith("V")} == {
        f"V{i}": v for i, v in enumerate(HOSTILE)}
    assert f"{sandbox.home}/data dir/it's:/data:ro" in record["argv"]
    assert not (tmp_path / "PWNED").exists() and not (sandbox.home / "PWNED").exists()


@pytest.mark.parametrize("shell", SHELLS)
def test_a_secret_is_passed_by_name_and_shows_nowhere_even_under_sh_x(
        tmp_path, sandbox, shell, monkeypatch):
    text = compile_text(tmp_path, run_file(tmp_path, rest=AXOLOTL))
    assert "CANARY" not in text
    script = write_script(tmp_path, text)
    # An inherited APPTAINERENV_HF_TOKEN of another value too: apptainer, given both prefixes
    # with different values, prints both.
    env = sandbox.env(HF_TOKEN=CANARY, SINGULARITYENV_HF_TOKEN=CANARY + "-old")
    outputs = traced_outputs(script, sandbox, shell, monkeypatch, env)
    assert not any("CANARY" in output for output in outputs)
    records = sandbox.records()
    assert not any("CANARY" in " ".join(r["argv"]) for r in records)
    assert [s["env"]["HF_TOKEN"] for s in records if "program" in s] == [CANARY, CANARY]
    # An optional secret that is not set is not in the container, even as empty.
    assert all("WANDB_API_KEY" not in r["container_env"] for r in records if "apptainer" in r)
    assert not (sandbox.home / "PWNED").exists()


def test_singularity_is_used_where_apptainer_is_missing(tmp_path, sandbox):
    (sandbox.bin / "apptainer").unlink()
    install_stub(sandbox.bin / "singularity", "apptainer")
    text = run_file(tmp_path, rest="steps: [{name: s, run: [record]}]\nsecrets: [HF_TOKEN]\n"
                                   "env: {A: 'x,y'}\n")
    run = sandbox.run(write_script(tmp_path, compile_text(tmp_path, text)),
                      env=sandbox.env(HF_TOKEN="t"))
    assert run.returncode == 0, run.stderr
    ((record,), (step,)) = run.apptainer_runs, run.steps
    assert (record["apptainer"], record["argv"][:2]) == ("singularity", ["singularity", "exec"])
    # SingularityCE reads SINGULARITYENV_ only: the values still arrive.
    assert (step["env"]["HF_TOKEN"], step["env"]["A"]) == ("t", "x,y")


def test_preflight_names_a_missing_apptainer_and_image_and_exits_3(tmp_path, sandbox):
    text = run_file(tmp_path, rest="steps: [{name: s, run: [record]}]\n")
    (tmp_path / "axolotl.sif").unlink()
    (sandbox.bin / "apptainer").unlink()
    run = sandbox.run(write_script(tmp_path, compile_text(tmp_path, text)),
                      env=sandbox.env(PATH=sandbox.path_without_system_bins()))
    assert run.returncode == 3
    assert run.stderr.splitlines() == [
        "obc: preflight: apptainer (or singularity) not found on PATH",
        f"obc: preflight: image file {tmp_path}/axolotl.sif not found",
    ]
    assert not (sandbox.home / "overbrainer").exists()


def test_preflight_names_a_missing_sha256sum_which_the_wandb_run_id_needs(tmp_path, sandbox):
    script = write_script(tmp_path, compile_text(tmp_path, run_file(tmp_path, rest=AXOLOTL)))
    path = sandbox.path_without_system_bins()
    (sandbox.root / "tools" / "sha256sum").unlink()
    run = sandbox.run(script, env=sandbox.env(HF_TOKEN="t", PATH=path))
    assert run.returncode == 3
    assert "obc: preflight: sha256sum (coreutils) not found on PATH" in run.stderr.splitlines()


def test_preflight_checks_the_image_against_its_sha256(tmp_path, sandbox):
    digest = hashlib.sha256(b"SIF image").hexdigest()
    text = run_file(tmp_path, f"  image_sha256: {digest}\n", "steps: [{name: s, run: [record]}]\n")
    script = write_script(tmp_path, compile_text(tmp_path, text))
    assert sandbox.run(script).returncode == 0
    (tmp_path / "axolotl.sif").write_bytes(b"another image")
    run = sandbox.run(script)
    assert run.returncode == 3
    assert run.stderr.splitlines() == [f"obc: preflight: image file {tmp_path}/axolotl.sif is "
                                       "not the one runtime.image_sha256 names"]
    assert len(run.apptainer_runs) == 1  # the first run's only


def test_an_image_path_with_a_variable_is_expanded_where_the_job_runs(tmp_path, sandbox):
    text = run_file(tmp_path, rest="steps: [{name: s, run: [record]}]\n").replace(
        f"image: {tmp_path}/", "image: ${IMAGES}/")
    script = write_script(tmp_path, compile_text(tmp_path, text))
    run = sandbox.run(script, env=sandbox.env(IMAGES=str(tmp_path)))
    assert run.returncode == 0, run.stderr
    assert run.apptainer_runs[0]["image"] == f"{tmp_path}/axolotl.sif"
    unset = sandbox.run(script)
    assert unset.returncode == 3
    assert "$IMAGES is not set or empty, and runtime.image needs it" in unset.stderr


# An optional secret that is not set is not passed: the printed commands say so too.
@pytest.mark.parametrize("optional", [{"WANDB_API_KEY": "k"}, {}])
def test_dry_run_prints_what_pastes_back_to_the_same_container(tmp_path, sandbox, optional):
    script = write_script(tmp_path, compile_text(tmp_path, run_file(tmp_path, rest=AXOLOTL)))
    env = sandbox.env(HF_TOKEN="it's $secret", **optional)
    dry = sandbox.run(script, "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert dry.records == [] and not (sandbox.home / "overbrainer").exists()
    assert "export APPTAINERENV_HF_TOKEN=\"$HF_TOKEN\"" in dry.stdout.splitlines()
    assert ("APPTAINERENV_WANDB_API_KEY" in dry.stdout) == bool(optional)
    pasted = subprocess.run([shutil.which("dash"), "-c", dry.stdout], env=env,
                            capture_output=True, text=True, check=False)
    assert pasted.returncode == 0, pasted.stderr
    from_paste = [(r["argv"], r["container_env"]) for r in sandbox.records()
                  if "apptainer" in r]
    shutil.rmtree(sandbox.home / "overbrainer")
    sandbox.state.joinpath("log.jsonl").unlink()
    real = sandbox.run(script, env=env)
    assert real.returncode == 0, real.stderr
    assert from_paste == [(r["argv"], r["container_env"]) for r in real.apptainer_runs]
    assert json.dumps(from_paste).count("it's $secret") == 2


def test_the_bill_of_materials_names_the_image_file_apptainers_options_and_mounts(tmp_path):
    digest = hashlib.sha256(b"SIF image").hexdigest()
    compile_text(tmp_path, run_file(tmp_path, f"  image_sha256: {digest}\n  mounts: [{{source: "
                                    "/data, target: /data, readonly: true}]\n",
                                    "steps: [{name: s, run: [record]}]\n"))
    bill = bill_of(compile_files([tmp_path / "run.yaml"]).scripts[0].job)
    assert [(i.reference, i.digest, i.registry) for i in bill.images] == [
        (f"{tmp_path}/axolotl.sif", f"sha256:{digest}", "a file")]
    assert [p.option for p in bill.privileges] == [
        "", "--cleanenv", "--contain", "--no-eval", "--nv"]
    assert [(m.source, m.target, m.mode) for m in bill.mounts][2:] == [("/data", "/data", "ro")]
    assert all("axolotl.sif" not in e.purpose for e in bill.egress)
