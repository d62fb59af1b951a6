"""The image that runs is the image that is billed, proven on the real podman and docker:
no form of `runtime.extra_args` takes the image's place.

Two images share the test image's files and differ in one variable of their config,
OBC_IMAGE: `pinned` (the run file's image) and `attacker` (the step's first word). Each step
writes the OBC_IMAGE it sees, so the run dir says which image the container was made from.
In the pinned image the step's first word, the attacker's image name, is a program in the
run dir that writes it too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess

import pytest

from compiler.pipeline.build import build_jobs
from compiler.pipeline.pipeline import compile_files
from compiler.render.render import render_job
from tests.conftest import container_name, write_script
from tests.engines.test_engines import engine_env, job_id
from tests.support.engines import Engine

REPORT = 'echo "$OBC_IMAGE" > ran.txt'


@pytest.fixture(scope="session")
def images(test_image_tar: tuple[str, bytes], podman: Engine, docker: Engine):
    """The pinned and the attacker's image in each engine, named after their content."""
    tag = hashlib.sha256(test_image_tar[1]).hexdigest()[:12]
    for engine in (podman, docker):
        for role in ("pinned", "attacker"):
            name = f"localhost/obc-{role}:{tag}"
            if engine("image", "inspect", name, check=False).returncode != 0:
                subprocess.run([engine.name, "import", "--change", f"ENV OBC_IMAGE={role}", "-",
                                name], input=test_image_tar[1], env={**os.environ, **engine.env},
                               capture_output=True, timeout=120, check=True)
    return f"localhost/obc-pinned:{tag}", f"localhost/obc-attacker:{tag}"


def run_text(engine: Engine, job: str, root, images, extra_args: list[str]) -> str:
    pinned, attacker = images
    return f"""\
version: 1
id: {job}
runtime:
  kind: {engine.name}
  image: "{pinned}"
  gpus: none
  extra_args: {json.dumps(["--network=none", *extra_args])}
paths: {{run_dir: "{root / 'run'}", cache_dir: "{root / 'cache'}"}}
steps: [{{name: eval, run: ["{attacker}", sh, -c, '{REPORT}']}}]
"""


def image_that_ran(sandbox, engine: Engine, script, root, attacker: str) -> str | None:
    """Run `script`; return the OBC_IMAGE of the container its step ran in, None when the
    engine refused the options (exit 125) and started none."""
    program = root / "run" / attacker
    program.parent.mkdir(parents=True)
    program.write_text(f"#!/bin/sh\n{REPORT}\n")
    program.chmod(0o755)
    run = sandbox.run(script, env=engine_env(sandbox, engine))
    ran = root / "run" / "ran.txt"
    assert run.returncode == (0 if ran.exists() else 125), run.stderr
    return ran.read_text().strip() if ran.exists() else None


# Every form of an engine option the review tried, and those it did not (after the
# --network=none that the test engines need).
FORMS = [
    ["--label"], ["-l"], ["--label="], ["-l="], ["--label", "x"], ["-tl"], ["-tl=x"],
    ["-tlx"], ["--future-opt"], ["--future-opt", "--label=x"], ["--"], ["-"], ["x"],
    ["--label", "--label"], ["--label=x", "--label"], ["-iq"], ["--rm", "-l"], ["---label"],
    ["--=x"], ["-l", "--"], ["--tty=false"], ["--pull"], ["-ql"], ["--label\nx"],
]


# Forms obc passes on that both engines run (podman refuses an empty label or '=').
RUN = [["-tl=x"], ["-tlx"], ["-iq"], ["--tty=false"]]


@pytest.mark.parametrize("engine_name", ["podman", "docker"])
@pytest.mark.parametrize("extra_args", FORMS, ids=repr)
def test_no_engine_option_takes_the_images_place(extra_args, engine_name, request, images,
                                                  sandbox, tmp_path, cleanup):
    engine = request.getfixturevalue(engine_name)
    job = job_id()
    cleanup.append((engine, container_name(job, tmp_path / "run")))
    (tmp_path / "run.yaml").write_text(run_text(engine, job, tmp_path, images, extra_args))

    result = compile_files([tmp_path / "run.yaml"], out=tmp_path / "out")

    if result.diagnostics:
        places = {d.field for d in result.diagnostics}
        assert places <= {f"runtime.extra_args[{i + 1}]" for i in range(len(extra_args))}, places
        return
    (script,) = result.scripts
    ran = image_that_ran(sandbox, engine, write_script(tmp_path, script.text), tmp_path,
                         images[1])
    assert ran != "attacker"
    assert ran == "pinned" or extra_args not in RUN


@pytest.mark.parametrize("engine_name", ["podman", "docker"])
def test_the_end_of_options_marker_alone_keeps_the_image(engine_name, request, images,
                                                          sandbox, tmp_path, cleanup):
    # A second wall: were an option to slip past the table, `--` before the image still
    # ends the options, and `--label` takes the marker as its value, not the image.
    engine = request.getfixturevalue(engine_name)
    job = job_id()
    cleanup.append((engine, container_name(job, tmp_path / "run")))
    (tmp_path / "run.yaml").write_text(run_text(engine, job, tmp_path, images, []))
    ((_, built),) = build_jobs(tmp_path / "run.yaml", {}).jobs
    with_label = (*built.runtime.extra_args, "--label")
    job_with_label = dataclasses.replace(
        built, runtime=dataclasses.replace(built.runtime, extra_args=with_label))

    script = write_script(tmp_path, render_job(job_with_label))

    assert image_that_ran(sandbox, engine, script, tmp_path, images[1]) == "pinned"
