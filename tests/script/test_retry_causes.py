"""Retry by cause (docs/retry.md): the library's part causes is compiler/model/causes.py's
table as written by tools.release_library, obc_cause reads it in every shell, and a real job
does not retry an out-of-memory failure but retries a lost node's, saying which log line
told."""

from __future__ import annotations

import pytest

from compiler.model.causes import CAUSES, CGROUP_OOM_KILL, causes_text
from compiler.render.library import job_part
from tests.conftest import SHELLS, compile_text, write_script
from tests.script.test_library_functions import LIBRARY, NO_STEP_YET, run_library
from tools.release_library import causes_part

# Every cause with an example log line, and one that only an exit code tells.
BY_LOG = [cause for cause in CAUSES if cause.example]
BY_CODE = [cause for cause in CAUSES if not cause.log]


def classify(shell: str, tmp_path, log: bytes, status: int, *, try_line: int = 1,
             evidence: bool = False) -> str:
    """What obc_cause makes of a step `train` that exited with `status` and wrote `log`:
    `ACTION|WHERE|CAUSE`."""
    logs = tmp_path / ".obc" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "train.1.log").write_bytes(log)
    # The cgroup's count of OOM kills, as obc_oom_kills would print it before and after.
    oom = "obc_oom_kills() { echo 1; }\nOBC_OOM_KILLS=0\n" if evidence else ""
    done = run_library(shell, ["core", "records", "causes", "retry"], NO_STEP_YET + f"""\
OBC_RUN_DIR='{tmp_path}' OBC_NAME=train OBC_ATTEMPT=1 OBC_STATUS={status} OBC_TRY_LINE={try_line}
{oom}obc_cause
printf '%s|%s|%s\\n' "$OBC_ACTION" "$OBC_WHERE" "$OBC_CAUSE"
""")
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout.rstrip("\n")


def test_the_part_causes_is_the_table_written_by_release_library():
    # One home, compiler/model/causes.py: the part is never changed by hand.
    assert (LIBRARY / "causes.sh").read_text() == causes_part(), \
        "run: PYTHONPATH=$PWD python3 -m tools.release_library"


def test_the_part_retry_says_the_cgroups_oom_kill_as_the_table_has_it():
    assert f"OBC_EVIDENCE='{CGROUP_OOM_KILL}'" in (LIBRARY / "retry.sh").read_text()


def test_each_cause_is_one_line_of_four_fields():
    assert all("|" not in cause.name + cause.action and "\n" not in cause.log
               for cause in CAUSES)
    assert causes_text().count("\n") == len(CAUSES) - 1


@pytest.mark.parametrize("shell", SHELLS)
def test_each_cause_is_told_by_its_log_line_or_its_exit_code(shell, tmp_path):
    noise = b"step 1/10 loss 2.3\n\xff\x00 not UTF-8\n"
    for cause in BY_LOG:
        status = cause.exit_codes[0] if cause.exit_codes else 1
        assert classify(shell, tmp_path, noise + cause.example.encode() + b"\nTraceback\n",
                        status) == f"{cause.action}|log line 3|{cause.name}", cause.name
    for cause in BY_CODE:
        status = cause.exit_codes[0]
        assert classify(shell, tmp_path, noise, status) == \
            f"{cause.action}|exit code {status}|{cause.name}"
    # No cause: neither action nor where.
    assert classify(shell, tmp_path, noise, 1) == "||"


@pytest.mark.parametrize("shell", SHELLS)
def test_a_user_error_wins_and_only_this_try_counts(shell, tmp_path):
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    nccl = "[rank1]: torch.distributed.DistBackendError: NCCL error in: x, ncclSystemError\n"
    # The ranks an out-of-memory rank leaves behind fail with NCCL's errors: still a stop.
    assert classify(shell, tmp_path, (nccl + oom).encode(), 1) == \
        "stop|log line 2|out of memory"
    # The try that began at line 3 said only NCCL's error: the earlier OOM is another try's.
    assert classify(shell, tmp_path, (oom + "x\n" + nccl).encode(), 1, try_line=3) == \
        "retry|log line 3|a network or NCCL error"
    # 137 with nothing that says the OOM killer: no cause; with the cgroup's count, a stop.
    assert classify(shell, tmp_path, b"Killed\n", 137) == "||"
    assert classify(shell, tmp_path, b"Killed\n", 137, evidence=True) == \
        "stop|memory.events of its cgroup|killed by the OOM killer"


STEP = """\
set -e
n=$(cat tries 2>/dev/null || echo 0); echo $((n + 1)) > tries
echo "step 1/10 loss 2.3" >&2
[ "$n" -gt 0 ] && exit 0
echo "$1" >&2
exit 1
"""


@pytest.mark.parametrize(("line", "retried"), [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", False),
    ("srun: error: Node failure on n2", True),
])
def test_a_real_job_retries_a_lost_node_but_not_out_of_memory(tmp_path, sandbox, line, retried):
    (tmp_path / "train.sh").write_text(STEP)
    text = compile_text(tmp_path, f"""\
version: 1
id: rc
runtime: {{kind: native}}
steps: [{{name: train, run: [sh, train.sh, '{line}']}}]
files: {{train.sh: train.sh}}
retry: {{max: 2}}
""")
    # The table is the library's part causes, not the job's: its job part stays short.
    assert "OBC_CAUSES" not in job_part(text)
    assert text.count(causes_part()) == 1
    run = sandbox.run(write_script(tmp_path, text))
    said = [message for message in run.messages if "train" in message]
    if retried:
        assert run.returncode == 0, run.stderr
        assert "obc: step 1/1 train: exited with 1: a lost node (log line 2); trying again " \
               "(1 of 2)" in said
    else:
        assert run.returncode == 1
        assert said[-2:] == ["obc: train failed: out of memory (log line 2), not retried",
                             "obc: step 1/1 train failed with exit code 1"]
