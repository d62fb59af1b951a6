"""A real distributed torch program: every rank contributes rank + 1 to an all-reduce (SUM)
over gloo, and writes what it got to allreduce-<rank>.json in the working directory.

Started by torchrun, which gives it RANK, WORLD_SIZE and the rendezvous. With N ranks every
file holds the sum N(N+1)/2, which no rank can compute alone: the files prove that every
rank joined the same group.
"""

import json
import os
from pathlib import Path

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    total = torch.tensor([rank + 1.0])
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    record = {"rank": rank, "world_size": world_size, "sum": total.item(),
              # Where the rank ran: the Slurm node when under Slurm.
              "node": os.environ.get("SLURMD_NODENAME")}
    Path(f"allreduce-{rank}.json").write_text(json.dumps(record) + "\n", encoding="utf-8")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
