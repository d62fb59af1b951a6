"""obc's runtime library (templates/lib/) tested as a library: its parts sourced as written,
their functions called directly, in every shell, with the job's variables set as a job's
part sets them."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from compiler.model.launcher import Launcher
from compiler.model.slurm import SLURM_ENDED_STATES
from tests.conftest import REPO, SHELLS

LIBRARY = REPO / "templates" / "lib"


# What the part main sets before any step runs, which obc_say (core) reads: no step's log.
NO_STEP_YET = "OBC_LOG=''\n"


def run_library(shell: str, parts: list[str], code: str, path: str | None = None) -> \
        subprocess.CompletedProcess[str]:
    """Source `parts` in `shell` (set -u, as a job runs), then run `code`."""
    sourced = "".join(f". {LIBRARY / part}.sh\n" for part in parts)
    env = {"PATH": path or os.environ["PATH"], "LANG": "C.UTF-8"}
    return subprocess.run([*SHELLS[shell], "-c", f"set -u\n{sourced}{code}"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("shell", SHELLS)
def test_retry_tries_again_only_for_its_exit_codes_and_up_to_its_maximum(shell, tmp_path):
    # A step that said nothing (no log): only the exit codes tell (the causes are
    # tests/script/test_retry_causes.py's).
    done = run_library(shell, ["core", "records", "retry"], NO_STEP_YET + f"""\
OBC_RETRY_EXIT_CODES='75 137' OBC_RETRY_MAX=2 OBC_RETRY_REQUEUES='' OBC_CAUSES=''
OBC_NUMBER=1 OBC_STEP_COUNT=1 OBC_NAME=train OBC_RUN_DIR='{tmp_path}' OBC_ATTEMPT=1
for OBC_STATUS in 7 1 137 75 75; do
  OBC_ANSWER=no
  ! obc_retry 2>/dev/null || OBC_ANSWER=yes
  printf '%s %s\\n' "$OBC_STATUS" "$OBC_ANSWER"
done
""")
    assert (done.returncode, done.stderr) == (0, "")
    # 7 is in no code's place (75 holds it only as a part); the third try is one too many.
    assert done.stdout == "7 no\n1 no\n137 yes\n75 yes\n75 no\n"


@pytest.mark.parametrize("shell", SHELLS)
def test_which_finds_a_program_as_a_started_process_would(shell, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "tool").write_text("not executable")
    (tmp_path / "b" / "tool").write_text("#!/bin/sh\n")
    (tmp_path / "b" / "tool").chmod(0o755)
    done = run_library(shell, ["core"], f"""\
obc_which tool {tmp_path}/a:{tmp_path}/b
obc_which missing {tmp_path}/a:{tmp_path}/b || printf 'not found\\n'
""")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"{tmp_path}/b/tool\nnot found\n"


@pytest.mark.parametrize("shell", SHELLS)
def test_absolute_path_drops_relative_and_empty_entries_and_says_so(shell):
    done = run_library(shell, ["core"],
                       NO_STEP_YET + 'obc_absolute_path\nprintf "%s\\n" "$PATH"\n',
                       path=f"bin::/usr/bin:.:{os.environ['PATH']}")
    assert done.returncode == 0
    assert done.stdout == f"/usr/bin:{os.environ['PATH']}\n"
    assert done.stderr == "obc: ignoring relative PATH entries: 'bin' '' '.'\n"


@pytest.fixture
def squeue(tmp_path) -> Path:
    """A squeue that answers with $OBC_TEST_ANSWER, and fails when it starts with `error`."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "squeue").write_text(
        '#!/bin/sh\ncase $OBC_TEST_ANSWER in error*) echo "$OBC_TEST_ANSWER" >&2; exit 1 ;; esac\n'
        'printf "%s\\n" "$OBC_TEST_ANSWER"\n')
    (folder / "squeue").chmod(0o755)
    return folder


@pytest.mark.parametrize("shell", SHELLS)
def test_a_slurm_job_has_ended_in_the_states_obc_status_knows(shell, squeue):
    answers = [*SLURM_ENDED_STATES, "RUNNING", "PENDING", "error: Invalid job id specified",
               "error: cannot reach slurmctld"]
    code = "".join(f"OBC_TEST_ANSWER='{answer}'; export OBC_TEST_ANSWER\n"
                   "if obc_slurm_job_ended 7; then echo ended; else echo running; fi\n"
                   for answer in answers)
    done = run_library(shell, ["records"], code, path=f"{squeue}:{os.environ['PATH']}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ended"] * len(SLURM_ENDED_STATES) + [
        "running", "running", "ended", "running"]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(("kind", "across"), [
    ("torchrun", "torchrun --nnodes 2 --nproc_per_node 4 --rdzv_backend c10d "
                 "--rdzv_endpoint n1:29500 --rdzv_id 7"),
    ("accelerate", "sh -c exec accelerate launch --machine_rank \"$NODE_RANK\" \"$@\" "
                   "accelerate --multi_gpu --num_machines 2 --num_processes 8 "
                   "--main_process_ip n1 --main_process_port 29500"),
])
def test_a_launch_across_nodes_takes_the_rendezvous_for_the_words_of_one_machine(
        shell, kind, across):
    launch = Launcher("train", kind, 4, "train.py", ("--lr", "1e-4"))
    done = run_library(shell, ["launcher"], f"""\
OBC_LAUNCHER={kind} OBC_NPROC_PER_NODE=4 OBC_LOCAL_WORDS={len(launch.local_words)}
NNODES=2 MASTER_ADDR=n1 MASTER_PORT=29500 SLURM_JOB_ID=7
obc_node_tasks() {{ printf '%s\\n' "$*"; }}
obc_launch_across_nodes obc_start {" ".join(launch.one_node)}
""")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"obc_start {across} train.py --lr 1e-4\n"


