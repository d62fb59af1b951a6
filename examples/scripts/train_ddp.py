"""A data-parallel training script of your own, as trainer.torchrun runs it (README, "Your own
script under torchrun"): what obc needs of it is in three places, marked OBC.

torchrun (or accelerate launch) starts one process a GPU and gives it RANK, WORLD_SIZE and
the rendezvous; the script takes NCCL on GPUs, gloo on a CPU.
"""

import argparse
import json
import signal
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

STOP = {"asked": False}


def save(output: Path, step: int, model, optimizer) -> None:
    # OBC: a checkpoint is a folder checkpoint-STEP in output_dir with the weights and, written
    # last, trainer_state.json: obc resumes only from one that has both.
    if dist.get_rank() == 0:
        folder = output / f"checkpoint-{step}"
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(model.module.state_dict(), folder / "pytorch_model.bin")
        torch.save(optimizer.state_dict(), folder / "optimizer.pt")
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    dist.barrier()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output_dir", default="output")
    parser.add_argument("--max_steps", type=int, default=1000)
    parser.add_argument("--save_steps", type=int, default=100)
    # OBC: the flag trainer.torchrun.resume.flag names; obc gives it the newest checkpoint.
    parser.add_argument("--resume_from_checkpoint")
    args = parser.parse_args()
    # OBC: on TERM (the job told to stop; the launcher passes it on) save, then end.
    signal.signal(signal.SIGTERM, lambda *_: STOP.update(asked=True))

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    device = torch.device("cuda", dist.get_rank() % torch.cuda.device_count()) if cuda \
        else torch.device("cpu")
    model = DistributedDataParallel(torch.nn.Linear(1024, 1024).to(device))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    start = 1
    if args.resume_from_checkpoint:
        folder = Path(args.resume_from_checkpoint)
        model.module.load_state_dict(torch.load(folder / "pytorch_model.bin"))
        optimizer.load_state_dict(torch.load(folder / "optimizer.pt"))
        start = json.loads((folder / "trainer_state.json").read_text())["global_step"] + 1

    for step in range(start, args.max_steps + 1):
        x = torch.randn(32, 1024, device=device)
        loss = (model(x) - x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        stop = torch.tensor([float(STOP["asked"])], device=device)
        dist.all_reduce(stop, op=dist.ReduceOp.MAX)  # every rank stops at the same step
        if step % args.save_steps == 0 or step == args.max_steps or stop.item():
            save(Path(args.output_dir), step, model, optimizer)
        if stop.item():
            break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
