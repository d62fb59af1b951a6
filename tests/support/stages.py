"""Helpers for the tests of a job's stages (docs/stages.md): compile a run file into OUT as
`obc compile` does, and on the real cluster submit its stages with submit.sh as a user
would, read their dependencies and release them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from compiler.pipeline.changes import changes_to
from compiler.pipeline.pipeline import compile_files
from compiler.pipeline.write import apply
from tests.support.axolotl import clean_env


def pipeline(eval_run: str) -> str:
    """A run file of three stages on Slurm: preprocess without GPUs, then train (an Axolotl
    job's), then its own step eval, which runs `eval_run` (a YAML flow list)."""
    return f"""\
version: 1
id: pipe
runtime: {{kind: native}}
trainer: {{axolotl: {{config: {{base_model: m}}, preprocess: true}}}}
steps: [{{name: eval, run: {eval_run}}}]
slurm:
  time: 30
  gpus_per_node: 1
  stages:
    preprocess: {{gpus_per_node: 0}}
    eval: {{time: 20}}
"""


def compile_out(root: Path, text: str) -> Path:
    """Compile the run file `text` (as root/run.yaml) into root/out; return OUT."""
    (root / "run.yaml").write_text(text)
    result = compile_files([root / "run.yaml"], out=root / "out")
    assert not result.diagnostics, [d.text() for d in result.diagnostics]
    apply(changes_to(root / "out", result.outputs))
    return root / "out"


def submit_stages(slurm, root: Path, job: str, **env: str) -> dict[str, str]:
    """Run root/out/JOB/submit.sh from root with a clean environment (HOME root/home, and
    `env`); return each stage's Slurm job id, in order, as it printed them."""
    home = root / "home"
    home.mkdir(exist_ok=True)
    submitted = subprocess.run(["sh", f"out/{job}/submit.sh"], cwd=root,
                               env={**clean_env(home, **env), **slurm.env},
                               capture_output=True, text=True, timeout=120, check=False)
    assert (submitted.returncode, submitted.stderr) == (0, ""), submitted
    return dict(line.split(" ") for line in submitted.stdout.splitlines())


def dependencies(slurm, ids: dict[str, str]) -> dict[str, str]:
    """What `scontrol show job` says each stage's job depends on."""
    return {stage: slurm.show(job_id).fields["Dependency"] for stage, job_id in ids.items()}


def each_after_the_one_before(ids: dict[str, str]) -> dict[str, str]:
    """What `dependencies` says of stages each submitted after the one before it, while none
    has run: the first depends on nothing."""
    before = [None, *ids.values()]
    return {stage: "(null)" if previous is None else f"afterok:{previous}(unfulfilled)"
            for (stage, previous) in zip(ids, before, strict=False)}


def release(slurm, ids: dict[str, str]) -> None:
    """Release the stages, submitted held (slurm.extra --hold)."""
    released = slurm.run("scontrol", "release", ",".join(ids.values()))
    assert released.returncode == 0, released.stderr
