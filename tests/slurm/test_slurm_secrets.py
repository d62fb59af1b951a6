"""A required secret that a Slurm job lacks because sbatch ran with --export=NONE (or a list
of names without it) fails preflight with a hint saying so, on the real cluster of
tests/slurm_cluster.py (docs/slurm.md, "What the admin needs on the nodes")."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Sandbox, compile_text, write_script
from tests.support.slurm_cluster import SlurmCluster

pytestmark = pytest.mark.slow

CANARY = "hf_canary_value_never_shown"


def job(tmp_path: Path, env_file: str = "") -> Path:
    return write_script(tmp_path, compile_text(tmp_path, f"""\
version: 1
id: exported
runtime: {{kind: native{env_file}}}
paths: {{run_dir: {tmp_path}/run}}
secrets: [HF_TOKEN]
steps: [{{name: s, run: [sh, -c, 'echo "token of ${{#HF_TOKEN}} characters"']}}]
slurm: {{}}
"""))


def submit(slurm: SlurmCluster, sandbox: Sandbox, tmp_path: Path, script: Path,
           *options: str) -> tuple[int, str]:
    """sbatch the script with HF_TOKEN set where sbatch runs; its exit code and output."""
    job_id = slurm.submit(script, *options, cwd=tmp_path, env=sandbox.env(HF_TOKEN=CANARY))
    ended = slurm.wait(job_id)
    return ended.exit_code, (tmp_path / f"exported-{job_id}.out").read_text()


@pytest.mark.parametrize("export", ["NONE", "HOME,PATH", "NIL"])
def test_a_secret_left_behind_by_export_fails_preflight_with_a_hint(slurm, sandbox, tmp_path,
                                                                    export):
    code, output = submit(slurm, sandbox, tmp_path, job(tmp_path), f"--export={export}")

    assert code == 3, output
    assert output.splitlines() == [
        f"obc: preflight: secret HF_TOKEN is not set or empty: the job was submitted with "
        f"--export={export}, so it does not get the environment sbatch ran in; submit with "
        "--export=ALL, or with HF_TOKEN among the names of --export, or set it in "
        "runtime.env_file"]


@pytest.mark.parametrize("export", ["ALL", "HF_TOKEN,PATH", "ALL,EXTRA=1"])
def test_what_the_hint_suggests_gives_the_job_its_secret(slurm, sandbox, tmp_path, export):
    code, output = submit(slurm, sandbox, tmp_path, job(tmp_path), f"--export={export}")

    assert code == 0, output
    assert f"token of {len(CANARY)} characters" in output
    assert CANARY not in output


def test_an_env_file_gives_the_secret_under_export_none(slurm, sandbox, tmp_path):
    env_file = tmp_path / "job.env"
    env_file.write_text(f"export HF_TOKEN={CANARY}\n")
    env_file.chmod(0o600)

    code, output = submit(slurm, sandbox, tmp_path, job(tmp_path, f", env_file: {env_file}"),
                          "--export=NONE")

    assert code == 0, output
    assert f"token of {len(CANARY)} characters" in output


def test_a_secret_missing_where_sbatch_ran_gets_no_hint(slurm, sandbox, tmp_path):
    script = job(tmp_path)
    job_id = slurm.submit(script, "--export=HF_TOKEN,PATH", cwd=tmp_path, env=sandbox.env())
    ended = slurm.wait(job_id)

    assert ended.exit_code == 3
    assert (tmp_path / f"exported-{job_id}.out").read_text().splitlines() == [
        "obc: preflight: secret HF_TOKEN is not set or empty"]
