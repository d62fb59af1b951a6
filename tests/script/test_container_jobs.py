"""docker and podman jobs, run by real shells against the recording stub engines."""

from __future__ import annotations

import json
import shlex

import pytest

from compiler.model.defaults import DEFAULT_IMAGE
from tests.conftest import compile_text, container_name, start_script, write_script
from tests.support.engines import wait_until

SHELLS = ["dash", "bash"]
HOSTILE = ["it's", 'say "hi"', "$(touch PWNED)", "`id`", "a b\tc", "line1\nline2", "*", "~/x",
           "-rf", "", "$HOME", "\\n", "日本語", "a;b|c&d", "{a,b}", "=ls"]


def run_file(engine: str, extra: str = "") -> str:
    return f"""\
version: 1
id: t1
runtime:
  kind: {engine}
{extra}"""


DOCKER_GPU_ALL = ["--gpus", "all", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]
PODMAN_GPU_ALL = ["--device", "nvidia.com/gpu=all", "--security-opt=label=disable",
                  "--ulimit", "host"]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(("engine", "gpu_flags", "run_label", "cache_label"), [
    ("docker", DOCKER_GPU_ALL, "", ""),
    ("podman", PODMAN_GPU_ALL, ":Z", ":z"),
])
def test_engine_gets_the_flags_of_the_spec(tmp_path, sandbox, shell, engine, gpu_flags,
                                           run_label, cache_label):
    text = compile_text(tmp_path, run_file(engine, """\
trainer:
  axolotl:
    config: {base_model: x}
    merge: true
env:
  WANDB_PROJECT: demo
secrets: [HF_TOKEN]
"""))
    run = sandbox.run(write_script(tmp_path, text), shell=shell, env=sandbox.env(HF_TOKEN="t"))
    assert run.returncode == 0, run.stderr
    run_dir = sandbox.home / "overbrainer/runs/t1"
    cache_dir = sandbox.home / "overbrainer/.hf-cache"
    # The tests run as root: docker's --user is root's, and podman is rootful (no keep-id).
    user = ["--user", "0:0"] if engine == "docker" else []
    expected = [engine, "run", "--rm", "--init", "--name", container_name("t1", run_dir),
                *user, *gpu_flags, "--ipc=host",
                "-v", f"{run_dir}:/workspace/run{run_label}",
                "-v", f"{cache_dir}:/workspace/hf-cache{cache_label}",
                "-w", "/workspace/run", "-e", "HF_HOME=/workspace/hf-cache",
                "-e", "HOME=/workspace/run/.obc/home",
                "-e", "AXOLOTL_DO_NOT_TRACK=1", "-e", "WANDB_RESUME=allow",
                "-e", "WANDB_PROJECT=demo",
                "-e", f"WANDB_RUN_ID=t1-{container_name('t1', run_dir).rsplit('-', 1)[1]}",
                "-e", "HF_TOKEN", "--", DEFAULT_IMAGE]
    assert [r["argv"] for r in run.engine_runs] == [
        [*expected, "axolotl", "train", "axolotl.yaml"],
        [*expected, "axolotl", "merge-lora", "axolotl.yaml"],
    ]
    assert [s["argv"] for s in run.steps] == [["train", "axolotl.yaml"],
                                               ["merge-lora", "axolotl.yaml"]]
    assert {s["cwd"] for s in run.steps} == {str(run_dir)}
    assert run.steps[0]["env"] == {
        "HF_HOME": "/workspace/hf-cache", "AXOLOTL_DO_NOT_TRACK": "1",
        "HOME": "/workspace/run/.obc/home", "WANDB_RESUME": "allow", "WANDB_PROJECT": "demo",
        "WANDB_RUN_ID": expected[expected.index("WANDB_PROJECT=demo") + 2].split("=")[1],
        "HF_TOKEN": "t"}
    assert (run_dir / ".obc/home").is_dir()
    assert (run_dir / "axolotl.yaml").read_text().startswith("%YAML 1.1\n---\nbase_model: x\n")


@pytest.mark.parametrize(("gpus", "docker_flags", "podman_flags"), [
    ("none", [], ["--security-opt=label=disable"]),
    ("[0, 1]", ["--gpus", '"device=0,1"', "--ulimit", "memlock=-1", "--ulimit", "stack=67108864"],
     ["--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=1",
      "--security-opt=label=disable", "--ulimit", "host"]),
    ("[GPU-3f2a, 2]", ["--gpus", '"device=GPU-3f2a,2"', "--ulimit", "memlock=-1",
                       "--ulimit", "stack=67108864"],
     ["--device", "nvidia.com/gpu=GPU-3f2a", "--device", "nvidia.com/gpu=2",
      "--security-opt=label=disable", "--ulimit", "host"]),
])
@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_gpu_selection_becomes_engine_flags(tmp_path, sandbox, engine, gpus, docker_flags,
                                            podman_flags):
    text = compile_text(tmp_path, run_file(engine, f"""\
  gpus: {gpus}
steps: [{{name: s, run: [record]}}]
"""))
    run = sandbox.run(write_script(tmp_path, text))
    assert run.returncode == 0, run.stderr
    (argv,) = [r["argv"] for r in run.engine_runs]
    after_user = argv.index("--user") + 2 if "--user" in argv else argv.index("--name") + 2
    flags = argv[after_user:argv.index("--ipc=host")]
    assert flags == (docker_flags if engine == "docker" else podman_flags)


