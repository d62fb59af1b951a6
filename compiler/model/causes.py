"""Why a step failed, as its exit code and its log say, and whether another try can help: the
one table of the causes retry tells apart (docs/retry.md). The library's part causes
(templates/lib/causes.sh, OBC_CAUSES) is written from it by `python3 -m tools.release_library`,
and the part retry reads that: the first cause that the step's exit code and its log match
decides; a step that matches none is retried only for an exit code of retry.on_exit_codes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Action = Literal["retry", "stop"]
# What the part retry matches the causes against when the job's cgroup (v2) counted an OOM
# kill while the step ran, as if the log had said it.
CGROUP_OOM_KILL = "memory.events: oom_kill"


@dataclass(frozen=True, slots=True)
class Cause:
    """A cause, said as `name` (`out of memory`): what obc does about it (`action`), and how
    it is recognised: a line of the step's log that matches `log` (a POSIX extended regular
    expression, matched by awk byte by byte), an exit code of `exit_codes`, or both when both
    are given. `example` is a log line it matches (docs/retry.md, and the tests). Besides the
log, the script matches `log` against CGROUP_OOM_KILL when the job's cgroup counted an OOM
kill during the step."""

    name: str
    action: Action
    log: str = ""
    exit_codes: tuple[int, ...] = ()
    example: str = ""

    def shell_line(self) -> str:
        """The cause as a line of the part causes' OBC_CAUSES: `ACTION|CODES|NAME|LOG`."""
        return "|".join((self.action, " ".join(map(str, self.exit_codes)), self.name, self.log))


# User errors first: the ranks that an out-of-memory rank leaves behind fail with NCCL's
# errors, and the job must still stop. No interval ({n}) and no class ([[:space:]]): mawk
# 1.3.3 has neither.
CAUSES: tuple[Cause, ...] = (
    Cause("out of memory", "stop",
          r"OutOfMemoryError|CUDA out of memory|CUDA error: out of memory",
          example="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"),
    Cause("killed by the OOM killer", "stop",
          r"oom[-_ ]kill|Out of memory: Kill|Memory cgroup out of memory", (137,),
          example="slurmstepd: error: Detected 1 oom_kill event in StepId=4711.0"),
    Cause("a config error", "stop",
          r"^(\[rank[0-9]*\]: )?([A-Za-z_.]*\.)?(ValueError|KeyError|ValidationError|"
          r"YAMLError|ScannerError|ParserError|ConfigError)(:|$)",
          example="ValueError: learning_rate must be a number"),
    Cause("preempted", "retry", r"DUE TO PREEMPTION",
          example="slurmstepd: error: *** STEP 4711.0 ON n1 CANCELLED AT 2026-12-02T10:00:00 "
                  "DUE TO PREEMPTION ***"),
    Cause("a lost node", "retry",
          r"DUE TO NODE FAIL|Node failure on|NODE_FAIL|Connection to node .* lost",
          example="srun: error: Node failure on n2"),
    Cause("a GPU fault", "retry",
          r"uncorrectable ECC error|GPU is lost|fallen off the bus|Xid [0-9]",
          example="RuntimeError: CUDA error: uncorrectable ECC error encountered"),
    Cause("a network or NCCL error", "retry",
          r"ncclSystemError|ncclRemoteError|ncclInternalError|NCCL error|"
          r"Watchdog caught collective operation timeout|DistNetworkError|"
          r"RendezvousConnectionError|RendezvousTimeoutError|Connection reset by peer",
          example="torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
                  "unhandled system error, NCCL version 2.21.5 ncclSystemError"),
    Cause("stopped by TERM from outside the job (a node shutting down, preemption)", "retry",
          exit_codes=(143,)),
)


def causes_text() -> str:
    """The table as the part causes' OBC_CAUSES: one cause a line, in order."""
    return "\n".join(cause.shell_line() for cause in CAUSES)
