#!/usr/bin/env python3
"""ddptop's --precision against PyTorch on the same weights and batches.

Trains MLP 784-256-256-10 on the first --limit Fashion-MNIST images, one
rank, batch 64, --no-shuffle (batch k is rows 64k..64k+63 on both sides),
plain SGD lr 0.1, from the same initial weights (--init-from), --steps
steps, three ways on each side:

  fp32   ddptop --precision fp32   vs torch FP32
  bf16   ddptop --precision bf16   vs torch.autocast("cpu", dtype=torch.bfloat16) where
         torch 1.13 runs autocast's GEMMs in oneDNN (a CPU with AVX-512 BW, VL and
         DQ), else vs an emulation in torch of the same rules (a Linear with
         bf16-rounded inputs, FP32 sums, one rounding of each output and
         gradient; docs/TRAINING.md, "Precision"): without AVX-512, torch 1.13's
         bf16 GEMMs run in ATen's own loops, some of which sum in bf16, and
         autocast is then not the rule ddptop follows
  tf32   ddptop --precision tf32   vs an emulation in torch: a Linear whose GEMM
         inputs are rounded to TF32 (round to nearest even, the bit recipe of
         nn/bf16.h) with FP32 accumulation and outputs (torch's CPU has no
         TF32 mode)

ddptop's per-step losses come from its recording (--record, then ddptop
export --jsonl), its final weights from the checkpoint. Printed: per mode the
worst per-step loss difference ddptop vs torch, and for scale the difference
of the reduced mode from FP32 inside torch itself; the final weights' worst
relative difference (max |a-b| / max |b| per tensor). With --check, exit 1
unless every mode is within its tolerance and bf16 and tf32 are clearly apart
from FP32 (the check could not pass were the reduced path FP32).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch_ddp import fashion, model  # noqa: E402

# Tolerances, from measurements (docs/TRAINING.md, "Precision"; this job,
# 20 steps, a 2-core Xeon with AVX-512, OpenBLAS 0.3.21, torch 1.13): the
# worst per-step loss difference ddptop vs torch and the final weights' worst
# relative difference, about 10x what was measured (bf16 9.7e-6 and 8.5e-5,
# tf32 4.0e-7 and 1.1e-7, fp32 2.4e-7 and 2.1e-7), and well below how far the
# reduced modes are from FP32 in torch itself (bf16 1.3e-3 and 1.6e-2, tf32
# 3.6e-4 and 1.7e-2). A larger step size or momentum lets the few GEMM sums
# that round the other way (FP32 summation order) grow chaotically.
TOL_LOSS = {"fp32": 1e-5, "bf16": 1e-4, "tf32": 2e-5}
TOL_W = {"fp32": 1e-4, "bf16": 1e-3, "tf32": 1e-4}


def tf32(t):
    """Round float32 to TF32 (10 mantissa bits), nearest even; inf/NaN pass."""
    u = t.contiguous().view(torch.int32)
    special = (u & 0x7F800000) == 0x7F800000
    r = (u + 0xFFF + ((u >> 13) & 1)) & ~0x1FFF
    return torch.where(special, u, r).view(torch.float32)


class Tf32Linear(torch.autograd.Function):
    """y = tf32(x) tf32(W)^T + b; backward: db = sum(dy) in FP32,
    dW = tf32(dy)^T tf32(x), dx = tf32(dy) tf32(W)."""

    @staticmethod
    def forward(ctx, x, w, b):
        xq, wq = tf32(x), tf32(w)
        ctx.save_for_backward(xq, wq)
        return torch.addmm(b, xq, wq.t())

    @staticmethod
    def backward(ctx, dy):
        xq, wq = ctx.saved_tensors
        dyq = tf32(dy)
        return dyq @ wq, dyq.t() @ xq, dy.sum(0)


def bf16(t):
    """Round float32 to bfloat16 (nearest even) and back: the value, kept in FP32."""
    return t.to(torch.bfloat16).float()


class Bf16Linear(torch.autograd.Function):
    """autocast(bf16)'s Linear as ddptop computes it (docs/TRAINING.md,
    "Precision"): a holds bf16 values; y = bf16(a bf16(W)^T + bf16(b)), FP32
    sums; backward: dA = bf16(dy bf16(W)), dW = bf16(dy^T a), db = bf16(sum dy)."""

    @staticmethod
    def forward(ctx, a, w, b):
        wb = bf16(w)
        ctx.save_for_backward(a, wb)
        return bf16(torch.addmm(bf16(b), a, wb.t()))

    @staticmethod
    def backward(ctx, dy):
        a, wb = ctx.saved_tensors
        return bf16(dy @ wb), bf16(dy.t() @ a), bf16(dy.sum(0))


class Bf16Grad(torch.autograd.Function):
    """The logits' cast to FP32 for the loss: identity forward, its gradient
    rounded to bf16 (the backward of autocast's cast)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return bf16(g)


def onednn_bf16():
    """Whether torch 1.13 runs autocast's bf16 GEMMs in oneDNN on this CPU
    (ATen's mkldnn_bf16_device_check: AVX-512 BW, VL and DQ)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), [])
    except OSError:
        return False
    return torch.backends.mkldnn.is_available() and all(x in flags for x in ("avx512bw", "avx512vl", "avx512dq"))


def linear_stack(net, h, lin_fn, first=lambda t: t):
    """The MLP's Linear layers through lin_fn, ReLU between; h through first() before."""
    h = first(h)
    lin = [m for m in net if isinstance(m, nn.Linear)]
    for i, m in enumerate(lin):
        h = lin_fn.apply(h, m.weight, m.bias)
        if i < len(lin) - 1:
            h = torch.relu(h)
    return h


def torch_run(mode, dims, init, x, y, steps, batch, lr, momentum):
    torch.manual_seed(0)
    net = model(dims)
    from safetensors.torch import load_file
    net.load_state_dict(load_file(init))
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum)
    losses = []
    for s in range(steps):
        xb, yb = x[s * batch:(s + 1) * batch], y[s * batch:(s + 1) * batch]
        opt.zero_grad(set_to_none=True)
        if mode == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = nn.functional.cross_entropy(net(xb), yb)
        elif mode == "bf16-emulated":
            loss = nn.functional.cross_entropy(Bf16Grad.apply(linear_stack(net, xb, Bf16Linear, bf16)), yb)
        elif mode == "tf32":
            loss = nn.functional.cross_entropy(linear_stack(net, xb, Tf32Linear), yb)
        else:
            loss = nn.functional.cross_entropy(net(xb), yb)
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    return losses, {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}


