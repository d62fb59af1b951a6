# obc's health check (docs/preflight.md): a short all-reduce across every rank of the job,
# which each node runs in the job's runtime, where torch is: one rank per GPU torch sees
# (nccl), or one rank on a node without (gloo). Each rank adds 1, so every rank must get the
# world size back. Started as `python3 .obc/health.py SECONDS NODES NODE_RANK`, it ends
# within SECONDS: each of its processes is killed by SIGALRM then (exit code 142), whatever
# it waits for. On several nodes the ranks meet at MASTER_ADDR:MASTER_PORT (the job's
# rendezvous); on one, in a file of their own.
import signal
import sys

# First of all: torch's import alone may take long (in a spawned rank too, which imports
# this file again with the same arguments).
signal.alarm(int(sys.argv[1]))

import datetime
import os
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(local_rank, local_ranks, seconds, nodes, node_rank, store_file):
    rank = node_rank * local_ranks + local_rank
    world_size = nodes * local_ranks
    gpu = torch.cuda.is_available()
    backend = "nccl" if gpu else "gloo"
    where = dict(init_method="env://") if nodes > 1 else \
        dict(store=dist.FileStore(store_file, world_size))
    dist.init_process_group(backend, rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=seconds), **where)
    ones = torch.ones(1, device=f"cuda:{local_rank}" if gpu else "cpu")
    dist.all_reduce(ones)
    dist.destroy_process_group()
    if int(ones.item()) != world_size:
        sys.exit(f"the all-reduce across {world_size} ranks summed to {ones.item()}")
    if local_rank == 0:
        ranks = f"{world_size} rank" + ("s" if world_size > 1 else "")
        print(f"obc: health: node {node_rank + 1} of {nodes}: the all-reduce across {ranks} "
              f"({backend}) is done", file=sys.stderr)


def main():
    seconds, nodes, node_rank = (int(word) for word in sys.argv[1:4])
    local_ranks = torch.cuda.device_count() if torch.cuda.is_available() else 1
    with tempfile.TemporaryDirectory() as folder:
        store_file = os.path.join(folder, "store")
        mp.spawn(rank_main, args=(local_ranks, seconds, nodes, node_rank, store_file),
                 nprocs=local_ranks)


if __name__ == "__main__":
    main()
