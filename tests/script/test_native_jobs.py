"""native jobs, run by real shells, with a stub trainer in a real virtual environment."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import compile_text, write_script

SHELLS = ["dash", "bash"]


def native(venv, extra: str) -> str:
    return f"""\
version: 1
id: n1
runtime:
  kind: native
  venv: {venv}
{extra}"""


@pytest.mark.parametrize("shell", SHELLS)
def test_steps_run_from_the_venv_in_the_run_dir(tmp_path, sandbox, venv, shell):
    text = compile_text(tmp_path, native(venv, """\
  gpus: [0, 2]
trainer:
  axolotl: {config: {base_model: x}, preprocess: true, merge: true}
env:
  NCCL_DEBUG: INFO
secrets: [HF_TOKEN]
"""))
    run = sandbox.run(write_script(tmp_path, text), shell=shell, env=sandbox.env(HF_TOKEN="t"))
    assert run.returncode == 0, run.stderr
    run_dir = sandbox.home / "overbrainer/runs/n1"
    assert [(s["argv"], s["cwd"]) for s in run.steps] == [
        (["preprocess", "axolotl.yaml"], str(run_dir)),
        (["train", "axolotl.yaml"], str(run_dir)),
        (["merge-lora", "axolotl.yaml"], str(run_dir)),
    ]
    env = run.steps[0]["env"]
    assert env["CUDA_VISIBLE_DEVICES"] == "0,2" and env["NCCL_DEBUG"] == "INFO"
    assert env["AXOLOTL_DO_NOT_TRACK"] == "1" and env["HF_TOKEN"] == "t"
    assert "HF_HOME" not in env  # no cache dir given: Hugging Face's own default
    assert not (sandbox.home / "overbrainer/.hf-cache").exists()
    # Each step ran as the leader of its own process group (so a signal can end all of it).
    assert all(s["pid"] == s["pgid"] for s in run.steps)
    # The venv is activated for every step, as `activate` does.
    assert env["VIRTUAL_ENV"] == str(venv)
    assert run.steps[0]["path"].split(":")[0] == f"{venv}/bin"


def test_programs_a_step_starts_by_name_come_from_the_venv(tmp_path, sandbox, venv):
    # Axolotl's train starts `accelerate` or `torchrun` by name: without the venv first on
    # PATH, a job started from a shell without it (an admin, cron, sbatch) fails.
    launcher = venv / "bin" / "obc-test-launcher"
    launcher.write_text('#!/bin/sh\nexec obc-test-launched "$@"\n')
    launched = venv / "bin" / "obc-test-launched"
    launched.write_text('#!/bin/sh\nprintf "%s|%s\\n" "$VIRTUAL_ENV" "$*" > launched.txt\n')
    for program in (launcher, launched):
        program.chmod(0o755)
    text = compile_text(tmp_path, native(venv, """steps:
  - {name: train, run: [obc-test-launcher, --epochs, "1"]}
  - {name: system, run: [sh, -c, 'echo "$0" > system.txt', from-path]}
"""))
    run = sandbox.run(write_script(tmp_path, text),
                      env={"PATH": "/usr/bin:/bin", "HOME": str(sandbox.home)})
    assert run.returncode == 0, run.stderr
    run_dir = sandbox.home / "overbrainer/runs/n1"
    assert (run_dir / "launched.txt").read_text() == f"{venv}|--epochs 1\n"
    # A program the venv does not have is found on PATH.
    assert (run_dir / "system.txt").read_text() == "from-path\n"


@pytest.mark.parametrize("path", ["bin:/usr/bin:/bin", ":/usr/bin:/bin", "/usr/bin::/bin:."])
def test_relative_path_entries_find_nothing_in_the_run_dir(tmp_path, sandbox, path):
    # The steps run in the run dir, where relative PATH entries would find the run dir's
    # programs rather than those preflight checked from the start dir.
    run_dir = tmp_path / "run"
    for trojan in ("setsid", "env", "record", "bin/setsid", "bin/env", "bin/record"):
        (run_dir / trojan).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / trojan).write_text("#!/bin/sh\necho TROJAN >> trojan.txt\n")
        (run_dir / trojan).chmod(0o755)
    text = compile_text(tmp_path, """version: 1
