"""The Slurm part of the model (job.py): how the script asks Slurm for its resources, and
its #SBATCH block, comment lines that sbatch reads and the shell skips.

sbatch takes each value as written (no quotes, no $VARIABLES, no ~): the schema lets through
only values that mean the same to sbatch as in the run file, so nothing here quotes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..core.shell import ShellText
from .defaults import DEFAULT_RESTART_SIGNAL, DEFAULT_SLURM_SIGNAL


def default_signal(slurm: dict) -> str:
    """The signal Slurm sends before the time limit, when the run file names none."""
    return DEFAULT_RESTART_SIGNAL if "max_restarts" in slurm else DEFAULT_SLURM_SIGNAL


def time_limit_seconds(time: str) -> int | None:
    """Return a Slurm time limit (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in
    seconds as written; None for UNLIMITED or INFINITE. ValueError if it is none of these."""
    if time in ("UNLIMITED", "INFINITE"):
        return None
    days, _, clock = time.rpartition("-")
    parts = [int(part) for part in clock.split(":")]
    if days:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = [*parts, 0, 0][:3]
        hours += int(days) * 24
    else:  # MM, MM:SS or HH:MM:SS
        hours, minutes, seconds = [0, *parts, 0][:3] if len(parts) < 3 else parts
    return hours * 3600 + minutes * 60 + seconds


def granted_seconds(seconds: int) -> int:
    """The time limit Slurm grants for one of `seconds`: whole minutes, a part of one
    rounded up (0 is no limit at all to Slurm, which rules/stop.py refuses)."""
    return -(-seconds // 60) * 60


# The variables a multi-node job exports to every step (docs/slurm.md).
# The states in which a Slurm job has ended (squeue -t all -o %T): its processes are gone.
# Both job.sh --status (templates/lib/records.sh, which a test holds to this list) and obc
# status judge a run by them.
SLURM_ENDED_STATES = ("BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED",
                      "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT")
RENDEZVOUS_NAMES = ("MASTER_ADDR", "MASTER_PORT", "NNODES", "NODE_RANK", "GPUS_PER_NODE")


@dataclass(frozen=True, slots=True)
class Slurm:
    """How the script asks Slurm for its resources; None fields are left to the site."""

    job_name: str
    output: str
    signal: str
    requeue: bool
    nodes: int
    gpus_per_node: int | None
    cpus_per_task: int | None
    partition: str | None
    account: str | None
    qos: str | None
    time: str | None
    mem: str | None
    constraint: str | None
    rendezvous_port: int
    extra: tuple[str, ...]
    # How many times the job may requeue itself at the time limit; and whether it may
    # requeue itself at all (at the time limit, or to retry a step).
    max_restarts: int | None
    requeues_itself: bool
    # With nodes > 1: the step launched with torchrun across the nodes by its own option
    # (Axolotl's train: `--launcher torchrun --`), if any. A script's train is the job's
    # launcher's (Job.launcher), not this.
    torchrun_step: str | None
    # With nodes > 1: the step whose program is torchrun (TRL's train), which takes the
    # rendezvous options right after its name, if any.
    torchrun_program_step: str | None = None

    @property
    def multi_node(self) -> bool:
        return self.nodes > 1

    @property
    def restartable(self) -> bool:
        """Whether the job may run again from the top with the same job id: Slurm requeues
        it after preemption, or it requeues itself at the time limit."""
        return self.requeue or self.requeues_itself

    @property
    def time_limit_signal(self) -> bool:
        """Whether the signal means only the time limit (USR1, USR2), which scancel and
        preemption do not send: the job may then requeue itself on it."""
        return self.signal_name in ("USR1", "USR2")

    @property
    def signal_name(self) -> str:
        """The signal Slurm sends the script before the time limit: `B:USR1@300` → USR1."""
        return self.signal.rpartition(":")[2].partition("@")[0].removeprefix("SIG")

    @property
    def signal_lead(self) -> int:
        """How many seconds before the time limit it comes (Slurm's default is 60)."""
        _, at, seconds = self.signal.partition("@")
        return int(seconds) if at else 60

    @property
    def directives(self) -> tuple[str, ...]:
        """The sbatch options, in a fixed order: what the job is, where it runs, what it gets,
        how it ends; then the run file's own extras."""
        options = [("job-name", self.job_name), ("output", self.output),
                   ("partition", self.partition), ("account", self.account),
                   ("qos", self.qos), ("time", self.time), ("nodes", str(self.nodes)),
                   ("ntasks-per-node", "1"),
                   ("gpus-per-node", _optional(self.gpus_per_node)),
                   ("cpus-per-task", _optional(self.cpus_per_task)), ("mem", self.mem),
                   ("constraint", self.constraint), ("signal", self.signal)]
        lines = [f"--{name}={value}" for name, value in options if value is not None]
        # A requeued job appends to its log rather than starting it again.
        lines += ["--requeue", "--open-mode=append"] if self.restartable else ["--no-requeue"]
        return (*lines, *self.extra)


def _optional(number: int | None) -> str | None:
    return None if number is None else str(number)


def sbatch_lines(slurm: Slurm | tuple[str, ...]) -> ShellText:
    """Return the `#SBATCH --option=value` lines of `slurm` (or of these directives, which
    come from runs' own), one per directive."""
    directives = slurm.directives if isinstance(slurm, Slurm) else slurm
    return ShellText("\n".join(f"#SBATCH {directive}" for directive in directives))


@dataclass(frozen=True, slots=True)
class Allocation:
    """What Slurm allocates a batch job of these #SBATCH lines (the one task a node that the
    script runs), read from the lines themselves, the run file's extras included."""

    nodes: int
    # GPUs of the whole job (of each array task): the most any line asks for, "all" when a
    # line takes all of each node's; and the line that asks for that many.
    gpus: int | Literal["all"]
    gpus_by: str
    # The GPUs are per node (--gpus-per-node, --gres): shown as GPUs × nodes.
    per_node: bool
    time: str | None
    # How many jobs the lines make: one, or an array's tasks (None: a spec not read here).
    tasks: int | None
    array: str | None


def allocation(directives: tuple[str, ...]) -> Allocation:
    """Return what Slurm allocates for `directives` (`--name=value` or `--name` each)."""
    options = dict(directive[2:].partition("=")[::2] for directive in directives)
    nodes = _most(options.get("nodes", "1"))
    asked = [request for directive in directives
             if (request := _gpus_asked(directive, nodes, options)) is not None]
    gpus, by, per_node = max(asked, key=lambda r: (r[0] == "all", r[0] if r[0] != "all" else 0),
                             default=(0, "", True))
    array = options.get("array")
    return Allocation(nodes, gpus, by, per_node, options.get("time"),
                      1 if array is None else array_tasks(array), array)


def _gpus_asked(directive: str, nodes: int, options: dict[str, str]) -> \
        tuple[int | Literal["all"], str, bool] | None:
    """The GPUs of the whole job that one line asks for, the line, and whether per node;
    "all" where the count is not a plain number (a node's sockets, a `1k`)."""
    name, _, value = directive[2:].partition("=")
    if name == "exclusive":  # the whole node, all its GPUs with it
        return "all", directive, True
    per_node = name in ("gpus-per-node", "gres")
    if per_node or name == "tres-per-task":
        items = [item.removeprefix("gres/").replace("=", ":") for item in value.split(",")]
        counts = [_gpu_count(item) for item in items if item.isdigit() or
                  item.partition(":")[0] == "gpu"]
        if not counts:
            return None
    elif name in ("gpus", "gpus-per-task", "gpus-per-socket"):
        counts = [_gpu_count(value)]
    else:
        return None
    # One task a node; a node's sockets as many as it has, unless a line says.
    times = {"gpus": 1, "gpus-per-socket": nodes * _most(options.get("sockets-per-node", "0"))}
    factor = times.get(name, nodes)
    known = [count for count in counts if count is not None]
    if len(known) < len(counts) or not factor:
        return "all", directive, per_node
    return sum(known) * factor, directive, per_node


def _gpu_count(request: str) -> int | None:
    """`gpu:a100:2` → 2, `a100:3` → 3, `4` → 4, `gpu` → 1 (a type alone is one GPU); None
    for a count that is not a plain number (`gpu:1k`)."""
    last = request.rpartition(":")[2]
    if last.isdigit():
        return int(last)
    return None if last[:1].isdigit() else 1


def _most(count: str) -> int:
    """The most a `N` or `MIN-MAX` count allows; 0 if it is not one."""
    last = count.rpartition("-")[2]
    return int(last) if last.isdigit() else 0


def array_tasks(spec: str) -> int | None:
    """How many tasks an --array spec makes: `0-31` → 32, `1,3,5-7%2` → 5, `0-15:4` → 4;
    None if it is not one (sbatch then refuses it)."""
    count = 0
    for part in spec.partition("%")[0].split(","):
        span, _, step = part.partition(":")
        first, _, last = span.partition("-")
        try:
            count += len(range(int(first), int(last or first) + 1, int(step or 1)))
        except ValueError:
            return None
    return count