@pytest.mark.parametrize("shell", SHELLS)
def test_hostile_values_reach_the_step_byte_for_byte(tmp_path, sandbox, shell):
    env = "\n".join(f"  V{i}: {json_quote(v)}" for i, v in enumerate(HOSTILE))
    args = ", ".join(json_quote(v) for v in HOSTILE)
    text = compile_text(tmp_path, run_file("docker", f"""\
  image: ghcr.io/x/y:1
  mounts: [{{source: "~/data dir/it's", target: /data, readonly: true}}]
  extra_args: ["--label=a b", "--network=none"]
  shm_size: 8g
steps:
  - name: go
    run: [record, {args}]
env:
{env}
"""))
    run = sandbox.run(write_script(tmp_path, text), shell=shell)
    assert run.returncode == 0, run.stderr
    (step,) = run.steps
    assert step["argv"] == HOSTILE
    assert {k: v for k, v in step["env"].items() if k.startswith("V")} == {
        f"V{i}": v for i, v in enumerate(HOSTILE)}
    (argv,) = [r["argv"] for r in run.engine_runs]
    assert argv[argv.index("--shm-size") + 1] == "8g"
    assert f"{sandbox.home}/data dir/it's:/data:ro" in argv
    assert argv[-len(HOSTILE) - 3:-len(HOSTILE) - 1] == ["--", "ghcr.io/x/y:1"]
    assert argv[-len(HOSTILE) - 5:-len(HOSTILE) - 3] == ["--label=a b", "--network=none"]
    assert not (tmp_path / "PWNED").exists() and not (sandbox.home / "PWNED").exists()


def json_quote(value: str) -> str:
    """A YAML double-quoted scalar for `value` (JSON strings are YAML)."""
    return json.dumps(value, ensure_ascii=False)


@pytest.mark.parametrize("shell", SHELLS)
def test_a_secret_value_appears_only_in_the_step_environment(tmp_path, sandbox, shell):
    canary = "hf_CANARY_0123456789abcdef'\"$(touch PWNED)`id`"
    text = compile_text(tmp_path, run_file("podman", """\
trainer: {axolotl: {config: {base_model: x}}}
secrets: [HF_TOKEN, {name: WANDB_API_KEY, required: false}]
"""))
    assert "CANARY" not in text
    script = write_script(tmp_path, text)
    for args in ((), ("--dry-run",), ("--help",)):
        run = sandbox.run(script, *args, shell=shell, env=sandbox.env(HF_TOKEN=canary))
        assert run.returncode == 0, run.stderr
        assert "CANARY" not in run.stdout + run.stderr
    # (--fresh: the first run finished every step for these inputs.)
    traced = sandbox.run(script, "--fresh", shell=shell, env=sandbox.env(HF_TOKEN=canary))
    for record in run.records + traced.records:
        assert "CANARY" not in " ".join(record["argv"])
    assert [s["env"]["HF_TOKEN"] for s in traced.steps] == [canary, canary]
    assert all("WANDB_API_KEY" not in s["env"] for s in traced.steps)


@pytest.mark.parametrize("shell", SHELLS)
def test_preflight_reports_every_problem_by_name_and_exits_3(tmp_path, sandbox, shell):
    text = compile_text(tmp_path, run_file("docker", """\
steps: [{name: s, run: [record]}]
secrets: [HF_TOKEN, WANDB_API_KEY, {name: OPTIONAL, required: false}]
"""))
    (sandbox.bin / "docker").unlink()
    env = sandbox.env(WANDB_API_KEY="", PATH=sandbox.path_without_system_bins())
    run = sandbox.run(write_script(tmp_path, text), shell=shell, env=env)
    assert run.returncode == 3
    assert run.stderr.splitlines() == [
        "obc: preflight: secret HF_TOKEN is not set or empty",
        "obc: preflight: secret WANDB_API_KEY is not set or empty",
        "obc: preflight: docker not found on PATH",
    ]
    assert not (sandbox.home / "overbrainer").exists()


def test_a_container_left_by_an_earlier_run_in_the_run_dir_is_removed(tmp_path, sandbox):
    text = compile_text(tmp_path, run_file("podman", "steps: [{name: s, run: [record]}]\n"))
    run_dir = tmp_path / "run"
    leftover = sandbox.state / f"container-{container_name('t1', run_dir)}"
    leftover.write_text("999999999")
    run = sandbox.run(write_script(tmp_path, text), "--run-dir", str(run_dir))
    assert run.returncode == 0, run.stderr
    assert "removing container overbrainer-t1-" in run.stderr
    assert len(run.steps) == 1 and not leftover.exists()


