#!/usr/bin/env python3
"""make bench-torch: the lesson script (examples/ddp_basics.py) under ddptop
with the torch adapter against the same script launched the way torchrun
launches it, side by side in one run, alternating, so that the ratios share
the machine's mood.

  torchrun  each rank started with torchrun's environment (RANK, LOCAL_RANK,
            WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, MASTER_ADDR,
            MASTER_PORT, TORCHELASTIC_*, OMP_NUM_THREADS=1), no adapter, no
            ddptop (Debian's torchrun itself is broken under Python 3.11,
            docs/BENCHMARKS.md)
  ddptop    `ddptop run -n 2 --headless -- SCRIPT ARGS` with the adapter as
            every rank (DDPTOP_WORKER=workers/python/ddptop-worker-py),
            telemetry on: the frontend consumes every step, coll and beat

Each rank of the script prints "first step done at unix T" and its steps/s
after the first step; reported are the medians over the repetitions of
rank 0's steps/s, of the time from launch (just before the first
process is started) to the slowest rank's first step, of the ranks'
CPU time per step and of their main threads' alone (the script's thread,
where the adapter's work is: Gloo's loop thread spins in epoll_wait while
its rank waits for the other, hundreds of us a step that follow the
ranks' timing, not any work; docs/BENCHMARKS.md),
and the targets:
at most 2% slower, at most 0.3 s more to the first step; beside the
medians, the mean of the per-rep slowdowns (each rep runs both modes back
to back) with its 95% confidence interval. --instructions also counts, with
valgrind's callgrind, the script's thread's instructions a step (world 1,
STEPS_A and STEPS_B steps, the difference over the steps between, so start-up
cancels): the script bare against the script under ddptop with the adapter.
Instruction counts do not move with the machine's load, as steps/s do on a
shared VM (+-20% between runs); they take ~20 minutes.
--no-inject adds `ddptop run --no-inject` (ddptop's launcher and frontend,
the script bare) as a mode: what ddptop costs a script without the adapter.
--baseline DIR adds a third mode, ddptop with the adapter in DIR (a
workers/python folder of another commit: `git archive REV workers/python |
tar -x -C /tmp/base`, then --baseline /tmp/base/workers/python), so a
change to the adapter is measured before/after in one run. --py-hook adds
ddptop with the adapter's Python comm hook forced (DDPTOP_PY_HOOK=python)
as a mode, against the default (the C++ hook where it is built), with their
paired differences. Each ddptop mode's rank logs must name the hook it ran.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from common import FMNIST, free_port, machine, median  # noqa: E402

SCRIPT = os.path.join(ROOT, "examples", "ddp_basics.py")
SHIM = os.path.join(ROOT, "workers", "python", "ddptop-worker-py")
LINE = re.compile(r"^rank (\d+) trained (\d+) steps; first step done at unix ([0-9.]+); ([0-9.]+) steps/s after the "
                  r"first; cpu ([0-9.]+) ms per step(?:; main thread ([0-9.]+) ms per step)?", re.M)


HOOK = re.compile(r"DDP comm hook: (C\+\+|Python)")


def results(texts, world, t0, what):
    got = {}
    for text in texts:
        for m in LINE.finditer(text):
            got[int(m[1])] = dict(steps=int(m[2]), first_unix=float(m[3]), steps_per_s=float(m[4]),
                                  cpu_ms=float(m[5]), main_ms=float(m[6] or "nan"))
    if sorted(got) != list(range(world)):
        raise RuntimeError(f"{what}: no throughput line from every rank:\n" + "\n".join(t[-1500:] for t in texts))
    return dict(first_s=max(g["first_unix"] for g in got.values()) - t0, steps_per_s=got[0]["steps_per_s"],
                cpu_ms=sum(g["cpu_ms"] for g in got.values()) / world,
                main_ms=sum(g["main_ms"] for g in got.values()) / world)


# Student's t at 97.5% for 2..30 degrees of freedom (index = df), then ~1.96.
T975 = [0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045,
        2.042]


def paired_ci(xs):
    """Mean of xs and the half-width of its 95% confidence interval."""
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return m, float("inf")
    sd = (sum((x - m) ** 2 for x in xs) / (n - 1)) ** 0.5
    return m, (T975[n - 1] if n - 1 < len(T975) else 1.96) * sd / n ** 0.5


def run_torchrun(py, world, args, tmp, timeout):
    port = free_port()
    logs = [os.path.join(tmp, f"torchrun-{r}.log") for r in range(world)]
    procs = []
    t0 = time.time()
    for r in range(world):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                   GROUP_RANK="0", ROLE_RANK=str(r), ROLE_NAME="default", ROLE_WORLD_SIZE=str(world),
                   GROUP_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1",
                   TORCHELASTIC_RESTART_COUNT="0", TORCHELASTIC_MAX_RESTARTS="0",
                   TORCHELASTIC_RUN_ID="bench", TORCHELASTIC_USE_AGENT_STORE="False")
        with open(logs[r], "wb") as f:
            procs.append(subprocess.Popen([py, SCRIPT] + args, env=env, stdout=f, stderr=subprocess.STDOUT))
    for r, p in enumerate(procs):
        if p.wait(timeout) != 0:
            raise RuntimeError(f"torchrun-style rank {r} exited {p.returncode}:\n{open(logs[r]).read()[-2000:]}")
    return results([open(l).read() for l in logs], world, t0, "torchrun")


def run_ddptop(ddptop, py, world, args, tmp, timeout, n, shim=SHIM, py_hook=False, bare=False):
    logs = os.path.join(tmp, f"ddptop-logs-{n}-{len(os.listdir(tmp))}")
    env = dict(os.environ, DDPTOP_WORKER=shim, DDPTOP_PYTHON=py, DDPTOP_CKPT_DIR=os.path.join(tmp, "ck"),
               DDPTOP_PY_HOOK="python" if py_hook else "")
    cmd = [ddptop, "run", "-n", str(world), "--headless", "--log-dir", logs, "--"] + [SCRIPT] + args
    if bare:        # ddptop's launcher and frontend, the script without the adapter
        cmd = [ddptop, "run", "-n", str(world), "--headless", "--no-inject", "--python", py, "--log-dir", logs,
               SCRIPT] + args
    t0 = time.time()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"ddptop exited {p.returncode}:\n{p.stdout[-3000:]}")
    texts = [open(os.path.join(logs, f)).read() for f in sorted(os.listdir(logs)) if f.startswith("rank-")]
    res = results(texts, world, t0, "ddptop")
    if bare:
        return res
    hooks = {m[1] for t in texts for m in HOOK.finditer(t)}
    if len(hooks) != 1:
        raise RuntimeError(f"ddptop: the ranks' logs name the comm hooks {sorted(hooks)}, not one")
    res["hook"] = hooks.pop()
    return res


def instructions(ddptop, py, args, agree, steps_a=100, steps_b=400):
    """callgrind: the script's thread's instructions per step, bare and
    under ddptop with the adapter (world 1): {"bare": Ir, "ddptop": Ir}.
    agree: the steps between two steering agreements, as the timed ddptop
    runs had them (DDPTOP_AGREE_STEPS; under valgrind every step would
    agree, each agreement's work counted at every step)."""
    if not shutil.which("valgrind"):
        raise RuntimeError("--instructions needs valgrind")
    tmp = tempfile.mkdtemp(prefix="ddptop-bench-ir-")
    wrap = os.path.join(tmp, "vg-python")
    with open(wrap, "w") as f:     # ddptop's options check runs the interpreter without RANK: not under valgrind
        f.write("#!/bin/sh\n[ -n \"$RANK\" ] && exec valgrind --tool=callgrind --separate-threads=yes "
                f"--callgrind-out-file=\"$CG_OUT.%p\" {py} \"$@\"\nexec {py} \"$@\"\n")
    os.chmod(wrap, 0o755)
    out = {}
    try:
        for mode in ("bare", "ddptop"):
            ir = {}
            for n in (steps_a, steps_b):
                cg = os.path.join(tmp, f"cg-{mode}-{n}")
                env = dict(os.environ, CG_OUT=cg)
                run_args = args + ["--steps", str(n), "--out", os.path.join(tmp, "m.pt")]
                if mode == "bare":
                    env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1",
                               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
                    p = subprocess.run([wrap, SCRIPT] + run_args, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True, timeout=3600)
                else:
                    env.update(DDPTOP_WORKER=SHIM, DDPTOP_PYTHON=py, DDPTOP_AGREE_STEPS=str(agree))
                    p = subprocess.run([ddptop, "run", "-n", "1", "--headless", "--timeout", "3000", "--python", wrap,
                                        "--log-dir", os.path.join(tmp, f"logs-{n}"), SCRIPT] + run_args, env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=3600)
                if p.returncode != 0:
                    raise RuntimeError(f"--instructions, {mode} {n} steps: exit {p.returncode}\n{p.stdout[-2000:]}")
                main = [f for f in os.listdir(tmp) if f.startswith(f"cg-{mode}-{n}.") and f.endswith("-01")]
                if len(main) != 1:
                    raise RuntimeError(f"--instructions, {mode} {n} steps: no main thread's profile ({main})")
                with open(os.path.join(tmp, main[0])) as f:
                    tot = next(int(ln.split()[1]) for ln in f if ln.startswith(("summary:", "totals:")))
                ir[n] = tot
            out[mode] = (ir[steps_b] - ir[steps_a]) / (steps_b - steps_a)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ddptop", default=os.path.join(ROOT, "build", "ddptop"))
    ap.add_argument("--py", default="/usr/bin/python3", help="python with torch, pyzmq and msgpack")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--limit", type=int, default=8192)
    ap.add_argument("--instructions", action="store_true",
                    help="also the script's thread's instructions a step, bare and with the adapter (callgrind)")
    ap.add_argument("--no-inject", action="store_true", help="also `ddptop run --no-inject` as a mode")
    ap.add_argument("--baseline", default="", help="a workers/python folder: ddptop with that adapter as a third mode")
    ap.add_argument("--py-hook", action="store_true", help="ddptop with the Python comm hook forced as a mode")
    ap.add_argument("--json", default="", help="also write the raw figures here")
    a = ap.parse_args()
    if a.reps < 3:
        sys.exit("bench-torch: --reps must be at least 3 (medians of alternating runs)")
    r = subprocess.run([a.py, "-c", "import torch, zmq, msgpack; print(torch.__version__)"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"bench-torch: {a.py} cannot import torch, zmq and msgpack: {r.stderr.strip().splitlines()[-1:]}")
    tv = r.stdout.strip()
    data = "fashion-mnist" if os.path.exists(f"{FMNIST}/train-images-idx3-ubyte.gz") else "synthetic"
    args = ["--data", data, "--limit", str(a.limit), "--epochs", "1000", "--steps", str(a.steps),
            "--batch-size", "64"]
    base_shim = os.path.join(os.path.abspath(a.baseline), "ddptop-worker-py") if a.baseline else ""
    if base_shim and not os.access(base_shim, os.X_OK):
        sys.exit(f"bench-torch: --baseline {a.baseline}: no ddptop-worker-py there (a workers/python folder)")
    tmp = tempfile.mkdtemp(prefix="ddptop-bench-torch-")
    mach = machine()
    runs = {"torchrun": [], "ddptop": []}
    if base_shim:
        runs = {"torchrun": [], "baseline": [], "ddptop": []}
    if a.py_hook:
        runs = dict(list(runs.items())[:-1] + [("pyhook", []), ("ddptop", [])])
    if a.no_inject:
        runs = dict(list(runs.items())[:-1] + [("noinject", []), ("ddptop", [])])
    try:
        for rep in range(a.reps):
            order = list(runs) if rep % 2 == 0 else list(reversed(runs))
            for mode in order:
                out = os.path.join(tmp, "out.pt")
                if mode == "torchrun":
                    res = run_torchrun(a.py, a.world, args + ["--out", out], tmp, 600)
                else:
                    res = run_ddptop(a.ddptop, a.py, a.world, args + ["--out", out], tmp, 600, rep,
                                     base_shim if mode == "baseline" else SHIM, py_hook=mode == "pyhook",
                                     bare=mode == "noinject")
                runs[mode].append(res)
                hook = f"  ({res['hook']} hook)" if "hook" in res else ""
                print(f"  rep {rep + 1} {mode:9s} first step {res['first_s']:6.3f} s  {res['steps_per_s']:7.1f} steps/s"
                      f"  cpu {res['cpu_ms']:.3f} ms/step{hook}", flush=True)
        # the agreement's period at the timed runs' speed (steer.py: AGREE_S = 0.05 s of training, 1..64 steps)
        agree = max(1, min(64, int(0.05 * median([r["steps_per_s"] for r in runs["ddptop"]]))))
        bd = instructions(a.ddptop, a.py, args, agree) if a.instructions else None
        if bd:
            bd["agree"] = agree
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = {m: {k: median([r[k] for r in v]) for k in v[0] if k != "hook"} for m, v in runs.items()}
    t, d = med["torchrun"], med["ddptop"]
    slower = 1 - d["steps_per_s"] / t["steps_per_s"]
    later = d["first_s"] - t["first_s"]
    print()
    print(f"machine: {mach['nproc']} cores, {mach['cpu']}, load {mach['load']:.1f} at the start, {mach['date']}; "
          f"torch {tv}")
    print(f"job: examples/ddp_basics.py --data {data} --limit {a.limit} --steps {a.steps} --batch-size 64, "
          f"{a.world} ranks, Gloo, CPU; medians of {a.reps}, alternating")
    print()
    extra = [m for m in ("baseline", "pyhook", "noinject") if m in med]
    names = {"baseline": "ddptop + baseline adapter", "pyhook": "ddptop + Python hook",
             "noinject": "ddptop --no-inject"}
    bh = "".join(f" {names[m]} | difference |" for m in extra)
    bs = "---:|---:|" * len(extra)
    print(f"| | torchrun-style |{bh} ddptop + adapter ({runs['ddptop'][0]['hook']} hook) | difference |")
    print(f"|---|---:|{bs}---:|---:|")

    def row(name, key, fmt, diff):
        cells = [fmt.format(t[key])]
        for m in [med[x] for x in extra] + [d]:
            cells += [fmt.format(m[key]), diff(m)]
        print(f"| {name} | " + " | ".join(cells) + " |")
    row("launch to first step (s)", "first_s", "{:.3f}", lambda m: f"{m['first_s'] - t['first_s']:+.3f} s")
    row("steps/s after the first (rank 0)", "steps_per_s", "{:.1f}",
        lambda m: f"{-100 * (1 - m['steps_per_s'] / t['steps_per_s']):+.1f}%")
    row("CPU per step, per rank (ms)", "cpu_ms", "{:.3f}", lambda m: f"{1e3 * (m['cpu_ms'] - t['cpu_ms']):+.0f} us")
    # the script's thread alone: where the adapter's work is, without Gloo's
    # threads, whose CPU follows how long a rank waits (docs/BENCHMARKS.md)
    row("the script's thread's CPU per step, per rank (ms)", "main_ms", "{:.3f}",
        lambda m: f"{1e3 * (m['main_ms'] - t['main_ms']):+.0f} us")
    for mode in runs:
        v = [r["steps_per_s"] for r in runs[mode]]
        f = [r["first_s"] for r in runs[mode]]
        c = [r["cpu_ms"] for r in runs[mode]]
        mt = [r["main_ms"] for r in runs[mode]]
        print(f"{mode}: steps/s {min(v):.1f}..{max(v):.1f}, first step {min(f):.3f}..{max(f):.3f} s, "
              f"CPU per step {min(c):.3f}..{max(c):.3f} ms, the script's thread {min(mt):.3f}..{max(mt):.3f} ms")
    if bd:
        print(f"the script's thread's instructions a step (callgrind, world 1): {bd['bare']:,.0f} bare, "
              f"{bd['ddptop']:,.0f} under ddptop with the adapter: {bd['ddptop'] - bd['bare']:+,.0f} "
              f"({100 * (bd['ddptop'] / bd['bare'] - 1):+.2f}%; an agreement every {bd['agree']} steps, as timed)")
    # Each rep ran both modes back to back: the pairs share the machine's
    # mood, so their ratios vary far less than either mode's steps/s.
    pairs = [1 - dd["steps_per_s"] / tt["steps_per_s"] for tt, dd in zip(runs["torchrun"], runs["ddptop"])]
    pm, ph = paired_ci(pairs)
    print(f"paired (rep by rep): ddptop {100 * pm:+.2f}% slower, 95% interval {100 * (pm - ph):+.2f}%.."
          f"{100 * (pm + ph):+.2f}% over {len(pairs)} pairs")
    for mode in [m for m in runs if m != "torchrun"]:
        d_main = [1e3 * (dd["main_ms"] - tt["main_ms"]) for tt, dd in zip(runs["torchrun"], runs[mode])]
        mm, mh = paired_ci(d_main)
        print(f"paired (rep by rep), {mode} - torchrun-style, the script's thread's CPU per step: "
              f"{', '.join(f'{x:+.0f}' for x in sorted(d_main))} us (mean {mm:+.0f}, 95% interval "
              f"{mm - mh:+.0f}..{mm + mh:+.0f})")
    if "pyhook" in runs:
        cpu = sorted(1e3 * (dd["cpu_ms"] - pp["cpu_ms"]) for pp, dd in zip(runs["pyhook"], runs["ddptop"]))
        sp = [dd["steps_per_s"] / pp["steps_per_s"] - 1 for pp, dd in zip(runs["pyhook"], runs["ddptop"])]
        sm, sh = paired_ci(sp)
        print(f"paired (rep by rep), default hook - Python hook: CPU per step {', '.join(f'{x:+.0f}' for x in cpu)} us "
              f"(median {median(cpu):+.0f}); steps/s {100 * sm:+.2f}%, 95% interval {100 * (sm - sh):+.2f}%.."
              f"{100 * (sm + sh):+.2f}%")
    ok_speed, ok_first = slower <= 0.02, later <= 0.3
    print(f"targets: at most 2% slower: {'met' if ok_speed else 'MISSED'} ({100 * slower:.1f}%); "
          f"at most 0.3 s more to the first step: {'met' if ok_first else 'MISSED'} ({later:+.3f} s)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": mach, "torch": tv, "args": args, "runs": runs, "median": med, "breakdown": bd,
                       "paired_slowdown": {"mean": pm, "ci95_half": ph, "n": len(pairs)}}, f,
                      indent=1)


if __name__ == "__main__":
    main()
