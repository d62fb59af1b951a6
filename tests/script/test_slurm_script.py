"""The `slurm` block without a cluster: validation, the #SBATCH lines, the script outside
Slurm, and the multi-node launch and requeue logic under every shell, with stub srun and
scontrol (tests/slurm/test_slurm.py proves the same on a real cluster)."""

from __future__ import annotations

import json

import pytest

from compiler.pipeline.pipeline import compile_files
from tests.conftest import SHELLS, allow_sbatch, compile_text, container_name, write_script

# srun as the tests need it: runs the command after its options once per node, in turn,
# with the SLURM_NODEID srun gives each task, and records its own options.
FAKE_SRUN = """\
#!/bin/sh
while [ "$#" -gt 0 ]; do
  case $1 in
    --*) printf '%s\\n' "$1" >> "$OBC_STUB_STATE/srun-options"; shift ;;
    *) break ;;
  esac
done
node=0
while [ "$node" -lt "$SLURM_JOB_NUM_NODES" ]; do
  SLURM_NODEID=$node "$@" || exit
  node=$((node + 1))
done
"""
FAKE_SCONTROL = """\
#!/bin/sh
[ "$1 $2 $3" = "show hostnames node-[a-b]" ] || exit 1
printf 'node-a\\nnode-b\\n'
"""
SLURM_ENV = {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "node-[a-b]",
             "SLURM_JOB_NUM_NODES": "2"}


def diagnostics(tmp_path, text: str) -> list[str]:
    run_file = tmp_path / "run.yaml"
    run_file.write_text(text)
    result = compile_files([run_file], out=tmp_path / "out")
    return [f"{d.line}:{d.column} {d.field}: {d.message}" for d in result.diagnostics]


def test_values_slurm_would_misread_are_errors_at_their_place(tmp_path):
    found = diagnostics(tmp_path, """\
version: 1
id: bad
runtime: {kind: native, gpus: [0]}
steps: [{name: s, run: [record]}]
env: {NNODES: "3"}
slurm:
  partition: $PART
  account: my account
  time: "1 day"
  mem: 10GB
  output: ~/logs/%j.out
  job_name: "a'b"
  nodes: 2
  gpus_per_node: 1
  extra: [--nodes=3, --export=ALL, "--mail-user=$USER", --exclusive, -N2]
""")
    words = "Slurm reads #SBATCH values as written: no spaces, no quotes, no $VARIABLES"
    extra = ("write a long option such as --hold or --mail-type=END, without '#' (sbatch "
             f"ends a value at '#'); {words}")
    assert found == [
        "3:25 runtime.gpus: Slurm picks the GPUs when slurm.gpus_per_node is set; leave "
        "runtime.gpus at all (the default)",
        "5:7 env.NNODES: 'NNODES' cannot be set by a run file: a job on several nodes sets "
        "it for every step",
        f"7:14 slurm.partition: '$PART': a partition name is letters, digits, '_', '.' or "
        f"'-', several separated by ','; {words}",
        f"8:12 slurm.account: 'my account': an account name is letters, digits, '_', '.' or "
        f"'-'; {words}",
        f"9:9 slurm.time: '1 day': write a time such as 90 (minutes), \"04:00:00\" or "
        f"\"2-00:00:00\"; {words}",
        f"10:8 slurm.mem: '10GB': write a size such as 200G, 512M or 0 (all the node's "
        f"memory); {words}",
        f"11:11 slurm.output: '~/logs/%j.out': an output path has no spaces, quotes, '\\\\' or "
        f"'#' (sbatch ends a value at '#'), and no '~' at the start (Slurm does not expand it: "
        f"write the absolute path); {words}",
        f"12:13 slurm.job_name: \"a'b\": a job name is letters, digits, '_', '.' or '-'; {words}",
        "15:11 slurm.extra[0]: --nodes is set by slurm.nodes; use that field",
        "15:22 slurm.extra[1]: --export cannot be given: the job needs the submitter's "
        "environment, secrets included, by name; put values in env: instead",
        f"15:36 slurm.extra[2]: '--mail-user=$USER': {extra}",
        f"15:70 slurm.extra[4]: '-N2': {extra}",
    ]


def test_several_nodes_need_gpus_per_node(tmp_path):
    assert diagnostics(tmp_path, """\
version: 1
id: bad
runtime: {kind: native}
steps: [{name: s, run: [record]}]
slurm: {nodes: 2}
""") == ["5:9 slurm.nodes: a job on several nodes needs gpus_per_node: each node starts that "
         "many training processes"]


