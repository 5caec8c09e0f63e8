#!/usr/bin/env python3
"""ddp_shutdown_hang.py — a shutdown hang: a barrier inside `if rank == 0`.

    ddptop run -n 2 --hang-after 3 examples/ddp_shutdown_hang.py

Training goes fine; at the end rank 0 waits in a barrier the other ranks
never enter (they destroy the process group and leave). Under ddptop rank
0's heartbeat names the collective it waits in (barrier, and the line,
ddp_shutdown_hang.py:NN in the beat's "where") and ddptop reports the
hang. Without ddptop it waits for the process group's timeout.
"""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
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


if __name__ == "__main__":
    main()
