#!/usr/bin/env python3
"""make check-torch: ddptop against real PyTorch (Debian's python3-torch 1.13).

1. init     — does torch.manual_seed(seed) + nn.Sequential(Linear, ReLU, ...)
              give the weights ddptop's --seed gives? (bit for bit, or how
              far; a NOTE, not a failure: --init-from gives identical starts)
2. buckets  — ddptop's gradient buckets against torch's own
              dist._compute_bucket_assignment_by_size (reverse order, limits
              [1 MB, bucket_cap_mb]), for several models and caps
3. optimizer— tests/optim_torch_fixture.h is what this torch computes
4. training — 50 steps, 2 ranks, same initial weights (--init-from), same
              data order and hyper-parameters: final weights within 1e-3
              relative (max |a-b| / max |b| per tensor), for SGD (momentum,
              Nesterov, weight decay), AdamW with warm-up + cosine,
              --grad-accum 2, and --drop-last --no-shuffle.
Exit status 0 when every check passes.
"""
import argparse
import os
import re
import subprocess
import sys
import shutil
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import FMNIST, ddptop_job, need_torch, torch_job  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
failures = []


def report(ok, what):
    print(f"{'PASS' if ok else 'FAIL'}: {what}", flush=True)
    if not ok:
        failures.append(what)


def load(path):
    from safetensors.numpy import load_file
    return load_file(path)


def rel_diff(a, b):
    return max(float(np.max(np.abs(a[k].astype(np.float64) - b[k]))) / max(float(np.max(np.abs(b[k]))), 1e-12)
               for k in b)


def check_init(a, tmp):
    for seed in (0, 1234):
        for model in ("784,256,256,10", "20,16,3"):
            tp = os.path.join(tmp, f"init-torch-{seed}-{model.replace(',', '_')}.safetensors")
            subprocess.run([a.py, os.path.join(HERE, "torch_ddp.py"), "--save-init", tp, "--seed", str(seed),
                            "--model", model], check=True)
            ck = os.path.join(tmp, f"init-ddptop-{seed}-{model.replace(',', '_')}")
            ddptop_job(a.ddptop, 1, ["--dataset", "synthetic", "--model", f"mlp:{model}", "--steps", "1", "--lr", "0",
                                     "--seed", str(seed), "--eval-every", "0", "--ckpt-dir", ck])
            t, d = load(tp), load(os.path.join(ck, "latest", "model.safetensors"))
            same = sorted(t) == sorted(d) and all(np.array_equal(t[k], d[k]) for k in t)
            n = sum(t[k].size for k in t)
            diff = sum(int(np.sum(t[k] != d[k])) for k in t) if sorted(t) == sorted(d) else n
            worst = max(float(np.max(np.abs(t[k] - d[k]))) for k in t) if sorted(t) == sorted(d) else float("inf")
            # Informational: the training checks start both sides from the same
            # weights through --init-from, whatever this says.
            print(f"NOTE: init: torch.manual_seed({seed}) + nn.Sequential vs ddptop --seed {seed} (mlp:{model}): "
                  + ("identical, bit for bit" if same else
                     f"{diff} of {n} elements differ, max abs {worst:.3g} (use --init-from for identical starts)"),
                  flush=True)


BUCKET_LINE = re.compile(r"gradient buckets \(first [0-9.]+ MB, then [0-9.e+-]+ MB\):(.*)$", re.M)


def check_buckets(a, tmp):
    import torch
    import torch.distributed as dist
    sys.path.insert(0, HERE)
    from torch_ddp import model as make_model
    for spec, cap in (("784,256,256,10", 25.0), ("784,1024,1024,10", 1.0), ("100,200,300,400,10", 0.25),
                      ("100,200,300,400,10", 0.001), ("784,512,512,512,512,10", 2.0)):
        net = make_model([int(v) for v in spec.split(",")])
        names = [k for k, _ in net.named_parameters()]
        params = [p for _, p in net.named_parameters()]
        order = list(reversed(range(len(params))))
        idx, _ = dist._compute_bucket_assignment_by_size([params[i] for i in order],
                                                         [dist._DEFAULT_FIRST_BUCKET_BYTES, int(cap * 1024 * 1024)],
                                                         [False] * len(params), order)
        want = [[names[i] for i in b] for b in idx]
        _, _, _, out, _, _ = ddptop_job(a.ddptop, 1, ["--dataset", "synthetic", "--model", f"mlp:{spec}", "--steps", "1",
                                                "--bucket-cap-mb", str(cap), "--eval-every", "0", "--no-final-ckpt",
                                                "--ckpt-dir", os.path.join(tmp, "b")])
        m = BUCKET_LINE.search(out)
        got = [g.split() for g in re.findall(r"\[([^\]]*)\]", m.group(1))] if m else None
        print(f"  mlp:{spec} cap {cap} MB: torch {want}")
        report(got == want, f"buckets: mlp:{spec} --bucket-cap-mb {cap} as torch's Reducer (ddptop: {got})")
    del torch