def test_directives_come_right_after_the_header_in_a_fixed_order(tmp_path):
    allow_sbatch(tmp_path, "exclusive")
    text = compile_text(tmp_path, """\
version: 1
id: sb
runtime: {kind: docker}
steps: [{name: s, run: [record]}]
slurm:
  extra: [--exclusive, "--mail-type=END,FAIL"]
  signal: B:USR1@300
  constraint: a100|h100
  mem: 200G
  cpus_per_task: 16
  gpus_per_node: 4
  nodes: 1
  time: 90
  qos: high
  account: ml
  partition: gpu,gpu2
  output: /logs/%x-%j.out
  job_name: sb-run
  requeue: true
""")
    lines = text.splitlines()
    first_command = next(i for i, line in enumerate(lines) if line and line[0] != "#")
    assert [line for line in lines[:first_command] if line.startswith("#SBATCH")] == [
        "#SBATCH --job-name=sb-run", "#SBATCH --output=/logs/%x-%j.out",
        "#SBATCH --partition=gpu,gpu2", "#SBATCH --account=ml", "#SBATCH --qos=high",
        "#SBATCH --time=90", "#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gpus-per-node=4", "#SBATCH --cpus-per-task=16", "#SBATCH --mem=200G",
        "#SBATCH --constraint=a100|h100", "#SBATCH --signal=B:USR1@300", "#SBATCH --requeue",
        "#SBATCH --open-mode=append", "#SBATCH --exclusive", "#SBATCH --mail-type=END,FAIL",
    ]
    assert "DO NOT EDIT.\n#SBATCH --job-name=sb-run\n" in text  # right after line 2
    assert "    -e CUDA_VISIBLE_DEVICES \\\n" in text  # the GPUs Slurm picked, by name


def test_defaults_name_the_job_by_its_id_and_leave_the_trap_two_minutes(tmp_path):
    text = compile_text(tmp_path, """\
version: 1
id: plain
runtime: {kind: native}
steps: [{name: s, run: [record]}]
slurm: {}
""")
    assert [line for line in text.splitlines() if line.startswith("#SBATCH")] == [
        "#SBATCH --job-name=plain", "#SBATCH --output=%x-%j.out", "#SBATCH --nodes=1",
        "#SBATCH --ntasks-per-node=1", "#SBATCH --signal=B:TERM@120", "#SBATCH --no-requeue",
    ]


@pytest.mark.parametrize(("slurm", "gpus"), [
    # Issue 20: a CPU-only job gets no GPUs from Slurm, whatever runtime.gpus says.
    ("{}", "none: no #SBATCH line asks Slurm for GPUs"),
    ("{gpus_per_node: 2, nodes: 2}", "2 GPUs × 2 nodes, given by Slurm"),
    ("{gpus_per_node: 1}", "1 GPU × 1 node, given by Slurm"),
])
def test_the_header_states_the_gpus_slurm_gives(tmp_path, slurm, gpus):
    text = compile_text(tmp_path, f"""\
version: 1
id: g
runtime: {{kind: native}}
steps: [{{name: s, run: [record]}}]
slurm: {slurm}
""")
    assert f"# gpus        {gpus}\n" in text
    assert "# gpus        all" not in text


MULTI_NODE = """\
version: 1
id: mn
runtime: {kind: native}
trainer:
  axolotl: {config: {base_model: x}, preprocess: true, merge: true}
secrets: [HF_TOKEN]
"""


def test_outside_slurm_the_script_runs_as_it_would_without_the_block(tmp_path, sandbox):
    runs = []
    for slurm in ("", "slurm: {nodes: 2, gpus_per_node: 8, requeue: true}\n"):
        folder = tmp_path / str(len(runs))
        folder.mkdir()
        script = write_script(folder, compile_text(folder, MULTI_NODE + slurm))
        (sandbox.state / "log.jsonl").unlink(missing_ok=True)
        # --fresh: the first run finished every step for the same training inputs.
        run = sandbox.run(script, "--fresh", env=sandbox.env(HF_TOKEN="t"))
        assert run.returncode == 0, run.stderr
        runs.append([(s["argv"], s["cwd"], s["env"]) for s in run.steps])
    assert runs[0] == runs[1]
    assert not (sandbox.home / "overbrainer/runs/mn/.obc/job.sh").exists()


