"""What the job inherits: secrets stay secret even under `sh -x`, and a hostile environment
(IFS, CDPATH, ENV, BASH_ENV, PS4, SHELLOPTS, POSIXLY_CORRECT, an odd umask) changes nothing.
"""

from __future__ import annotations

import os
import stat

import pytest

from tests.conftest import SHELLS, compile_text, timeless_status, write_script

CANARY = "hf_CANARY_9d3e'\"$(touch PWNED)`id` ${HOME}"
JOB = """\
version: 1
id: env
runtime: {{kind: {kind}}}
steps:
  - {{name: first, run: [record, "a b", "$HOME"]}}
  - {{name: second, run: [record, --touch, made.txt]}}
files: {{data/config.txt: config.txt}}
env: {{WANDB_PROJECT: "it's"}}
secrets: [HF_TOKEN, {{name: WANDB_API_KEY, required: false}}]
"""


@pytest.fixture(params=["native", "docker"])
def script(request, tmp_path):
    (tmp_path / "config.txt").write_text("lr: 1e-5\n")
    return write_script(tmp_path, compile_text(tmp_path, JOB.format(kind=request.param)))


def traced(shell: str) -> str:
    """`shell` run with -x, as an admin who debugs the job would."""
    return f"{shell}-x"


def traced_outputs(script, sandbox, shell: str, monkeypatch, env: dict[str, str]) -> list[str]:
    """What the job, its --dry-run and its --help print under `shell -x`, each run once."""
    monkeypatch.setitem(SHELLS, traced(shell), [*SHELLS[shell], "-x"])
    outputs = []
    for args in ((), ("--dry-run",), ("--help",)):
        run = sandbox.run(script, *args, shell=traced(shell), env=env)
        assert run.returncode == 0, run.stderr
        assert "+" in run.stderr or args == ("--help",)  # it was traced
        outputs.append(run.stdout + run.stderr)
    return outputs


@pytest.mark.parametrize("shell", SHELLS)
def test_a_secret_appears_nowhere_but_in_the_step_environment_even_under_sh_x(
        script, sandbox, shell, monkeypatch):
    outputs = traced_outputs(script, sandbox, shell, monkeypatch,
                             sandbox.env(HF_TOKEN=CANARY, WANDB_API_KEY=CANARY + "2"))
    assert not any("CANARY" in output for output in outputs)
    records = sandbox.records()
    assert not any("CANARY" in " ".join(r["argv"]) for r in records)
    steps = [r for r in records if "program" in r]
    assert [s["env"]["HF_TOKEN"] for s in steps] == [CANARY, CANARY]
    assert [s["env"]["WANDB_API_KEY"] for s in steps] == [CANARY + "2"] * 2
    assert not (sandbox.home / "PWNED").exists()


@pytest.mark.parametrize("shell", SHELLS)
def test_a_missing_secret_is_named_never_echoed(script, sandbox, shell, monkeypatch):
    monkeypatch.setitem(SHELLS, traced(shell), [*SHELLS[shell], "-x"])
    run = sandbox.run(script, shell=traced(shell), env=sandbox.env(WANDB_API_KEY=CANARY))
    assert run.returncode == 3
    assert "obc: preflight: secret HF_TOKEN is not set or empty" in run.stderr
    assert "CANARY" not in run.stdout + run.stderr and sandbox.records() == []


# Each variable set to something that would break a script that trusted it. The ENV and
# BASH_ENV file (sourced by some shells at start) changes the shell's own state the same way.
# POSIXLY_CORRECT goes alone: it puts bash in POSIX mode, where bash ignores BASH_ENV.
HOSTILE_RC = "IFS=1/; CDPATH=/\n"


def hostile_envs(sandbox, rc_file) -> list[dict[str, str]]:
    return [sandbox.env(HF_TOKEN=CANARY, IFS="1/ ", CDPATH="/:/tmp", ENV=str(rc_file),
                        BASH_ENV=str(rc_file), PS4="+[$HF_TOKEN] "),
            sandbox.env(HF_TOKEN=CANARY, POSIXLY_CORRECT="1")]


def outcome(run, sandbox, names=("WANDB_PROJECT", "HF_TOKEN")) -> dict:
    """What must not change: exit code, output, what the steps got, the run dir."""
    run_dir = sandbox.home / "overbrainer/runs/env"
    files = {str(p.relative_to(run_dir)): (p.read_bytes() if p.is_file() else None,
                                            stat.S_IMODE(p.stat().st_mode))
             for p in sorted(run_dir.rglob("*"))}
    if ".obc/status.json" in files:
        status, mode = files[".obc/status.json"]
        files[".obc/status.json"] = (timeless_status(status), mode)
    return {
        "code": run.returncode, "stdout": run.stdout, "stderr": run.messages,
        "steps": [(s["argv"], s["cwd"], {n: s["env"].get(n) for n in names})
                  for s in run.steps],
        "files": files,
    }