id: n5
runtime: {kind: native}
steps: [{name: s, run: [record]}]
""")
    env = sandbox.env(PATH=f"{sandbox.bin}:{path}")
    run = sandbox.run(write_script(tmp_path, text), "--run-dir", str(run_dir), env=env)
    assert run.returncode == 0, run.stderr
    assert not (run_dir / "trojan.txt").exists()
    assert len(run.steps) == 1
    assert "obc: ignoring relative PATH entries" in run.stderr


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(("inherited", "expected"), [
    ({"PYTHONPATH": "/old:/older"}, "/new dir:/old:/older"),
    ({"PYTHONPATH": ""}, "/new dir"),
    ({}, "/new dir"),
])
def test_pythonpath_is_prepended_to_the_inherited_value(tmp_path, sandbox, venv, shell,
                                                        inherited, expected):
    text = compile_text(tmp_path, native(venv, """\
steps: [{name: s, run: [axolotl]}]
env: {PYTHONPATH: /new dir}
"""))
    run = sandbox.run(write_script(tmp_path, text), shell=shell, env=sandbox.env(**inherited))
    assert run.returncode == 0, run.stderr
    assert run.steps[0]["env"]["PYTHONPATH"] == expected


@pytest.mark.parametrize("shell", SHELLS)
def test_the_env_file_is_sourced_first(tmp_path, sandbox, venv, shell):
    env_file = tmp_path / "job env.sh"
    env_file.write_text(f"export ODD='it'\\''s a value'\nexport PATH='{sandbox.bin}':\"$PATH\"\n"
                        "export FROM_FILE=$UNSET_IN_CALLER/x\nexport NCCL_DEBUG=WARN\n")
    text = compile_text(tmp_path, f"""\
version: 1
id: n2
runtime: {{kind: native, env_file: "{env_file}"}}
steps: [{{name: s, run: [record]}}]
env: {{NCCL_DEBUG: INFO}}
""")
    env = sandbox.env(PATH="/usr/bin:/bin")  # `record` is found only through the env file
    run = sandbox.run(write_script(tmp_path, text), shell=shell, env=env)
    assert run.returncode == 0, run.stderr
    step_env = run.steps[0]["env"]
    assert step_env["ODD"] == "it's a value" and step_env["FROM_FILE"] == "/x"
    assert step_env["NCCL_DEBUG"] == "INFO"  # the run file's env comes after the env file


def test_a_missing_env_file_and_programs_fail_preflight_together(tmp_path, sandbox, venv):
    text = compile_text(tmp_path, native(venv, """\
  env_file: ~/missing.env
steps:
  - {name: a, run: [no-such-program]}
  - {name: b, run: [/opt/none/bin/tool]}
  - {name: c, run: [scripts/run.sh]}
"""))
    run = sandbox.run(write_script(tmp_path, text))
    assert run.returncode == 3
    assert run.stderr.splitlines() == [
        "obc: preflight: env file ~/missing.env is not readable",
        "obc: preflight: program no-such-program not found in the venv or on PATH",
        "obc: preflight: program /opt/none/bin/tool not found or not executable",
        "obc: preflight: program scripts/run.sh not found in the run dir or not executable",
    ]


def test_home_relative_paths_expand_on_the_machine_that_runs_the_job(tmp_path, sandbox):
    text = compile_text(tmp_path, """\
