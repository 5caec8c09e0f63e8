#!/usr/bin/env python3
"""One rank of the reference job in real PyTorch DDP (Gloo, CPU, one thread).

Launched like torchrun's static launch: RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT in the environment (Debian's torchrun is broken
under Python 3.11, docs/BENCHMARKS.md). Trains the MLP of ddptop's
default job the way ddptop-worker does — nn.Sequential(Linear, ReLU, ...),
DistributedSampler(seed, shuffle, drop_last) with set_epoch, DataLoader
batches, DDP (bucket_cap_mb 25), cross-entropy, torch.optim.SGD or AdamW,
LambdaLR with transformers' warm-up/cosine factor, gradient accumulation
with no_sync and loss / K, --grad-dtype bf16 as DDP's bf16_compress_hook
— and prints one JSON line with its timings.
Rank 0 optionally saves the final weights as model.safetensors.

Used by bench/bench_train.py (make bench) and bench/check_torch.py
(make check-torch).
"""
import argparse
import gzip
import json
import math
import os
import struct
import sys
import time

T_IMPORT = time.time()
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402
from torch.utils.data.distributed import DistributedSampler  # noqa: E402


def load_idx(path, magic):
    with gzip.open(path, "rb") as f:
        data = f.read()
    m = struct.unpack(">I", data[:4])[0]
    assert m == magic, (path, hex(m))
    nd = magic & 0xff
    dims = struct.unpack(">" + "I" * nd, data[4:4 + 4 * nd])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)


def fashion(d, limit):
    x = load_idx(f"{d}/train-images-idx3-ubyte.gz", 0x803)
    y = load_idx(f"{d}/train-labels-idx1-ubyte.gz", 0x801)
    if limit:
        x, y = x[:limit], y[:limit]
    # x = pixel / 255 as float32, as ddptop's loader
    x = x.reshape(len(x), -1).astype(np.float32) / np.float32(255.0)
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


def model(dims):
    layers = []
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def lr_factor(kind, warmup, total):
    # transformers' get_{constant,cosine}_schedule_with_warmup
    def f(s):
        if s < warmup:
            return float(s) / float(max(1, warmup))
        if kind == "constant":
            return 1.0
        progress = float(s - warmup) / float(max(1, total - warmup))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(0.5) * 2.0 * progress)))
    return f


def bf16_sum(parts):
    """The bf16 all-reduce SUM in rank order, every partial sum rounded to
    bf16: bf16 tensors added as torch adds them (the float sum, rounded to
    nearest even). ddptop's shared-memory path adds in this order."""
    acc = parts[0].to(torch.bfloat16)
    for p in parts[1:]:
        acc = acc + p.to(torch.bfloat16)
    return acc


def gloo_bf16_all_reduce(orig):
    """dist.all_reduce that also takes bf16 tensors on Gloo, which torch
    1.13's ProcessGroupGloo refuses ("Invalid scalar type"): the ranks'
    tensors are gathered (exactly, as float32) and summed with bf16_sum.
    Everything else goes to the real all_reduce. Lets bf16_compress_hook
    run unchanged on Gloo."""
    class Done:
        def __init__(self, t):
            self.fut = torch.futures.Future()
            self.fut.set_result([t])

        def get_future(self):
            return self.fut

        def wait(self):
            return True

    def all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        if tensor.dtype != torch.bfloat16:
            return orig(tensor, op=op, group=group, async_op=async_op)
        parts = [torch.empty(tensor.shape, dtype=torch.float32) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, tensor.float(), group=group)
        tensor.copy_(bf16_sum(parts))
        return Done(tensor) if async_op else None
    return all_reduce


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--limit", type=int, default=8192)
    p.add_argument("--model", default="784,256,256,10")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--epochs", type=int, default=1000)
    p.add_argument("--optimizer", default="sgd")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--nesterov", action="store_true")
    p.add_argument("--weight-decay", type=float, default=None)
    p.add_argument("--lr-schedule", default="constant")
    p.add_argument("--warmup-steps", type=int, default=0)
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-shuffle", action="store_true")
    p.add_argument("--drop-last", action="store_true")
    p.add_argument("--init-from", default="")
    p.add_argument("--grad-dtype", default="fp32", choices=["fp32", "bf16"],
                   help="bf16: DDP's bf16_compress_hook (ddptop's --grad-dtype bf16)")
    p.add_argument("--save", default="", help="rank 0: write the final weights here (.safetensors)")
    p.add_argument("--save-init", default="", help="rank 0: write the initial weights here and exit")
    a = p.parse_args()

    torch.set_num_threads(1)
    dims = [int(v) for v in a.model.split(",")]
    torch.manual_seed(a.seed)
    net = model(dims)
    if a.save_init:
        from safetensors.torch import save_file
        save_file({k: v.contiguous() for k, v in net.state_dict().items()}, a.save_init,
                  metadata={"format": "pt"})
        return
    if a.init_from:
        from safetensors.torch import load_file
        net.load_state_dict(load_file(a.init_from))

    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = fashion(a.data_dir, a.limit)
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=not a.no_shuffle,
                                 seed=a.seed, drop_last=a.drop_last)
    loader = DataLoader(ds, batch_size=a.batch_size, sampler=sampler, num_workers=0)
    ddp = DDP(net)   # broadcasts rank 0's parameters; bucket_cap_mb=25
    if a.grad_dtype == "bf16":
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import bf16_compress_hook
        dist.all_reduce = gloo_bf16_all_reduce(dist.all_reduce)

        # the hook itself, called through a function of another name: DDP
        # refuses one named bf16_compress_hook without CUDA 11 and NCCL 2.10
        def bf16_hook_on_gloo(state, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
            return bf16_compress_hook(state, bucket)
        ddp.register_comm_hook(None, bf16_hook_on_gloo)
    if a.optimizer == "sgd":
        wd = 0.0 if a.weight_decay is None else a.weight_decay
        opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=a.momentum, nesterov=a.nesterov,
                              weight_decay=wd)
    else:
        wd = 0.01 if a.weight_decay is None else a.weight_decay
        opt = torch.optim.AdamW(ddp.parameters(), lr=a.lr, weight_decay=wd)
    batches = len(loader)
    per_epoch = (batches + a.grad_accum - 1) // a.grad_accum
    total = min(a.steps, per_epoch * a.epochs)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(a.lr_schedule, a.warmup_steps, total))
    loss_fn = nn.CrossEntropyLoss()

    step, first, loss_v = 0, None, float("nan")
    done = False
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        it = iter(loader)
        left = batches
        while left and not done:
            k = min(a.grad_accum, left)
            left -= k
            opt.zero_grad(set_to_none=True)
            tot = 0.0
            for j in range(k):
                xb, yb = next(it)
                if j < k - 1:
                    with ddp.no_sync():
                        loss = loss_fn(ddp(xb), yb)
                        (loss / k if k > 1 else loss).backward()
                else:
                    loss = loss_fn(ddp(xb), yb)
                    (loss / k if k > 1 else loss).backward()
                tot += loss.item()
            opt.step()
            sched.step()
            step += 1
            loss_v = tot / k
            if first is None:
                first = time.time()
            if step >= total:
                done = True
        if done:
            break
    end = time.time()
    if rank == 0 and a.save:
        from safetensors.torch import save_file
        save_file({k: v.detach().contiguous() for k, v in net.state_dict().items()}, a.save,
                  metadata={"format": "pt"})
    print(json.dumps({"rank": rank, "import_done_unix": T_IMPORT, "first_step_unix": first,
                      "end_unix": end, "steps": step, "secs_after_first": end - first,
                      "final_loss": loss_v, "torch": torch.__version__}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