@pytest.mark.parametrize("shell", list(SHELLS))
def test_under_slurm_training_runs_on_every_node_and_the_rest_once(tmp_path, sandbox, shell):
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (sandbox.bin / name).write_text(text)
        (sandbox.bin / name).chmod(0o755)
    script = write_script(tmp_path, compile_text(
        tmp_path, MULTI_NODE + "slurm: {nodes: 2, gpus_per_node: 8}\n"))
    run = sandbox.run(script, shell=shell, env=sandbox.env(HF_TOKEN="t", **SLURM_ENV,
                                                           SLURM_CPUS_PER_TASK="16"))
    assert run.returncode == 0, run.stderr
    torchrun = ["--launcher", "torchrun", "--", "--nnodes", "2", "--nproc_per_node", "8",
                "--rdzv_backend", "c10d", "--rdzv_endpoint", "node-a:29500", "--rdzv_id", "42"]
    assert [(s["argv"], s["env"].get("NODE_RANK")) for s in run.steps] == [
        (["preprocess", "axolotl.yaml"], "0"),
        (["train", "axolotl.yaml", *torchrun], "0"),
        (["train", "axolotl.yaml", *torchrun], "1"),
        (["merge-lora", "axolotl.yaml"], "0"),
    ]
    for step in run.steps:
        assert (step["env"]["MASTER_ADDR"], step["env"]["MASTER_PORT"]) == ("node-a", "29500")
        assert (step["env"]["NNODES"], step["env"]["GPUS_PER_NODE"]) == ("2", "8")
        assert step["env"]["HF_TOKEN"] == "t"
    assert (sandbox.state / "srun-options").read_text().split() == [
        "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--cpus-per-task=16",
        "--kill-on-bad-exit=1", "--export=ALL"]
    assert "t\n" not in run.stderr and "HF_TOKEN=" not in run.stderr


def test_under_slurm_a_job_on_several_nodes_needs_sha256sum_to_check_their_copy(
        tmp_path, sandbox):
    script = write_script(tmp_path, compile_text(tmp_path, """\
version: 1
id: sums
runtime: {kind: native}
steps: [{name: train, run: [record], nodes: all}]
slurm: {nodes: 2, gpus_per_node: 8}
"""))
    path = sandbox.path_without_system_bins()
    (sandbox.root / "tools/sha256sum").unlink()
    run = sandbox.run(script, env=sandbox.env(**SLURM_ENV, PATH=path))
    assert run.returncode == 3, run.stderr
    assert run.messages == ["obc: preflight: sha256sum (coreutils) not found on PATH"]


@pytest.mark.parametrize("shell", list(SHELLS))
def test_a_requeued_job_skips_only_what_finished_for_these_inputs(tmp_path, sandbox, shell):
    script = write_script(tmp_path, compile_text(tmp_path, """\
version: 1
id: rq
runtime: {kind: native}
steps:
  - {name: a, run: [record, a]}
  - {name: b, run: [record, b]}
  - {name: c, run: [record, c]}
slurm: {requeue: true}
"""))
    env = sandbox.env(SLURM_JOB_ID="42")
    assert sandbox.run(script, shell=shell, env=env).returncode == 0
    done = sandbox.home / "overbrainer/runs/rq/.obc/done"
    inputs = (done / "a").read_text()
    assert inputs.startswith("sha256:")
    (done / "b").write_text("sha256:other\n")  # b finished for other inputs: it runs again
    (done / "c").unlink()  # as if the job had been requeued while c ran
    (sandbox.state / "log.jsonl").unlink()
    run = sandbox.run(script, shell=shell, env=sandbox.env(SLURM_JOB_ID="42",
                                                           SLURM_RESTART_COUNT="1"))
    assert run.returncode == 0, run.stderr
    assert [s["argv"] for s in run.steps] == [["b"], ["c"]]
    assert "obc: step 1/3 a: finished before for these inputs, skipped" in run.messages
    assert {p.name: p.read_text() for p in done.iterdir()} == dict.fromkeys("abc", inputs)


