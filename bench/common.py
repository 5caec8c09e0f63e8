"""Shared by bench/bench_train.py and bench/check_torch.py: launching the
PyTorch DDP reference ranks and ddptop jobs, and reading what they report."""
import datetime
import json
import os
import platform
import re
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FMNIST = "/usr/share/datasets/fashion-mnist"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def torch_job(py, world, args, timeout=600):
    """Run bench/torch_ddp.py as `world` ranks, launched as torchrun's static
    launch does. Returns (launch unix time, [per-rank result dicts])."""
    for attempt in (0, 1):
        try:
            return _torch_job_once(py, world, args, timeout)
        except subprocess.TimeoutExpired as e:
            # the reference, not what is tested: torch 1.13 can deadlock as a rank exits
            # (the main thread, holding the GIL, joins a Gloo worker thread that waits for
            # the GIL to free a tensor; gdb on a rank hung so, 2026-12-02)
            if attempt:
                raise
            print(f"torch reference timed out ({e.timeout:.0f} s); its ranks killed, once more", file=sys.stderr)


def _torch_job_once(py, world, args, timeout):
    port = free_port()
    procs = []
    t0 = time.time()
    for r in range(world):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world),
                   LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        procs.append(subprocess.Popen([py, os.path.join(HERE, "torch_ddp.py")] + list(args), env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    res = []
    try:
        outs = [p.communicate(timeout=timeout) for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
            p.wait()
        raise
    for r, (p, (out, err)) in enumerate(zip(procs, outs)):
        if p.returncode != 0:
            raise RuntimeError(f"torch rank {r} exited {p.returncode}: {err.strip()[-2000:]}")
        line = [l for l in out.splitlines() if l.startswith("{")][-1]
        res.append(json.loads(line))
    return t0, res


THROUGHPUT = re.compile(r"r(\d+) throughput: (\d+) steps in ([0-9.]+) s after the first \(([0-9.]+) steps/s\); "
                        r"first step done at unix ([0-9.]+); per step: data ([0-9.]+) ms, compute ([0-9.]+) ms, "
                        r"comm ([0-9.]+) ms \(exposed ([0-9.]+)\), optimizer ([0-9.]+) ms, step ([0-9.]+) ms, "
                        r"telemetry ([0-9.]+) ms")
SUMMARY = re.compile(r"^rank (\d+): exit (\d+), step (\d+), loss ([-0-9.naif]+)")


def ddptop_job(ddptop, nproc, args, env=None, timeout=600, retries=1):
    """Run `ddptop run -n nproc --headless -- args`. Returns (launch unix
    time, {rank: throughput dict}, {rank: (step, loss)}, output, CPU seconds
    the frontend process used, wall seconds). A run that fails is said on
    stderr and tried again `retries` times."""
    e = dict(os.environ, **(env or {}))
    for attempt in range(retries + 1):
        t0 = time.time()
        p = subprocess.Popen([ddptop, "run", "-n", str(nproc), "--headless", "--"] + list(args), env=e,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # The frontend's own CPU time (its children, the workers, are not in
        # /proc/PID/stat's utime/stime), sampled until it exits.
        chunks, cpu = [], 0.0
        import threading
        reader = threading.Thread(target=lambda: chunks.append(p.stdout.read()))
        reader.start()
        tick = os.sysconf("SC_CLK_TCK")
        while p.poll() is None and time.time() - t0 < timeout:
            try:
                with open(f"/proc/{p.pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                cpu = (int(fields[11]) + int(fields[12])) / tick
            except (OSError, IndexError, ValueError):
                pass
            time.sleep(0.02)
        if p.poll() is None:
            p.kill()
        p.wait()
        reader.join()
        p.stdout = "".join(chunks)
        p.frontend_cpu_s = cpu
        p.wall_s = time.time() - t0
        if p.returncode == 0:
            break
        last = [l for l in p.stdout.splitlines() if l.strip()][-1:]
        print(f"  (ddptop exited {p.returncode}: {last}; {'retrying' if attempt < retries else 'giving up'})",
              file=sys.stderr, flush=True)
    if p.returncode != 0:
        raise RuntimeError(f"ddptop exited {p.returncode}:\n{p.stdout[-3000:]}")
    thr, summ = {}, {}
    for line in p.stdout.splitlines():
        m = THROUGHPUT.search(line)
        if m:
            g = m.groups()
            thr[int(g[0])] = dict(steps=int(g[1]), secs=float(g[2]), steps_per_s=float(g[3]),
                                  first_step_unix=float(g[4]), data_ms=float(g[5]), compute_ms=float(g[6]),
                                  comm_ms=float(g[7]), exposed_ms=float(g[8]), opt_ms=float(g[9]),
                                  step_ms=float(g[10]), telemetry_ms=float(g[11]))
        m = SUMMARY.match(line)
        if m:
            summ[int(m.group(1))] = (int(m.group(3)), float(m.group(4)))
    return t0, thr, summ, p.stdout, p.frontend_cpu_s, p.wall_s


def machine():
    """The machine, for the figures: cores, CPU model, kernel, load, date."""
    model = "?"
    try:
        for line in subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(), "load": os.getloadavg()[0],
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def need_torch(py):
    r = subprocess.run([py, "-c", "import torch, safetensors; print(torch.__version__)"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"{py} cannot import torch and safetensors: {r.stderr.strip().splitlines()[-1:]}")
    return r.stdout.strip()
