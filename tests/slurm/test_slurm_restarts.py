"""A job that requeues itself on the real Slurm cluster: at the time limit (its signal, as
`scancel --batch --signal` sends it) up to slurm.max_restarts times, then exit 5; and to
retry a step that failed with a listed exit code, telling notify's command. Requeued, it skips
what it finished."""

from __future__ import annotations

import json

import pytest

from tests.conftest import untimed
from tests.slurm.test_slurm import output, submit

pytestmark = pytest.mark.slow

LONG = """\
version: 1
id: {id}
runtime: {{kind: native, stop_timeout: 5}}
steps:
  - {{name: first, run: [record, first]}}
  - {{name: long, run: [record, --sleep, "300"]}}
slurm: {{time: 10, max_restarts: 1}}
"""


def running_steps(sandbox, count: int):
    return lambda: len([r for r in sandbox.records() if "--sleep" in r["argv"]]) == count


def test_at_the_time_limit_the_job_requeues_itself_then_gives_up_with_exit_5(
        slurm, sandbox, tmp_path):
    job_id = submit(slurm, sandbox, tmp_path, LONG.format(id="restarts"))
    slurm.wait_for(running_steps(sandbox, 1), 60, "the long step to start")
    # What Slurm sends before the time limit: the run file's signal (B:USR1@120).
    assert slurm.run("scancel", "--batch", "--signal=USR1", job_id).returncode == 0
    slurm.start_requeued(job_id)
    slurm.wait_for(running_steps(sandbox, 2), 60, "the long step to start again")
    assert slurm.run("scancel", "--batch", "--signal=USR1", job_id).returncode == 0
    job = slurm.wait(job_id)
    log = output(tmp_path, "restarts", job_id)
    assert (job.state, job.exit_code, job.fields["Restarts"]) == ("FAILED", 5, "1"), log
    assert "obc: the time limit is near: requeued (restart 1 of 1)" in log
    assert "obc: the time limit is near, and the job has been restarted 1 times " \
           "(slurm.max_restarts): giving up" in log
    # The second attempt skipped the step the first had finished.
    assert [r["argv"][0] for r in sandbox.records()] == ["first", "--sleep", "--sleep"]
    assert "obc: step 1/2 first: finished before for these inputs, skipped" in untimed(log)
    status = json.loads(
        (sandbox.home / "overbrainer/runs/restarts/.obc/status.json").read_text())
    assert (status["attempt"], status["state"], status["exit_code"], status["slurm_restarts"]) \
        == (2, "failed", 5, 1)


def test_a_step_that_fails_with_a_listed_code_is_retried_by_requeueing(slurm, sandbox,
                                                                        tmp_path):
    job_id = submit(slurm, sandbox, tmp_path, """\
version: 1
id: retried
runtime: {kind: native}
steps:
  - {name: first, run: [record, first]}
  - {name: flaky, run: [sh, -c, 'record flaky; [ -e tried ] || { : > tried; exit 75; }']}
retry: {on_exit_codes: [75], max: 1}
slurm: {time: 10}
notify:
  on: [requeued, done]
  command: [sh, -c, 'cat > "$OBC_RUN_DIR/$OBC_EVENT.$OBC_ATTEMPT.json"']
""")
    slurm.start_requeued(job_id)
    job = slurm.wait(job_id)
    log = output(tmp_path, "retried", job_id)
    assert (job.state, job.exit_code, job.fields["Restarts"]) == ("COMPLETED", 0, "1"), log
    assert "obc: step flaky exited with 75: requeued (restart 1 of 1)" in log
    # Slurm sent the first attempt TERM as soon as it had the requeue: ignored, not obeyed.
    assert "obc: TERM received, stopping" not in log
    assert [r["argv"] for r in sandbox.records()] == [["first"], ["flaky"], ["flaky"]]
    # notify's command heard both attempts' ends (docs/notify.md), with Slurm's job id.
    run_dir = sandbox.home / "overbrainer/runs/retried"
    requeued = json.loads((run_dir / "requeued.1.json").read_text())
    assert (requeued["step"], requeued["slurm_job_id"], requeued["exit_code"]) == \
        ("flaky", job_id, None)
    assert json.loads((run_dir / "done.2.json").read_text())["exit_code"] == 0
