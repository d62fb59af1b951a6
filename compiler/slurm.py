"""The Slurm part of the model (model.py): how the script asks Slurm for its resources, and
its #SBATCH block, comment lines that sbatch reads and the shell skips.

sbatch takes each value as written (no quotes, no $VARIABLES, no ~): the schema lets through
only values that mean the same to sbatch as in the run file, so nothing here quotes.
"""

from __future__ import annotations

from dataclasses import dataclass

from .shell import ShellText

# The signal Slurm sends the script before the time limit.
DEFAULT_SLURM_SIGNAL = "B:TERM@120"
# With slurm.max_restarts: a signal that scancel and preemption do not send, so that the job
# can tell the time limit and requeue itself.
DEFAULT_RESTART_SIGNAL = "B:USR1@120"


def default_signal(slurm: dict) -> str:
    """The signal Slurm sends before the time limit, when the run file names none."""
    return DEFAULT_RESTART_SIGNAL if "max_restarts" in slurm else DEFAULT_SLURM_SIGNAL


# The variables a multi-node job exports to every step (README, "Running on Slurm").
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
    # With nodes > 1: the step launched with torchrun across the nodes (Axolotl's train), if
    # any.
    torchrun_step: str | None

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