@pytest.mark.parametrize("shell", SHELLS)
def test_the_step_that_saves_on_term_or_a_nodes_part_of_it_gets_the_grace_more(shell):
    done = run_library(shell, ["core", "on_signal"], NO_STEP_YET + """\
OBC_GIVE_GRACE=train OBC_CHECKPOINT_GRACE=25
for OBC_CASE in train: export: export:.obc/tmp/failed; do
  OBC_NAME=${OBC_CASE%%:*} OBC_NODE_TASK=${OBC_CASE#*:} OBC_STOP_TIMEOUT=60
  obc_give_grace
  printf '%s %s\\n' "$OBC_NAME" "$OBC_STOP_TIMEOUT"
done
""")
    assert done.returncode == 0
    assert done.stdout == "train 85\nexport 60\nexport 85\n"
    assert done.stderr == "obc: train has the signal; it has 85 s to save a checkpoint and " \
        "end\n" * 2


@pytest.mark.parametrize("shell", SHELLS)
def test_a_stopped_step_is_waited_for_until_its_whole_group_has_ended(shell, tmp_path):
    """The step's first process ends at the TERM (as llamafactory-cli and trl sft do), and a
    process it started, in its group, saves only after that: the stop waits for it."""
    ready, saved = tmp_path / "ready", tmp_path / "saved"
    step = (f"(trap '' TERM; touch {ready}; while kill -0 $$ 2>/dev/null; do sleep 0.1; done; "
            f"sleep 1; touch {saved}) & exec sleep 300")
    done = run_library(shell, ["core", "stop_group"], f"""\
OBC_TERM_GROUP=1 OBC_STOP_TIMEOUT=30
setsid sh -c {shlex.quote(step)} &
OBC_CHILD=$!
while [ ! -e {ready} ]; do sleep 0.1; done
obc_stop_step
[ -e {saved} ] && echo saved
""")
    assert (done.returncode, done.stdout) == (0, "saved\n"), done.stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_on_every_node_gives_torchrun_the_rendezvous_where_the_job_says(shell):
    """TRL's train is torchrun itself (OBC_TORCHRUN_PROGRAM_STEP): the rendezvous goes right
    after its name; Axolotl's (OBC_TORCHRUN_STEP) gets torchrun as its launcher; another step
    is handed on as it is."""
    done = run_library(shell, ["slurm"], """\
obc_node_tasks() { printf '%s|' "$@"; printf '\\n'; }
NNODES=2 GPUS_PER_NODE=4 MASTER_ADDR=n1 MASTER_PORT=29500 SLURM_JOB_ID=7
OBC_TORCHRUN_STEP=axolotl-train OBC_TORCHRUN_PROGRAM_STEP=trl-train OBC_LAUNCHER_STEP=
OBC_NAME=trl-train obc_on_every_node run torchrun -m trl.scripts.sft --config trl.yaml
OBC_NAME=axolotl-train obc_on_every_node run axolotl train axolotl.yaml
OBC_NAME=merge obc_on_every_node run python3 -c 'merge'
""")
    assert (done.returncode, done.stderr) == (0, "")
    rendezvous = "--nnodes|2|--nproc_per_node|4|--rdzv_backend|c10d|--rdzv_endpoint|n1:29500|" \
        "--rdzv_id|7|"
    assert done.stdout.splitlines() == [
        f"run|torchrun|{rendezvous}-m|trl.scripts.sft|--config|trl.yaml|",
        f"run|axolotl|train|axolotl.yaml|--launcher|torchrun|--|{rendezvous}",
        "run|python3|-c|merge|"]


@pytest.mark.parametrize("shell", SHELLS)
def test_starting_over_names_the_trainers_own_resume_field(shell):
    done = run_library(shell, ["core", "records", "resume_never"], NO_STEP_YET + """\
OBC_RESUME_FIELD=trainer.trl.resume OBC_DRY_RUN=1
OBC_NUMBER=1 OBC_STEP_COUNT=2 OBC_NAME=train
obc_resume
""")
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr.endswith(" step 1/2 train: starts over (trainer.trl.resume: never)\n")
