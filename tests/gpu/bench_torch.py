#!/usr/bin/env python3
"""bench_torch.py — PyTorch eager on the GPU, the reference for bench_gpu.

The same MLP (nn.Sequential of Linear and ReLU), batch, optimizer and data
handling as tests/gpu/bench_gpu.c: synthetic data on the GPU, each step's
batch gathered by indices made on the host, cross-entropy, SGD with momentum
(or AdamW), loss.item() every step (ddptop reads the loss back every step
too). Runs (--runs, comma-separated):
  eager         plain eager, full float32 (TF32 off, as ddptop's fp32)
  ddp           DistributedDataParallel over NCCL at world size 1 (PyTorch's
                default buckets, 25 MB), full float32
  ddp-autocast  the same under torch.autocast(bf16): what a PyTorch user
                turns on for bf16 (FP32 weights, bf16 products)
  ddp-compile   torch.compile of that DDP model, under autocast(bf16)
                (default mode; DDP's graph breaks at bucket boundaries)
--device cpu is a dry run (Gloo, small sizes) that checks this script on a
machine without a GPU; torch.compile needs torch 2 (1.x: that run says
"skip").

Prints one JSON object per run with steps/s and the mean step split into
compute (forward + backward + optimizer, CUDA events; with DDP the backward
includes the all-reduce the hooks could not hide) and overhead (the rest of
the wall-clock step). Exposed comm is DDP's backward minus plain backward.
"""
import argparse
import json
import os
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mlp:784,4096,4096,10")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--optimizer", default="sgd", choices=["sgd", "adamw"])
    ap.add_argument("--runs", default="eager,ddp,ddp-autocast,ddp-compile")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = ap.parse_args()

    try:
        import torch
        import torch.distributed as dist
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError as e:
        print(json.dumps({"who": "pytorch", "skip": "no torch: %s" % e}))
        return 0
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print(json.dumps({"who": "pytorch", "skip": "torch sees no GPU"}))
        return 0

    if hasattr(torch, "set_float32_matmul_precision"):
        torch.set_float32_matmul_precision("highest")   # no TF32, as ddptop's fp32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)

    class Timer:
        """CUDA events on the GPU, the wall clock on the CPU (dry run)."""
        def __init__(self):
            self.ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)] if cuda else [0.0] * 4

        def mark(self, i):
            if cuda:
                self.ev[i].record()
            else:
                self.ev[i] = time.perf_counter()

        def ms(self, a, b):
            return self.ev[a].elapsed_time(self.ev[b]) if cuda else (self.ev[b] - self.ev[a]) * 1e3

    def sync():
        if cuda:
            torch.cuda.synchronize()
    dims = [int(d) for d in args.model.split(":", 1)[1].split(",")]
    B = args.batch
    rows = B * 8
    g = torch.Generator().manual_seed(1)
    x_all = torch.rand(rows, dims[0], generator=g).to(dev)
    y_all = torch.randint(0, dims[-1], (rows,), generator=g).to(dev)

    def make_model():
        torch.manual_seed(1)
        layers = []
        for i in range(len(dims) - 1):
            layers.append(nn.Linear(dims[i], dims[i + 1]))
            if i < len(dims) - 2:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers).to(dev)

    def make_opt(params):
        if args.optimizer == "adamw":
            return torch.optim.AdamW(params)
        return torch.optim.SGD(params, lr=0.01, momentum=0.9)

    def run(name):
        ddp = name.startswith("ddp")
        amp = name in ("ddp-autocast", "ddp-compile")
        net = make_model()
        model = net
        if ddp:
            model = nn.parallel.DistributedDataParallel(net, device_ids=[0] if cuda else None)
        if name == "ddp-compile":
            model = torch.compile(model)
        opt = make_opt(model.parameters())
        tm = Timer()
        idx_host = torch.empty(B, dtype=torch.int64)
        if cuda:
            idx_host = idx_host.pin_memory()
        sums = {"fwd": 0.0, "bwd": 0.0, "opt": 0.0}
        loss_v = 0.0
        t0 = 0.0
        for s in range(args.warmup + args.steps):
            if s == args.warmup:
                sync()
                t0 = time.perf_counter()
            idx_host.random_(0, rows)
            idx = idx_host.to(dev, non_blocking=True)
            xb, yb = x_all[idx], y_all[idx]
            opt.zero_grad(set_to_none=True)
            tm.mark(0)
            # autocast: the products in bf16, the loss in FP32 (its rules)
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=amp):
                loss = F.cross_entropy(model(xb), yb)
            tm.mark(1)
            loss.backward()
            tm.mark(2)
            opt.step()
            tm.mark(3)
            loss_v = loss.item()   # waits for the step, like ddptop's read-back
            if s >= args.warmup:
                sums["fwd"] += tm.ms(0, 1)
                sums["bwd"] += tm.ms(1, 2)
                sums["opt"] += tm.ms(2, 3)
        sync()
        wall_ms = (time.perf_counter() - t0) * 1e3
        n = args.steps
        step_ms = wall_ms / n
        compute = (sums["fwd"] + sums["bwd"] + sums["opt"]) / n
        return {
            "who": "pytorch-" + name, "precision": "autocast-bf16" if amp else "fp32",
            "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0) if cuda else "cpu (dry run)",
            "model": args.model, "batch": B, "steps": n, "optimizer": args.optimizer,
            "steps_per_s": round(n / (wall_ms / 1e3), 3), "step_ms": round(step_ms, 4),
            "fwd_ms": round(sums["fwd"] / n, 4), "bwd_ms": round(sums["bwd"] / n, 4),
            "opt_ms": round(sums["opt"] / n, 4), "compute_ms": round(compute, 4),
            "overhead_ms": round(step_ms - compute, 4), "final_loss": round(loss_v, 6),
            "gpu_mem_used_gib": round(torch.cuda.memory_reserved() / 2**30, 2) if cuda else 0.0,
        }

    results = {}
    runs = [r for r in args.runs.split(",") if r]
    for r in runs:
        if r not in ("eager", "ddp", "ddp-autocast", "ddp-compile"):
            print("bench_torch.py: unknown run %r" % r, file=sys.stderr)
            return 2
    if "eager" in runs:
        results["eager"] = run("eager")
    ddp_runs = [r for r in runs if r.startswith("ddp")]
    if ddp_runs:
        fd, path = tempfile.mkstemp(prefix="bench_torch_store.")
        os.close(fd)
        os.unlink(path)
        dist.init_process_group("nccl" if cuda else "gloo", init_method="file://" + path, rank=0, world_size=1)
        try:
            for r in ddp_runs:
                if r == "ddp-compile" and not hasattr(torch, "compile"):
                    results[r] = {"who": "pytorch-" + r, "skip": "torch %s has no torch.compile" % torch.__version__}
                    continue
                results[r] = run(r)
        finally:
            dist.destroy_process_group()
            if os.path.exists(path):
                os.unlink(path)
    if "eager" in results and "ddp" in results:
        # What DDP adds to backward at world size 1: the all-reduce it could
        # not hide, plus its hooks' bookkeeping.
        results["ddp"]["exposed_comm_ms"] = round(
            max(0.0, results["ddp"]["bwd_ms"] - results["eager"]["bwd_ms"]), 4)
    for r in results.values():
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
