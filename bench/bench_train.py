#!/usr/bin/env python3
"""make bench: ddptop against real PyTorch DDP on the same job, side by side
in one run, so that the ratios share the machine's mood.

The job: MLP 784-256-256-10, Fashion-MNIST (first --limit samples, x =
pixel/255), batch 64 per rank, 2 ranks over Gloo, one thread per rank, SGD
lr 0.01, the same initial weights (torch's, through --init-from) and the
same DistributedSampler order, no evaluation, no checkpoint. Three ways,
rotated each repetition:

  torch      bench/torch_ddp.py ranks, launched like torchrun (RANK, ...)
  ddptop     ddptop run --headless: the frontend consumes every step/coll message
  ddptop-nt  the same with --no-telemetry: workers send no step/coll/shard/beat

Reported: time from launch to the first step done (slowest rank), steps/s
after the first step (rank 0), final loss (rank 0), and medians over the
repetitions with the ratios; ddptop's per-step breakdown (compute, exposed
communication, the rest) from its workers' own accounting.
"""
import argparse
import json
import os
import subprocess
import sys
import shutil
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import FMNIST, ddptop_job, machine, median, need_torch, torch_job  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ddptop", default="build/ddptop")
    ap.add_argument("--py", default=sys.executable, help="python with torch and safetensors")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--limit", type=int, default=8192)
    ap.add_argument("--json", default="", help="also write the raw figures here")
    ap.add_argument("--ring", action="store_true",
                    help="also run ddptop with DDPTOP_GLOO_ALLREDUCE=ring (Gloo's old ring for every size)")
    a = ap.parse_args()
    tv = need_torch(a.py)
    if not os.path.exists(f"{FMNIST}/train-images-idx3-ubyte.gz"):
        sys.exit(f"bench: Fashion-MNIST not in {FMNIST} (apt-get install dataset-fashion-mnist)")
    tmp = tempfile.mkdtemp(prefix="ddptop-bench-")
    try:
        run_all(a, tv, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_all(a, tv, tmp):
    init = os.path.join(tmp, "init.safetensors")
    subprocess.run([a.py, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_ddp.py"),
                    "--save-init", init], check=True)
    common = ["--batch-size", "64", "--steps", str(a.steps), "--lr", "0.01", "--seed", "0"]
    dd_args = ["--dataset", "fashion-mnist", "--limit", str(a.limit), "--epochs", "1000", "--eval-every", "0",
               "--no-final-ckpt", "--init-from", init, "--ckpt-dir", os.path.join(tmp, "ck")] + common
    th_args = ["--limit", str(a.limit), "--init-from", init] + common

    runs = {"torch": [], "ddptop": [], "ddptop-nt": []}
    if a.ring:
        runs["ddptop-ring"] = []
    order = list(runs)
    for rep in range(a.reps):
        k = rep % len(order)
        for mode in order[k:] + order[:k]:
            if mode == "torch":
                t0, res = torch_job(a.py, 2, th_args)
                r0 = next(r for r in res if r["rank"] == 0)
                runs[mode].append(dict(first_s=max(r["first_step_unix"] for r in res) - t0,
                                       steps_per_s=(r0["steps"] - 1) / r0["secs_after_first"],
                                       loss=r0["final_loss"]))
            else:
                extra = ["--no-telemetry"] if mode == "ddptop-nt" else []
                env = {"DDPTOP_GLOO_ALLREDUCE": "ring"} if mode == "ddptop-ring" else None
                t0, thr, summ, out, fcpu, wall = ddptop_job(a.ddptop, 2, dd_args + extra, env=env)
                if 0 not in thr or 1 not in thr:
                    sys.exit(f"bench: no throughput line from the ranks:\n{out[-2000:]}")
                d = dict(first_s=max(t["first_step_unix"] for t in thr.values()) - t0,
                         steps_per_s=thr[0]["steps_per_s"],
                         loss=summ.get(0, (0, float("nan")))[1] if mode == "ddptop" else float("nan"))
                d.update({k: thr[0][k] for k in ("data_ms", "compute_ms", "comm_ms", "exposed_ms", "opt_ms",
                                                   "step_ms", "telemetry_ms")})
                d["frontend_cpu_s"], d["wall_s"] = fcpu, wall
                d["train_s"] = thr[0]["secs"]
                runs[mode].append(d)
            r = runs[mode][-1]
            print(f"  rep {rep + 1} {mode:10s} first step {r['first_s']:7.3f} s   {r['steps_per_s']:7.1f} steps/s"
                  f"   loss {r['loss']:.4f}", flush=True)

    med = {m: {k: median([r[k] for r in v]) for k in v[0]} for m, v in runs.items()}
    t, d, n = med["torch"], med["ddptop"], med["ddptop-nt"]
    mach = machine()
    print()
    print(f"machine: {mach['nproc']} cores, {mach['cpu']}, {mach['date']}; torch {tv}")
    print(f"job: MLP 784-256-256-10, Fashion-MNIST first {a.limit}, batch 64/rank, 2 ranks, Gloo, "
          f"{a.steps} steps, SGD lr 0.01; medians of {a.reps}")
    print()
    print("| | PyTorch DDP | ddptop | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| launch to first step (s) | {t['first_s']:.3f} | {d['first_s']:.3f} | "
          f"{t['first_s'] / d['first_s']:.1f}x sooner |")
    print(f"| steps/s after the first | {t['steps_per_s']:.1f} | {d['steps_per_s']:.1f} | "
          f"{d['steps_per_s'] / t['steps_per_s']:.2f}x |")
    print(f"| final loss (rank 0) | {t['loss']:.4f} | {d['loss']:.4f} | |")
    print()
    cost = 1 - d["steps_per_s"] / n["steps_per_s"]
    sps_nt = [r["steps_per_s"] for r in runs["ddptop-nt"]]
    sps_d = [r["steps_per_s"] for r in runs["ddptop"]]
    print(f"ddptop steps/s, frontend consuming telemetry: {d['steps_per_s']:.1f} (runs {min(sps_d):.1f}..{max(sps_d):.1f}); "
          f"--no-telemetry: {n['steps_per_s']:.1f} (runs {min(sps_nt):.1f}..{max(sps_nt):.1f}); "
          f"difference of medians {100 * cost:+.1f}%")
    # The direct accounting: what the workers spend sending, and what the
    # frontend process burns beyond its idle loop, as a share of the cores.
    cores = os.cpu_count() or 1
    fe = median([r["frontend_cpu_s"] / r["wall_s"] for r in runs["ddptop"]])
    fe0 = median([r["frontend_cpu_s"] / r["wall_s"] for r in runs["ddptop-nt"]])
    wk = d["telemetry_ms"] * d["steps_per_s"] / 1000.0      # seconds per second, per rank
    share = (max(fe - fe0, 0.0) + 2 * wk) / cores
    print(f"telemetry CPU: workers {1000 * d['telemetry_ms']:.1f} us/step each ({100 * wk:.2f}% of a core each); "
          f"frontend {100 * fe:.2f}% of a core with telemetry, {100 * fe0:.2f}% without; "
          f"together {100 * share:.2f}% of the machine's {cores} cores")
    per = 1000.0 / d["steps_per_s"]
    other = per - d["compute_ms"] - d["exposed_ms"] - d["opt_ms"] - d["data_ms"]
    print(f"ddptop step breakdown (rank 0, ms): {per:.3f} per step = compute {d['compute_ms']:.3f} + "
          f"exposed comm {d['exposed_ms']:.3f} (of {d['comm_ms']:.3f}) + optimizer {d['opt_ms']:.3f} + "
          f"batch gather {d['data_ms']:.3f} + other {other:.3f}")
    if a.ring:
        g = med["ddptop-ring"]
        print(f"with DDPTOP_GLOO_ALLREDUCE=ring: {g['steps_per_s']:.1f} steps/s "
              f"({g['steps_per_s'] / t['steps_per_s']:.2f}x PyTorch), exposed comm {g['exposed_ms']:.3f} ms/step")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": mach, "torch": tv, "steps": a.steps, "reps": a.reps, "runs": runs, "median": med},
                      f, indent=1)


if __name__ == "__main__":
    main()