@pytest.mark.parametrize("engine", ["docker", "podman", "native"])
def test_a_second_run_in_the_same_run_dir_exits_4_and_touches_nothing(tmp_path, sandbox,
                                                                      engine):
    text = compile_text(tmp_path, run_file(engine, """\
steps: [{name: s, run: [record, --sleep, "300"]}]
"""))
    script = write_script(tmp_path, text)
    run_dir = str(tmp_path / "run")
    first = start_script(script, "--run-dir", run_dir, shell="dash", env=sandbox.env())
    try:
        wait_until(lambda: len(sandbox.records()) >= (2 if engine != "native" else 1),
                   "the first run's step to start")
        second = sandbox.run(script, "--run-dir", run_dir)
        assert second.returncode == 4
        assert "is in use by another run of this job" in second.stderr
        assert " rm " not in second.stderr  # never a hint to remove a running container
        # Another run dir is another container: both run at once.
        other = sandbox.run(script, "--run-dir", str(tmp_path / "other"), "--dry-run")
        assert other.returncode == 0
    finally:
        first.terminate()
        first.communicate(timeout=60)
    assert first.returncode == 143


@pytest.mark.parametrize("shell", SHELLS)
def test_a_failed_step_stops_the_job_with_its_exit_code(tmp_path, sandbox, shell):
    text = compile_text(tmp_path, run_file("docker", """\
steps:
  - {name: first, run: [record, one]}
  - {name: second, run: [record, --exit, "7"]}
  - {name: third, run: [record, three]}
"""))
    run = sandbox.run(write_script(tmp_path, text), shell=shell)
    assert run.returncode == 7
    assert [s["argv"] for s in run.steps] == [["one"], ["--exit", "7"]]
    assert run.messages == [
        "obc: step 1/3 first: record one",
        "obc: step 1/3 first: done",
        "obc: step 2/3 second: record --exit 7",
        "obc: step 2/3 second failed with exit code 7",
    ]


def test_dry_run_prints_commands_that_paste_back_and_changes_nothing(tmp_path, sandbox):
    text = compile_text(tmp_path, run_file("docker", """\
steps: [{name: s, run: [record, "it's $(x)", "a b"]}]
env: {K: "v 'w'"}
"""))
    script = write_script(tmp_path, text)
    dry = sandbox.run(script, "--dry-run", "--run-dir", "rel dir")
    assert dry.returncode == 0, dry.stderr
    assert dry.records == [] and not (sandbox.home / "overbrainer").exists()
    real = sandbox.run(script, "--run-dir", str(tmp_path / "rel dir"))
    printed = [shlex.split(line) for line in dry.stdout.splitlines()
               if line.startswith("docker ")]
    expected = [r["argv"] for r in real.engine_runs]
    run_dir = str(tmp_path / "rel dir")
    assert [[w.replace(str(tmp_path), "X") for w in argv] for argv in printed] != []
    assert printed[0][printed[0].index("-v") + 1].endswith("/rel dir:/workspace/run")
    # The two runs differ only in the run dir, and so in the container's name.
    assert [a for a in printed[0] if "workspace/run" not in a and "overbrainer-" not in a] == \
        [a for a in expected[0] if "workspace/run" not in a and "overbrainer-" not in a]
    assert f"{run_dir}:/workspace/run" in expected[0]


def test_run_dir_and_cache_dir_options_override_the_compiled_paths(tmp_path, sandbox):
    text = compile_text(tmp_path, run_file("docker", """\
trainer: {axolotl: {config: {base_model: x}}}
"""))
    run = sandbox.run(write_script(tmp_path, text), "--run-dir", str(tmp_path / "r"),
                      "--cache-dir", str(tmp_path / "c"))
    assert run.returncode == 0, run.stderr
    (argv,) = [r["argv"] for r in run.engine_runs]
    assert f"{tmp_path}/r:/workspace/run" in argv and f"{tmp_path}/c:/workspace/hf-cache" in argv
    assert (tmp_path / "r" / "axolotl.yaml").is_file() and (tmp_path / "c").is_dir()


@pytest.mark.parametrize("args", [["--bogus"], ["--run-dir"], ["--only", "nope"],
                                  ["--from", "s", "--only", "s"]])
def test_bad_options_print_usage_and_exit_2(tmp_path, sandbox, args):
    text = compile_text(tmp_path, run_file("docker", "steps: [{name: s, run: [record]}]\n"))
    run = sandbox.run(write_script(tmp_path, text), *args)
    assert run.returncode == 2
    assert "usage: job.sh [--dry-run]" in run.stderr and run.records == []


def test_help_prints_the_summary_of_the_header(tmp_path, sandbox):
    text = compile_text(tmp_path, run_file("docker", """\
steps: [{name: s, run: [record, x]}]
"""))
    run = sandbox.run(write_script(tmp_path, text), "--help")
    assert run.returncode == 0
    summary = text.split("<<'OBC_EOF'\n", 1)[1].splitlines()  # the header's one copy
    header = [line[2:] for line in summary if line.startswith("# ")]
    assert run.stdout.splitlines()[:3] == header[:3]
    assert "steps       1. s: record x" in run.stdout
