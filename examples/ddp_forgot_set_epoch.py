#!/usr/bin/env python3
"""ddp_forgot_set_epoch.py — the classic DistributedSampler bug: no
sampler.set_epoch(epoch), so every epoch shuffles the same way.

    ddptop run -n 2 examples/ddp_forgot_set_epoch.py

Under ddptop the second epoch's shard repeats the first's order and ddptop
warns ("sampler.set_epoch(epoch) not called?"). A small synthetic set, CPU,
Gloo; the same shape as ddp_basics.py with one line missing.
"""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x, y = torch.randn(512, 20), torch.randint(0, 3, (512,))
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds, shuffle=True, seed=0)
    loader = DataLoader(ds, batch_size=32, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    try:
        for epoch in range(3):
            # the bug: sampler.set_epoch(epoch) belongs here
            for xb, yb in loader:
                loss = nn.functional.cross_entropy(model(xb), yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
            print(f"rank {dist.get_rank()} epoch {epoch} loss {loss.item():.4f}", flush=True)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
