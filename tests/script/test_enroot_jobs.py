"""enroot jobs, run by every shell against a recording stub `srun` (tests/support/stubs/srun.py) as
if in a Slurm job: each step's srun line, with pyxis's options, values byte for byte,
secrets by name only, the rendezvous and NODE_RANK of a step on every node, preflight and
--dry-run. The real srun with pyxis's options is tests/slurm/test_enroot_slurm.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiler.model.slurm import RENDEZVOUS_NAMES
from compiler.model.trainers import AXOLOTL as AXOLOTL_TRAINER
from compiler.pipeline.pipeline import compile_files
from compiler.plan.bill import bill_of
from tests.conftest import SHELLS, Sandbox, compile_text, install_slurm_stubs, write_script
from tests.script.test_apptainer_jobs import run_dir_hash
from tests.script.test_container_jobs import HOSTILE, json_quote
from tests.script.test_env_hostile import CANARY, traced_outputs

IMAGE = "nvcr.io/nvidia/pytorch:24.01-py3"


def run_file(runtime: str = "", rest: str = "", slurm: str = "{}") -> str:
    return f"""\
version: 1
id: enr
runtime:
  kind: enroot
  image: {IMAGE}
{runtime}{rest}slurm: {slurm}
"""


@pytest.fixture
def slurm_box(sandbox: Sandbox) -> Sandbox:
    """The sandbox with a stub srun, and scontrol for a job on n1 and n2."""
    install_slurm_stubs(sandbox)
    return sandbox


def in_job(box: Sandbox, **extra: str) -> dict[str, str]:
    """The environment of a batch script of job 42 on two nodes."""
    return box.env(SLURM_JOB_ID="42", SLURM_JOB_NODELIST="n[1-2]", SLURM_JOB_NUM_NODES="2",
                   **extra)


def sruns(box: Sandbox) -> list[dict]:
    return [r for r in box.records() if "srun" in r]


def steps(box: Sandbox) -> list[dict]:
    return [r for r in box.records() if "program" in r]


AXOLOTL = """\
trainer:
  axolotl:
    config: {base_model: x}
    merge: true
env:
  WANDB_PROJECT: "a,b"