def test_containers_get_the_rendezvous_and_the_gpus_by_name(tmp_path, sandbox):
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (sandbox.bin / name).write_text(text)
        (sandbox.bin / name).chmod(0o755)
    script = write_script(tmp_path, compile_text(tmp_path, """\
version: 1
id: mc
runtime: {kind: docker}
steps: [{name: everywhere, run: [record], nodes: all}]
secrets: [HF_TOKEN]
slurm: {nodes: 2, gpus_per_node: 4}
"""))
    env = sandbox.env(HF_TOKEN="t", CUDA_VISIBLE_DEVICES="0,1,2,3", **SLURM_ENV)
    run = sandbox.run(script, env=env)
    assert run.returncode == 0, run.stderr
    names = ("MASTER_ADDR", "MASTER_PORT", "NNODES", "NODE_RANK", "GPUS_PER_NODE",
             "CUDA_VISIBLE_DEVICES", "HF_TOKEN")
    assert [{name: r["container_env"].get(name) for name in names} for r in run.engine_runs] == [
        dict(zip(names, ("node-a", "29500", "2", rank, "4", "0,1,2,3", "t"), strict=True))
        for rank in ("0", "1")]
    name = container_name("mc", sandbox.home / "overbrainer/runs/mc")
    for node, engine_run in enumerate(run.engine_runs):
        argv = engine_run["argv"]
        assert "HF_TOKEN=t" not in argv and argv[argv.index("NODE_RANK") - 1] == "-e"
        # Each node's container has a name of its own, on the hosts' network.
        assert argv[argv.index("--name") + 1] == f"{name}-{node}"
        assert "--network=host" in argv


# scontrol as Slurm answers a job that requeues itself: the requeue stops the job at once
# with TERM (to its script, the stub's parent, here), and shows no excluded nodes yet.
REQUEUING_SCONTROL = """\
#!/bin/sh
printf '%s\\n' "$*" >> "$OBC_STUB_STATE/scontrol"
case $1 in
  requeue) kill -TERM "$PPID" ;;
  show) echo "JobId=42 JobName=j ExcNodeList=(null) NodeList=n1" ;;
esac
"""
# What each way a job requeues itself makes of its first try.
REQUEUED_BY = {
    "retry": ("runtime: {kind: native}\nsteps: [{name: flaky, run: [sh, -c, 'exit 75']}]\n"
              "retry: {on_exit_codes: [75], max: 2}\nslurm: {}\n",
              "obc: step flaky exited with 75: requeued (restart 1 of 2)", "flaky"),
    "health": ("runtime: {kind: native, gpus: [0]}\nsteps: [{name: s, run: [record]}]\n"
               "health: {on_failure: requeue}\nslurm: {max_restarts: 2}\n",
               "obc: the health check failed on n1: requeued (restart 1 of 2)", None),
}


@pytest.fixture(scope="module")
def requeuing_jobs(tmp_path_factory) -> dict:
    """The job of each way of REQUEUED_BY, compiled once for every shell."""
    return {way: write_script(folder, compile_text(folder, "version: 1\nid: rq\n" + text))
            for way, (text, _, _) in REQUEUED_BY.items()
            for folder in [tmp_path_factory.mktemp(way)]}


@pytest.mark.parametrize("way", REQUEUED_BY)
@pytest.mark.parametrize("shell", list(SHELLS))
def test_a_job_that_requeues_itself_is_not_cut_short_by_slurms_term(requeuing_jobs, sandbox,
                                                                    shell, way):
    # Slurm sends TERM as soon as it has the requeue: the job says and records that it was
    # requeued, and exits 0, rather than being stopped midway.
    _, said, step = REQUEUED_BY[way]
    (sandbox.bin / "scontrol").write_text(REQUEUING_SCONTROL)
    (sandbox.bin / "scontrol").chmod(0o755)
    (sandbox.bin / "nvidia-smi").write_text("#!/bin/sh\n")  # a node that shows no GPU
    (sandbox.bin / "nvidia-smi").chmod(0o755)
    run = sandbox.run(requeuing_jobs[way], shell=shell,
                      env=sandbox.env(SLURM_JOB_ID="42", SLURMD_NODENAME="n1"))
    assert (run.returncode, run.messages[-1]) == (0, said), run.stderr
    assert not any("TERM received" in line for line in run.messages)
    assert (sandbox.state / "scontrol").read_text().splitlines()[0] == "requeue 42"
    status = json.loads((sandbox.home / "overbrainer/runs/rq/.obc/status.json").read_text())
    assert (status["state"], status["step"], status["exit_code"]) == ("requeued", step, None)