def ddptop_run(a, mode, init, tmp):
    rec, ck = os.path.join(tmp, f"{mode}.rec"), os.path.join(tmp, f"ck-{mode}")
    args = [a.ddptop, "run", "-n", "1", "--headless", "--record", rec, "--",
            "--dataset", "fashion-mnist", "--limit", str(a.limit), "--model", "mlp:" + a.model,
            "--batch-size", str(a.batch), "--steps", str(a.steps), "--no-shuffle", "--lr", str(a.lr),
            "--momentum", str(a.momentum), "--eval-every", "0", "--init-from", init, "--ckpt-dir", ck,
            "--precision", mode]
    if a.data_dir:
        args += ["--data-dir", a.data_dir]
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"ddptop --precision {mode} exited {r.returncode}:\n{r.stdout[-3000:]}")
    out = os.path.join(tmp, f"{mode}.jsonl")
    subprocess.run([a.ddptop, "export", rec, "--jsonl", out], check=True, stdout=subprocess.DEVNULL)
    losses, hello = {}, None
    with open(out) as f:
        for line in f:
            m = json.loads(line)
            if m.get("k") == "step" and m.get("r") == 0:
                losses[m["step"]] = m["loss"]
            if m.get("k") == "hello":
                hello = m
    if hello is None or hello.get("precision") != mode:
        sys.exit(f"ddptop --precision {mode}: the hello says precision {hello and hello.get('precision')!r}")
    from safetensors.numpy import load_file
    return [losses[s] for s in sorted(losses)], load_file(os.path.join(ck, "latest", "model.safetensors"))


