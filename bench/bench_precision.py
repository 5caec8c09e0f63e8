#!/usr/bin/env python3
"""make bench-precision: the CPU trainer's steps/s in --precision fp32, bf16
and tf32, side by side in one run (the modes rotated each repetition, so the
ratios share the machine's mood).

The job is make bench-train's: MLP 784-256-256-10, Fashion-MNIST (first
--limit samples), batch 64 per rank, 2 ranks over Gloo, one BLAS thread per
rank, SGD lr 0.01, no evaluation, no checkpoint. On the CPU bf16 and tf32 are
the reference arithmetic for the GPU (inputs rounded, then the same FP32
sgemm): they cost the rounding passes and buy no speed. Reported: medians
over the repetitions of steps/s after the first step and of the workers' own
compute ms per step (forward + backward), rank 0.
"""
import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import FMNIST, ddptop_job, machine, median  # noqa: E402

MODES = ("fp32", "bf16", "tf32")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ddptop", default="build/ddptop")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--limit", type=int, default=8192)
    a = ap.parse_args()
    dataset = ["--dataset", "fashion-mnist", "--limit", str(a.limit)]
    if not os.path.exists(f"{FMNIST}/train-images-idx3-ubyte.gz"):
        dataset = ["--dataset", "synthetic", "--synthetic-size", str(a.limit)]
    tmp = tempfile.mkdtemp(prefix="ddptop-bench-prec-")
    runs = {m: [] for m in MODES}
    try:
        args = dataset + ["--model", "mlp:784,256,256,10", "--batch-size", "64", "--steps", str(a.steps), "--lr", "0.01",
                          "--epochs", "1000", "--eval-every", "0", "--no-final-ckpt", "--ckpt-dir",
                          os.path.join(tmp, "ck")]
        for rep in range(a.reps):
            k = rep % len(MODES)
            for mode in MODES[k:] + MODES[:k]:
                _, thr, _, out, _, _ = ddptop_job(a.ddptop, 2, args + ["--precision", mode],
                                                  env={"OPENBLAS_NUM_THREADS": "1"})
                if 0 not in thr:
                    sys.exit(f"bench-precision: no throughput line from rank 0:\n{out[-2000:]}")
                runs[mode].append(thr[0])
                print(f"  rep {rep + 1} {mode}: {thr[0]['steps_per_s']:7.1f} steps/s, "
                      f"compute {thr[0]['compute_ms']:.3f} ms/step", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    mach = machine()
    med = {m: {k: median([r[k] for r in v]) for k in ("steps_per_s", "compute_ms")} for m, v in runs.items()}
    print()
    print(f"machine: {mach['nproc']} cores, {mach['cpu']}, load {mach['load']:.1f}, {mach['date']}")
    print(f"job: MLP 784-256-256-10, {dataset[1]}, batch 64/rank, 2 ranks, Gloo, {a.steps} steps; medians of {a.reps}")
    print()
    print("| --precision | steps/s | compute ms/step | vs fp32 |")
    print("|---|---:|---:|---:|")
    for m in MODES:
        print(f"| {m} | {med[m]['steps_per_s']:.1f} | {med[m]['compute_ms']:.3f} | "
              f"{med[m]['steps_per_s'] / med['fp32']['steps_per_s']:.2f}x |")


if __name__ == "__main__":
    main()
