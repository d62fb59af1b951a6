"""trainer.torchrun's launch (docs/trainers.md, "Your own script under torchrun"): the user's
script under torchrun or `accelerate launch`, with so many ranks a node.

The step's command is the launch on one machine (`one_node`); on several Slurm nodes the script
(the library's parts slurm and launcher) puts the rendezvous obc computes in place of its
`local_words`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LauncherKind = Literal["torchrun", "accelerate"]
# How long torch's elastic launcher waits for its ranks after passing a stop signal on,
# before it kills them (30 s unless this says otherwise; torch/distributed/launcher/api.py).
SHUTDOWN_TIMEOUT = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"


@dataclass(frozen=True, slots=True)
class Launcher:
    """How `step` (train) starts the script: `kind`, `nproc_per_node` ranks a node, the script
    (a file of the run dir) and its arguments."""

    step: str
    kind: LauncherKind
    nproc_per_node: int
    script: str
    args: tuple[str, ...]

    @property
    def one_node(self) -> tuple[str, ...]:
        """The command on one machine: torchrun's --standalone rendezvous on a free port, or
        accelerate's torch.distributed launch (--multi_gpu: also on CPU, where each rank
        then takes gloo) of one machine."""
        return (*self.local_words, str(self.nproc_per_node), self.script, *self.args)

    @property
    def local_words(self) -> tuple[str, ...]:
        """The words of `one_node` before the rank count: what a launch across the nodes
        replaces, together with that count."""
        if self.kind == "accelerate":
            return ("accelerate", "launch", "--multi_gpu", "--num_machines", "1",
                    "--num_processes")
        return ("torchrun", "--standalone", "--nproc_per_node")
