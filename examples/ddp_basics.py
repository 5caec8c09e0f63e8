#!/usr/bin/env python3
"""ddp_basics.py — a plain PyTorch DDP training script, nothing of ddptop in it.

    torchrun --nproc-per-node 2 examples/ddp_basics.py --steps 200
    ddptop run -n 2 examples/ddp_basics.py --steps 200             # watched and steered

The usual shape: init_process_group, pin to the local rank's GPU (or the
CPU), wrap in DDP, shard with DistributedSampler and set_epoch, meet at a
barrier when done, save on rank 0 and destroy in a finally block. Fashion-MNIST from
/usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist, gz IDX)
when present, else a synthetic set of the same shape. Each rank prints its
parameter count, every step's loss, its steps/s, its CPU time a step (the
process's and the main thread's alone) and DDP's own bucket sizes
(tests and `make bench-torch` compare them with what ddptop received).
--crash-at-step N raises on every rank at step N (a failing script, for
the tests).
"""
import argparse
import gzip
import os
import struct
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

FASHION = "/usr/share/datasets/fashion-mnist"


def build_model(hidden="128"):
    """784 -> hidden layers (comma-separated widths, ReLU between) -> 10."""
    dims = [784] + [int(w) for w in str(hidden).split(",")] + [10]
    layers = [nn.Flatten()]
    for i in range(len(dims) - 1):
        layers += [nn.Linear(dims[i], dims[i + 1])] + ([nn.ReLU()] if i < len(dims) - 2 else [])
    return nn.Sequential(*layers)


def read_idx(path):
    """A gz IDX file (magic 0x0803 images, 0x0801 labels; big-endian dims) as a uint8 tensor."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    dims = struct.unpack(">" + "I" * (magic & 0xff), data[4:4 + 4 * (magic & 0xff)])
    return torch.frombuffer(bytearray(data[4 + 4 * len(dims):]), dtype=torch.uint8).reshape(dims)


def load_data(kind, limit, seed):
    if kind in ("auto", "fashion-mnist") and os.path.exists(f"{FASHION}/train-images-idx3-ubyte.gz"):
        x = read_idx(f"{FASHION}/train-images-idx3-ubyte.gz").float().div_(255.0)
        y = read_idx(f"{FASHION}/train-labels-idx1-ubyte.gz").long()
        if limit:
            x, y = x[:limit], y[:limit]
        return "fashion-mnist", TensorDataset(x, y)
    if kind == "fashion-mnist":
        raise SystemExit(f"fashion-mnist not found in {FASHION}")
    g = torch.Generator().manual_seed(seed)
    n = limit or 4096
    protos = torch.randn(10, 784, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    x = 0.05 * protos[y] + torch.randn(n, 784, generator=g)
    return "synthetic", TensorDataset(x, y)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--data", choices=("auto", "fashion-mnist", "synthetic"), default="auto")
    ap.add_argument("--limit", type=int, default=0, help="samples of the dataset to use (0: all)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: the epochs)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="model.pt", help="rank 0 saves the model's state_dict here")
    ap.add_argument("--hidden", default="128", help="widths of the hidden layers, e.g. 512,512")
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP's gradient bucket cap (its default 25)")
    ap.add_argument("--crash-at-step", type=int, default=0)
    args = ap.parse_args()

    cuda = args.device == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    device = torch.device(f"cuda:{local_rank}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(args.seed)
    model = DDP(build_model(args.hidden).to(device), device_ids=[local_rank] if cuda else None, bucket_cap_mb=args.bucket_cap_mb)
    print(f"rank {rank} params {sum(p.numel() for p in model.parameters())}", flush=True)
    name, ds = load_data(args.data, args.limit, args.seed)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(ds, batch_size=args.batch_size, sampler=sampler)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    step, t_first, cpu_first, thread_first = 0, 0.0, 0.0, 0.0
    try:
        for epoch in range(args.epochs):
            sampler.set_epoch(epoch)
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                loss = loss_fn(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                step += 1
                if step == 1:
                    t_first, cpu_first, thread_first = time.time(), time.process_time(), time.thread_time()
                print(f"rank {rank} epoch {epoch} step {step} loss {loss.item()!r}", flush=True)
                if step == args.crash_at_step:
                    raise RuntimeError(f"crash asked for at step {step}")
                if step == args.steps:
                    break
            if step == args.steps:
                break
        secs, cpu = time.time() - t_first, time.process_time() - cpu_first
        thread = time.thread_time() - thread_first     # this thread's alone: Gloo's threads left out
        print(f"rank {rank} trained {step} steps; first step done at unix {t_first:.6f}; "
              f"{(step - 1) / secs if step > 1 and secs > 0 else 0.0:.3f} steps/s after the first; "
              f"cpu {1e3 * cpu / max(step - 1, 1):.3f} ms per step; "
              f"main thread {1e3 * thread / max(step - 1, 1):.3f} ms per step", flush=True)
        # DDP's own record of its gradient buckets (rebuilt after the first step)
        ddp_log = model._get_ddp_logging_data()
        print(f"rank {rank} ddp buckets {ddp_log.get('rebuilt_bucket_sizes') or ddp_log.get('bucket_sizes')}",
              flush=True)
        dist.barrier()      # nobody tears the group down while a peer still trains
    finally:
        # runs after a stop from ddptop too: the model as it stood
        if rank == 0:
            torch.save(model.module.state_dict(), args.out)
            print(f"rank 0 saved {args.out} at step {step} ({name})", flush=True)
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
