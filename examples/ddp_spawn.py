"""ddp_spawn.py — a script that starts its own ranks, as PyTorch's "Getting
Started with Distributed Data Parallel" tutorial does: the parent sets
nothing up but calls torch.multiprocessing.spawn (or, with --start fork,
multiprocessing.Process with the fork start method, as the "Writing
Distributed Applications" tutorial does), and each child sets MASTER_ADDR
and MASTER_PORT itself, calls init_process_group with its rank and the
world size, and trains a DDP model.

    ddptop run examples/ddp_spawn.py               # once, without -n: ddptop follows the 2 ranks
    python3 examples/ddp_spawn.py                  # bare, the same
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def setup(rank, world_size, port):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def demo_basic(rank, world_size, a):
    setup(rank, world_size, a.port)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 5))
    ddp_model = DDP(model)
    loss_fn = nn.MSELoss()
    opt = torch.optim.SGD(ddp_model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    try:
        for step in range(a.steps):
            opt.zero_grad()
            x = torch.randn(20, 10, generator=g)
            loss = loss_fn(ddp_model(x), torch.randn(20, 5, generator=g))
            loss.backward()
            opt.step()
            print(f"rank {rank} step {step + 1} loss {loss.item():.6f}", flush=True)
    finally:
        if rank == 0 and a.out:
            torch.save(model.state_dict(), a.out)
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--port", type=int, default=12355)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--start", choices=["spawn", "fork"], default="spawn")
    p.add_argument("--out", default="")
    a = p.parse_args()
    if a.start == "spawn":
        mp.spawn(demo_basic, args=(a.world, a), nprocs=a.world, join=True)
        return
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=demo_basic, args=(rank, a.world, a)) for rank in range(a.world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    bad = [p.exitcode for p in procs if p.exitcode]
    if bad:
        raise SystemExit(f"a rank failed: exit codes {[p.exitcode for p in procs]}")


if __name__ == "__main__":
    main()