def run_with_umask(sandbox, script, shell, env, mask: int):
    old = os.umask(mask)
    try:
        return sandbox.run(script, shell=shell, env=env)
    finally:
        os.umask(old)


@pytest.mark.parametrize("shell", SHELLS)
def test_a_hostile_environment_changes_nothing_and_leaks_nothing(script, sandbox, tmp_path,
                                                                 shell):
    rc_file = tmp_path / "hostile.rc"
    rc_file.write_text(HOSTILE_RC)
    baseline = outcome(run_with_umask(sandbox, script, shell, sandbox.env(HF_TOKEN=CANARY),
                                      0o022), sandbox)
    assert baseline["code"] == 0, baseline["stderr"]
    for number, env in enumerate(hostile_envs(sandbox, rc_file)):
        (sandbox.state / "log.jsonl").unlink()
        (sandbox.home / "overbrainer").rename(tmp_path / f"previous-run-{number}")
        run = run_with_umask(sandbox, script, shell, env, 0o022)
        assert outcome(run, sandbox) == baseline
        assert "CANARY" not in run.stdout + run.stderr


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("script", ["native"], indirect=True)  # the same code for containers
@pytest.mark.parametrize(("mask", "dir_mode", "file_mode"), [
    (0o022, 0o755, 0o644),
    (0o077, 0o700, 0o600),  # kept: a private run stays private
    (0o777, 0o700, 0o600),  # the owner can always use what the job creates
])
def test_the_umask_keeps_group_and_other_bits_and_lets_the_owner_in(
        script, sandbox, shell, mask, dir_mode, file_mode):
    run = run_with_umask(sandbox, script, shell, sandbox.env(HF_TOKEN="t"), mask)
    assert run.returncode == 0, run.stderr
    run_dir = sandbox.home / "overbrainer/runs/env"
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in
             [run_dir, run_dir / "data", run_dir / "data/config.txt"]}
    assert modes == {"env": dir_mode, "data": dir_mode, "config.txt": file_mode}


@pytest.mark.parametrize("shell", ["bash", "bash-posix"])
def test_shellopts_xtrace_traces_bash_but_leaks_no_secret(script, sandbox, shell):
    run = sandbox.run(script, shell=shell, env=sandbox.env(HF_TOKEN=CANARY,
                                                             SHELLOPTS="xtrace"))
    assert run.returncode == 0, run.stderr
    assert "+ obc_step 1 first" in run.stderr  # bash took xtrace from the environment
    assert "CANARY" not in run.stdout + run.stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_a_secret_an_env_file_sets_does_not_show_under_sh_x(sandbox, tmp_path, shell,
                                                             monkeypatch):
    monkeypatch.setitem(SHELLS, traced(shell), [*SHELLS[shell], "-x"])
    (tmp_path / "job.env").write_text("export HF_TOKEN='hf_CANARY_from_the_env_file'\n")
    script = write_script(tmp_path, compile_text(tmp_path, f"""\
version: 1
id: envfile
runtime: {{kind: native, env_file: "{tmp_path}/job.env"}}
steps: [{{name: s, run: [record]}}]
secrets: [HF_TOKEN]
"""))
    run = sandbox.run(script, shell=traced(shell), env=sandbox.env())
    assert run.returncode == 0, run.stderr
    assert "+" in run.stderr and "CANARY" not in run.stdout + run.stderr
    (step,) = run.steps
    assert step["env"]["HF_TOKEN"] == "hf_CANARY_from_the_env_file"


@pytest.mark.parametrize("shell", SHELLS)
def test_an_inherited_ps4_is_expanded_for_the_first_traced_line_only(sandbox, tmp_path, shell,
                                                                      monkeypatch):
    # PS4 is set first: before it, the shell traces that very line with the one it inherited.
    monkeypatch.setitem(SHELLS, traced(shell), [*SHELLS[shell], "-x"])
    script = write_script(tmp_path, compile_text(tmp_path, JOB.format(kind="native").replace(
        "files: {data/config.txt: config.txt}\n", "")))
    env = sandbox.env(HF_TOKEN=CANARY, PS4="+[$HF_TOKEN] ")
    run = sandbox.run(script, "--help", shell=traced(shell), env=env)
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("CANARY") <= 1
