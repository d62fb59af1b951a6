"""A user's own training script, as trainer.torchrun runs it: data-parallel (DDP) over gloo on
the CPU, one rank a process that torchrun (or accelerate launch) starts.

It trains a tiny linear model for --max_steps steps and saves checkpoint-N folders in
--output_dir the way transformers does: the weights, then trainer_state.json last, whose
`log_history` holds every step taken so far (carried over on resume). With
--resume_from_checkpoint PATH it continues from that checkpoint. On TERM (which its launcher
passes on to every rank) the ranks agree to stop at the same step, rank 0 saves a checkpoint
there, and they exit 143. --pause_after N makes a first attempt (one not resumed) wait after
step N until it is told to stop, so that a test stops it in the middle of training however
fast the machine is. Each rank writes rank-R.json beside the checkpoints: the world size, the
Slurm node it ran on, and how long its launcher waits for it after a stop signal.
"""

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

STOP = {"asked": False}


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output_dir", default="output")
    parser.add_argument("--max_steps", type=int, default=10)
    parser.add_argument("--save_steps", type=int, default=3)
    parser.add_argument("--pause_after", type=int, default=0)
    parser.add_argument("--resume_from_checkpoint")
    return parser.parse_args()


def stop_agreed() -> bool:
    """Whether any rank was told to stop: all of them then stop at this step."""
    asked = torch.tensor([1.0 if STOP["asked"] else 0.0])
    dist.all_reduce(asked, op=dist.ReduceOp.MAX)
    return asked.item() > 0


def save(output: Path, step: int, model, optimizer, history: list, args) -> None:
    """Rank 0 saves checkpoint-STEP: weights and optimizer, then trainer_state.json last."""
    if dist.get_rank() == 0:
        folder = output / f"checkpoint-{step}"
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(model.module.state_dict(), folder / "pytorch_model.bin")
        torch.save(optimizer.state_dict(), folder / "optimizer.pt")
        state = {"global_step": step, "max_steps": args.max_steps,
                 "save_steps": args.save_steps, "logging_steps": 1,
                 "world_size": dist.get_world_size(), "log_history": history}
        part = folder / "trainer_state.json.part"
        part.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
        part.rename(folder / "trainer_state.json")
        print(f"saved checkpoint-{step}", flush=True)
    dist.barrier()


def main() -> int:
    args = arguments()
    signal.signal(signal.SIGTERM, lambda *_: STOP.update(asked=True))
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    output = Path(args.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    (output / f"rank-{rank}.json").write_text(json.dumps({
        "rank": rank, "world_size": world_size,
        "node": os.environ.get("SLURMD_NODENAME"),
        "shutdown_timeout": os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT")}) + "\n",
        encoding="utf-8")

    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    history, start = [], 1
    if args.resume_from_checkpoint:
        folder = Path(args.resume_from_checkpoint)
        model.module.load_state_dict(torch.load(folder / "pytorch_model.bin"))
        optimizer.load_state_dict(torch.load(folder / "optimizer.pt"))
        state = json.loads((folder / "trainer_state.json").read_text(encoding="utf-8"))
        history, start = state["log_history"], state["global_step"] + 1
        print(f"rank {rank}: resumed from {folder} at step {start}", flush=True)

    for step in range(start, args.max_steps + 1):
        data = torch.Generator().manual_seed(step * world_size + rank)
        x = torch.randn(8, 4, generator=data)
        loss = ((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append({"step": step, "loss": round(loss.item(), 6)})
        print(f"rank {rank}: step {step} loss {loss.item():.6f}", flush=True)
        if step % args.save_steps == 0 or step == args.max_steps:
            save(output, step, model, optimizer, history, args)
        if step == args.pause_after and not args.resume_from_checkpoint:
            print(f"rank {rank}: paused after step {step}", flush=True)
            while not STOP["asked"]:
                time.sleep(0.05)
        if stop_agreed():
            if step % args.save_steps != 0:
                save(output, step, model, optimizer, history, args)
            print(f"rank {rank}: stopped at step {step}", flush=True)
            dist.destroy_process_group()
            return 143
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