secrets: [HF_TOKEN, {name: WANDB_API_KEY, required: false}]
"""
# The variables the job above gives its containers, in the order of --container-env.
AXOLOTL_NAMES = ["HF_HOME", *dict(AXOLOTL_TRAINER.env), "WANDB_PROJECT", "WANDB_RUN_ID", "HF_TOKEN",
                 "WANDB_API_KEY"]


@pytest.mark.parametrize("shell", SHELLS)
def test_each_step_is_srun_with_pyxis_options_and_the_values_in_its_environment(
        tmp_path, slurm_box, shell):
    script = write_script(tmp_path, compile_text(tmp_path, run_file(rest=AXOLOTL)))
    # pyxis reads an option it is not given from PYXIS_CONTAINER_<OPTION>: inherited ones
    # would change the container (a writable one, a named one kept after the job).
    run = slurm_box.run(script, shell=shell, env=in_job(
        slurm_box, HF_TOKEN="t", PYXIS_CONTAINER_WRITABLE="1", PYXIS_CONTAINER_NAME="kept"))
    assert run.returncode == 0, run.stderr
    run_dir = slurm_box.home / "overbrainer/runs/enr"
    cache_dir = slurm_box.home / "overbrainer/.hf-cache"
    options = {"nodes": "1", "ntasks": "1", "ntasks-per-node": "1", "kill-on-bad-exit": "1",
               "export": "ALL", "container-image": "nvcr.io#nvidia/pytorch:24.01-py3",
               "container-mounts": f"{run_dir}:/workspace/run,{cache_dir}:/workspace/hf-cache",
               "container-workdir": "/workspace/run", "no-container-mount-home": "",
               "container-env": ",".join(AXOLOTL_NAMES)}
    records = sruns(slurm_box)
    assert [r["options"] for r in records] == [options, options]
    assert [r["srun"][len(options):] for r in records] == [
        ["axolotl", "train", "axolotl.yaml"], ["axolotl", "merge-lora", "axolotl.yaml"]]
    for record in records:
        assert {name: record["env"].get(name) for name in AXOLOTL_NAMES} == {
            "HF_HOME": "/workspace/hf-cache", **dict(AXOLOTL_TRAINER.env), "WANDB_PROJECT": "a,b",
            "WANDB_RUN_ID": f"enr-{run_dir_hash(run_dir)}", "HF_TOKEN": "t",
            "WANDB_API_KEY": None}
        assert not [name for name in record["env"] if name.startswith("PYXIS_CONTAINER_")]
    assert [s["cwd"] for s in steps(slurm_box)] == [str(run_dir)] * 2


@pytest.mark.parametrize("shell", SHELLS)
def test_hostile_values_reach_the_step_byte_for_byte(tmp_path, slurm_box, shell):
    env = "\n".join(f"  V{i}: {json_quote(v)}" for i, v in enumerate(HOSTILE))
    args = ", ".join(json_quote(v) for v in HOSTILE)
    text = run_file("  mounts: [{source: \"~/data dir/it's\", target: /data, readonly: true}]\n",
                    f"steps: [{{name: go, run: [record, {args}]}}]\nenv:\n{env}\n")
    run = slurm_box.run(write_script(tmp_path, compile_text(tmp_path, text)), shell=shell,
                        env=in_job(slurm_box))
    assert run.returncode == 0, run.stderr
    ((srun,), (step,)) = sruns(slurm_box), steps(slurm_box)
    assert step["argv"] == HOSTILE
    assert {k: v for k, v in step["env"].items() if k.startswith("V")} == {
        f"V{i}": v for i, v in enumerate(HOSTILE)}
    assert srun["options"]["container-mounts"].endswith(f",{slurm_box.home}/data dir/it's:/data:ro")
    assert not (tmp_path / "PWNED").exists() and not (slurm_box.home / "PWNED").exists()


@pytest.mark.parametrize("shell", SHELLS)
def test_a_secret_is_passed_by_name_and_shows_nowhere_even_under_sh_x(
        tmp_path, slurm_box, shell, monkeypatch):
    text = compile_text(tmp_path, run_file(rest=AXOLOTL))
    assert "CANARY" not in text
    script = write_script(tmp_path, text)
    env = in_job(slurm_box, HF_TOKEN=CANARY)
    outputs = traced_outputs(script, slurm_box, shell, monkeypatch, env)
    assert not any("CANARY" in output for output in outputs)
    assert not any("CANARY" in " ".join(r["srun"]) for r in sruns(slurm_box))
    assert [s["env"]["HF_TOKEN"] for s in steps(slurm_box)] == [CANARY, CANARY]
    assert not (slurm_box.home / "PWNED").exists()


def test_a_step_on_every_node_gets_the_rendezvous_and_each_node_its_rank(tmp_path, slurm_box):
    text = run_file(rest=AXOLOTL.replace("    merge: true\n", "    preprocess: true\n"),
                    slurm="{nodes: 2, gpus_per_node: 4, rendezvous_port: 29611}")
    run = slurm_box.run(write_script(tmp_path, compile_text(tmp_path, text)),
                        env=in_job(slurm_box, HF_TOKEN="t", CUDA_VISIBLE_DEVICES="0,1,2,3"))
    assert run.returncode == 0, run.stderr
    preprocess, train = sruns(slurm_box)
    assert (preprocess["options"]["nodes"], train["options"]["nodes"]) == ("1", "2")
    assert train["options"]["container-env"].split(",") == [
        *AXOLOTL_NAMES, "CUDA_VISIBLE_DEVICES", *RENDEZVOUS_NAMES]
    torchrun = ["--launcher", "torchrun", "--", "--nnodes", "2", "--nproc_per_node", "4",
                "--rdzv_backend", "c10d", "--rdzv_endpoint", "n1:29611", "--rdzv_id", "42"]
    shell, c, part, name, failed, *command = train["srun"][len(train["options"]):]
    # A shell that sets the rank and records a failure in the first node's temporary folder.
    assert (shell, c, name) == ("/bin/sh", "-c", "sh") and "NODE_RANK=$SLURM_NODEID" in part
    assert failed.startswith(".obc/tmp.") and failed.endswith("/failed")
    assert command == ["axolotl", "train", "axolotl.yaml", *torchrun]
    ranks = sorted((s["argv"][0], s["env"]["NODE_RANK"], s["env"]["MASTER_ADDR"])
                   for s in steps(slurm_box))
    assert ranks == [("preprocess", "0", "n1"), ("train", "0", "n1"), ("train", "1", "n1")]
    assert {s["env"]["CUDA_VISIBLE_DEVICES"] for s in steps(slurm_box)} == {"0,1,2,3"}


def test_preflight_wants_a_slurm_job_with_pyxis_and_mountable_folders(tmp_path, slurm_box):
    text = run_file("  mounts: [{source: '${DATA}', target: /data}]\n",
                    "steps: [{name: s, run: [record]}]\n")
    script = write_script(tmp_path, compile_text(tmp_path, text))
    outside = slurm_box.run(script, env=slurm_box.env(DATA="/srv/a$b", OBC_STUB_NO_PYXIS="1"))
    assert outside.returncode == 3
    assert outside.stderr.splitlines() == [
        "obc: preflight: an enroot job runs its steps with srun, in a Slurm job: submit it "
        "with sbatch",
        "obc: preflight: srun has no --container-image: pyxis is not installed",
        "obc: preflight: pyxis writes mounts into a shell script for enroot, between double "
        "quotes: /srv/a$b cannot be one",
    ]
    quoted = slurm_box.run(script, "--run-dir", str(tmp_path / 'a"b'),
                           env=in_job(slurm_box, DATA="/srv"))
    assert quoted.returncode == 3
    assert f"between double quotes: {tmp_path}/a\"b cannot be one" in quoted.stderr
    assert sruns(slurm_box) == []


def test_a_squashfs_image_is_checked_and_given_as_its_path(tmp_path, slurm_box):
    text = run_file(rest="steps: [{name: s, run: [record]}]\n").replace(
        f"image: {IMAGE}", "image: ${IMAGES}/axolotl.sqsh")
    script = write_script(tmp_path, compile_text(tmp_path, text))
    missing = slurm_box.run(script, env=in_job(slurm_box, IMAGES=str(tmp_path)))
    assert missing.returncode == 3
    assert f"image file {tmp_path}/axolotl.sqsh not found" in missing.stderr
    (tmp_path / "axolotl.sqsh").write_bytes(b"squashfs")
    run = slurm_box.run(script, env=in_job(slurm_box, IMAGES=str(tmp_path)))
    assert run.returncode == 0, run.stderr
    assert sruns(slurm_box)[0]["options"]["container-image"] == f"{tmp_path}/axolotl.sqsh"


def test_dry_run_outside_slurm_prints_the_srun_lines_and_starts_nothing(tmp_path, slurm_box):
    text = run_file(rest="steps: [{name: s, run: [record, 'a b']}]\nenv: {A: \"it's\"}\n")
    dry = slurm_box.run(write_script(tmp_path, compile_text(tmp_path, text)), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert slurm_box.records() == [] and not (slurm_box.home / "overbrainer").exists()
    (line,) = [line for line in dry.stdout.splitlines() if line.startswith("env ")]
    assert line.startswith("env 'HF_HOME=/workspace/hf-cache' 'A=it'\\''s' srun '--nodes=1' ")
    assert line.endswith(" --no-container-mount-home '--container-env=HF_HOME,A' record 'a b'")


def test_a_failed_step_fails_the_job_with_its_exit_code(tmp_path, slurm_box):
    text = run_file(rest="steps:\n  - {name: a, run: [record, --exit, '7']}\n"
                         "  - {name: b, run: [record]}\n")
    run = slurm_box.run(write_script(tmp_path, compile_text(tmp_path, text)),
                        env=in_job(slurm_box))
    assert run.returncode == 7
    assert run.stderr.splitlines()[-1] == "obc: step 1/2 a failed with exit code 7"
    assert json.dumps([s["argv"] for s in steps(slurm_box)]) == '[["--exit", "7"]]'
    assert Path(slurm_box.home / "overbrainer/runs/enr/.obc").is_dir()


def test_the_bill_of_materials_names_the_registry_image_and_pyxis_options(tmp_path):
    compile_text(tmp_path, run_file(rest="steps: [{name: s, run: [record]}]\n"))
    bill = bill_of(compile_files([tmp_path / "run.yaml"]).scripts[0].job)
    assert (bill.runtime, [(i.reference, i.registry) for i in bill.images]) == (
        "enroot 3", [(IMAGE, "nvcr.io")])  # enroot 3 cannot be told the digest
    assert [p.option for p in bill.privileges] == ["", "--no-container-mount-home"]
    assert [m.target for m in bill.mounts] == ["/workspace/run", "/workspace/hf-cache"]


def test_require_digests_refuses_an_enroot_image_by_tag(tmp_path, obc, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("run.yaml").write_text(run_file(rest="steps: [{name: s, run: [record]}]\n"))
    done = obc("compile", "run.yaml", "-o", "out", "--require-digests")
    assert done.code == 1
    assert done.stderr.splitlines()[0] == (
        f"run.yaml:5:10: error: runtime.image: '{IMAGE}' is not pinned by digest; import it "
        "into a squashfs file (enroot import) and give its path, or, with enroot 4, lock it "
        "(obc lock) or write NAME:TAG@sha256:<digest>")
    Path("run.yaml").write_text(run_file(rest="steps: [{name: s, run: [record]}]\n")
                                .replace(IMAGE, "/shared/axolotl.sqsh"))
    assert obc("compile", "run.yaml", "-o", "out", "--require-digests").code == 0
