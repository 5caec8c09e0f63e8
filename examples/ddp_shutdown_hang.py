#!/usr/bin/env python3
"""ddp_shutdown_hang.py — a shutdown hang: a barrier inside `if rank == 0`.

    ddptop run -n 2 --hang-after 3 examples/ddp_shutdown_hang.py

Training goes fine; at the end rank 0 saves and waits in a barrier the
other ranks never enter: they destroy the process group and go on with
their own work after training (--post S seconds, as a job that evaluates or
uploads does). Under ddptop rank 0's heartbeat names the collective it
waits in (barrier, at ddp_shutdown_hang.py:NN in main) and ddptop says
nobody else will come: the collective is under `if rank == 0:`. Without
ddptop it waits for the process group's timeout (NCCL), or, on Gloo, fails
with "Connection closed by peer" once the last other rank has exited.
"""
import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--post", type=float, default=30, help="seconds the other ranks work on after training")
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Linear(20, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(20):
        loss = model(torch.randn(16, 20)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        torch.save(model.module.state_dict(), "hang-model.pt")
        dist.barrier()     # the bug: only rank 0 gets here; it waits for the others forever
    print(f"rank {rank} done", flush=True)
    dist.destroy_process_group()
    if rank != 0:
        time.sleep(args.post)  # evaluating, uploading: anything but the barrier rank 0 waits in


if __name__ == "__main__":
    main()