version: 1
id: n3
runtime: {kind: native}
paths: {run_dir: ~/runs/it's here, cache_dir: ~/hf cache}
steps: [{name: s, run: [record]}]
""")
    # The header and the plan record name the run file, relative to where obc ran.
    body = text.split("# --- the job ")[1].split("# --- obc plan record")[0]
    assert str(tmp_path) not in body
    run = sandbox.run(write_script(tmp_path, text))
    assert run.returncode == 0, run.stderr
    assert run.steps[0]["cwd"] == f"{sandbox.home}/runs/it's here"
    assert run.steps[0]["env"]["HF_HOME"] == f"{sandbox.home}/hf cache"


@pytest.mark.parametrize("shell", SHELLS)
def test_files_are_written_exactly_into_the_run_dir(tmp_path, sandbox, shell):
    contents = {"plain.txt": "a\nb\n", "no-newline.txt": "last line, then é", "empty.txt": "",
                "tricky/deep.txt": "OBC_EOF\n$HOME `x` 'q' \\\n\ttab\r\n\n\n"}
    for i, content in enumerate(contents.values()):
        (tmp_path / f"src{i}").write_bytes(content.encode())
    files = "\n".join(f"  {name}: src{i}" for i, name in enumerate(contents))
    text = compile_text(tmp_path, f"""\
version: 1
id: n4
runtime: {{kind: native}}
steps: [{{name: s, run: [record]}}]
files:
{files}
""")
    run = sandbox.run(write_script(tmp_path, text), shell=shell)
    assert run.returncode == 0, run.stderr
    run_dir = sandbox.home / "overbrainer/runs/n4"
    for name, content in contents.items():
        assert (run_dir / name).read_bytes() == content.encode(), name
    assert sorted(p.name for p in run_dir.rglob("*") if ".obc" not in p.parts) == sorted(
        ["plain.txt", "no-newline.txt", "empty.txt", "tricky", "deep.txt"])


def test_variables_in_paths_expand_where_the_job_runs(tmp_path, sandbox, venv):
    scratch = tmp_path / "scratch space"
    text = compile_text(tmp_path, f"""\
version: 1
id: n6
runtime: {{kind: native, venv: "${{VENVS}}/{venv.name}"}}
paths: {{run_dir: "${{SCRATCH}}/runs/${{RUN}}", cache_dir: "${{SCRATCH}}/hf"}}
steps: [{{name: s, run: [axolotl, x]}}]
""")
    assert "scratch space" not in text
    env = sandbox.env(SCRATCH=str(scratch), RUN="r1", VENVS=str(venv.parent))
    run = sandbox.run(write_script(tmp_path, text), env=env)
    assert run.returncode == 0, run.stderr
    (step,) = run.steps
    assert step["cwd"] == f"{scratch}/runs/r1"
    assert step["env"]["HF_HOME"] == f"{scratch}/hf"
    assert step["env"]["VIRTUAL_ENV"] == str(venv)


def test_preflight_names_every_variable_a_path_needs_that_is_unset(tmp_path, sandbox, venv):
    text = compile_text(tmp_path, """\
version: 1
id: n7
runtime: {kind: native, venv: "${VENVS}/x", env_file: "${ETC}/job.env"}
paths: {run_dir: "~/runs/${RUN}", cache_dir: "${SCRATCH}/hf"}
steps: [{name: s, run: [record]}]
""")
    env = {"PATH": sandbox.env()["PATH"], "RUN": "", "OBC_STUB_STATE": str(sandbox.state)}
    run = sandbox.run(write_script(tmp_path, text), env=env)
    assert run.returncode == 3
    said = run.stderr
    for name, field in (("HOME", "paths.run_dir"), ("RUN", "paths.run_dir"),
                        ("SCRATCH", "paths.cache_dir"), ("VENVS", "runtime.venv"),
                        ("ETC", "runtime.env_file")):
        assert f"obc: preflight: ${name} is not set or empty, and {field} needs it" in said
    assert run.steps == [] and not list(tmp_path.glob("runs*"))
    # Given on the command line, the run dir needs no variable.
    run = sandbox.run(write_script(tmp_path, text), "--run-dir", str(tmp_path / "r"), env=env)
    assert "paths.run_dir needs it" not in run.stderr


def test_a_relative_env_file_is_read_from_the_start_dir_not_searched_on_path(tmp_path,
                                                                            sandbox):
    start, elsewhere = tmp_path / "start", tmp_path / "on-path"
    for folder, origin in ((start, "start dir"), (elsewhere, "PATH")):
        folder.mkdir()
        (folder / "job.env").write_text(f"export FROM='{origin}'\n")
    text = compile_text(tmp_path, """\
version: 1
id: n8
runtime: {kind: native, env_file: job.env}
steps: [{name: s, run: [record]}]
""")
    env = sandbox.env(PATH=f"{elsewhere}:{sandbox.env()['PATH']}")
    result = subprocess.run(["dash", str(write_script(tmp_path, text))], cwd=start, env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    (step,) = [r for r in sandbox.records() if "program" in r]
    assert step["env"]["FROM"] == "start dir"


def test_explicit_steps_that_run_axolotl_get_its_telemetry_turned_off(tmp_path, sandbox):
    # With telemetry on and no network, `axolotl train` never exits (it flushes its events).
    text = compile_text(tmp_path, """\
version: 1
id: n9
runtime: {kind: native}
steps:
  - {name: train, run: [axolotl, train, cfg.yaml]}
  - {name: other, run: [record]}
""")
    run = sandbox.run(write_script(tmp_path, text))
    assert run.returncode == 0, run.stderr
    assert [s["env"].get("AXOLOTL_DO_NOT_TRACK") for s in run.steps] == ["1", "1"]