def rel(a, b):
    return max(float(np.max(np.abs(a[k].astype(np.float64) - b[k]))) / max(float(np.max(np.abs(b[k]))), 1e-12)
               for k in b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ddptop", default=os.path.join(ROOT, "build", "ddptop"))
    ap.add_argument("--data-dir", default="")
    ap.add_argument("--model", default="784,256,256,10")
    ap.add_argument("--limit", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--modes", default="fp32,bf16,tf32")
    ap.add_argument("--verbose", action="store_true", help="print the per-step differences")
    ap.add_argument("--check", action="store_true", help="exit 1 unless every mode is within its tolerance")
    a = ap.parse_args()
    torch.set_num_threads(1)
    dims = [int(v) for v in a.model.split(",")]
    x, y = fashion(a.data_dir or "/usr/share/datasets/fashion-mnist", a.limit)
    fails = []
    with tempfile.TemporaryDirectory(prefix="ddptop-prec-") as tmp:
        init = os.path.join(tmp, "init.safetensors")
        torch.manual_seed(0)
        from safetensors.torch import save_file
        save_file({k: v.contiguous() for k, v in model(dims).state_dict().items()}, init, metadata={"format": "pt"})
        t32, w32 = torch_run("fp32", dims, init, x, y, a.steps, a.batch, a.lr, a.momentum)
        print(f"torch {torch.__version__}; MLP {a.model}, batch {a.batch}, {a.steps} steps, SGD lr {a.lr} "
              f"momentum {a.momentum}; torch fp32 loss {t32[0]:.4f} -> {t32[-1]:.4f}")
        for mode in a.modes.split(","):
            ref = mode
            if mode == "bf16" and not onednn_bf16():
                ref = "bf16-emulated"
                print("bf16: this CPU has no AVX-512 BW/VL/DQ, so torch 1.13's autocast GEMMs do not run in oneDNN "
                      "(some of ATen's own sum in bf16): the reference is autocast's rules emulated in torch")
            tl, tw = (t32, w32) if mode == "fp32" else torch_run(ref, dims, init, x, y, a.steps, a.batch, a.lr,
                                                                  a.momentum)
            dl, dw = ddptop_run(a, mode, init, tmp)
            if len(dl) != a.steps:
                sys.exit(f"ddptop --precision {mode}: {len(dl)} step losses recorded, want {a.steps}")
            d = [abs(p - q) for p, q in zip(dl, tl)]
            scale = [abs(p - q) for p, q in zip(tl, t32)]
            dd = [abs(p - q) for p, q in zip(dl, t32)]
            wr, wscale = rel(dw, tw), rel(tw, w32)
            if a.verbose:
                print(f"  {mode} |ddptop - torch {mode}| per step: " + " ".join(f"{v:.1e}" for v in d))
                print(f"  {mode} |torch {mode} - torch fp32| per step: " + " ".join(f"{v:.1e}" for v in scale))
            print(f"{mode}: per-step loss |ddptop - torch {mode}| max {max(d):.3g} (step 1 {d[0]:.3g}); "
                  f"|torch {mode} - torch fp32| max {max(scale):.3g}; |ddptop {mode} - torch fp32| max {max(dd):.3g}; "
                  f"final weights rel. diff vs torch {mode} {wr:.3g} (torch {mode} vs fp32 {wscale:.3g}); "
                  f"tolerance loss {TOL_LOSS[mode]:g}, weights {TOL_W[mode]:g}")
            if max(d) > TOL_LOSS[mode]:
                fails.append(f"{mode}: loss differs from torch by {max(d):.3g} > {TOL_LOSS[mode]:g}")
            if wr > TOL_W[mode]:
                fails.append(f"{mode}: final weights differ from torch by {wr:.3g} > {TOL_W[mode]:g}")
            # were this mode FP32 in disguise, ddptop would sit on torch's FP32
            # curve: the gap to it must be well beyond the tolerance
            if mode != "fp32" and max(dd) < 5 * TOL_LOSS[mode]:
                fails.append(f"{mode}: ddptop's losses are within {max(dd):.3g} of FP32's, "
                             f"the check cannot tell {mode} from fp32")
    for f in fails:
        print("FAIL:", f)
    if a.check and fails:
        sys.exit(1)


if __name__ == "__main__":
    main()