def check_fixture(a):
    r = subprocess.run([a.py, os.path.join(HERE, "gen_optim_fixture.py")], stdout=subprocess.PIPE, text=True,
                       check=True)
    with open(os.path.join(ROOT, "tests", "optim_torch_fixture.h")) as f:
        have = f.read()
    report(r.stdout == have, "optimizer: tests/optim_torch_fixture.h is what this torch computes "
                             "(test_optim_exact checks ddptop against it bit for bit)")


def check_training(a, tmp):
    init = os.path.join(tmp, "init.safetensors")
    subprocess.run([a.py, os.path.join(HERE, "torch_ddp.py"), "--save-init", init, "--seed", "0"], check=True)
    cases = [
        ("sgd_nesterov_wd", ["--lr", "0.05", "--momentum", "0.9", "--nesterov", "--weight-decay", "0.0001"],
         ["--lr", "0.05", "--momentum", "0.9", "--nesterov", "--weight-decay", "0.0001"], 8192),
        ("adamw_warmup_cosine", ["--optimizer", "adamw", "--lr", "0.001", "--lr-schedule", "cosine", "--warmup-steps", "10"],
         ["--optimizer", "adamw", "--lr", "0.001", "--lr-schedule", "cosine", "--warmup-steps", "10"], 8192),
        ("sgd_grad_accum_2", ["--lr", "0.05", "--momentum", "0.9", "--grad-accum", "2"],
         ["--lr", "0.05", "--momentum", "0.9", "--grad-accum", "2"], 8192),
        ("sgd_drop_last_no_shuffle", ["--lr", "0.05", "--drop-last", "--no-shuffle"],
         ["--lr", "0.05", "--drop-last", "--no-shuffle"], 8193),
    ]
    for name, dd, th, limit in cases:
        common = ["--batch-size", "64", "--steps", str(a.steps), "--seed", "0", "--init-from", init]
        ck = os.path.join(tmp, f"ck-{name}")
        ddptop_job(a.ddptop, 2, ["--dataset", "fashion-mnist", "--limit", str(limit), "--epochs", "1000",
                                 "--eval-every", "0", "--ckpt-dir", ck] + common + dd)
        tw = os.path.join(tmp, f"torch-{name}.safetensors")
        torch_job(a.py, 2, ["--limit", str(limit), "--save", tw] + common + th)
        d, t, i = load(os.path.join(ck, "latest", "model.safetensors")), load(tw), load(init)
        r, moved = rel_diff(d, t), rel_diff(t, i)
        print(f"  {name}: {a.steps} steps, max relative difference ddptop vs torch {r:.3g} "
              f"(training moved the weights by {moved:.3g})")
        report(r < 1e-3 and moved > 1e-2, f"training: {name} matches torch DDP within 1e-3 after {a.steps} steps")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ddptop", default="build/ddptop")
    ap.add_argument("--py", default=sys.executable)
    ap.add_argument("--steps", type=int, default=50)
    a = ap.parse_args()
    print(f"torch {need_torch(a.py)}")
    if not os.path.exists(f"{FMNIST}/train-images-idx3-ubyte.gz"):
        sys.exit(f"check-torch: Fashion-MNIST not in {FMNIST} (apt-get install dataset-fashion-mnist)")
    tmp = tempfile.mkdtemp(prefix="ddptop-check-torch-")
    try:
        check_init(a, tmp)
        check_buckets(a, tmp)
        check_fixture(a)
        check_training(a, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"check-torch: {len(failures)} failed" + (": " + "; ".join(failures) if failures else ""))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
