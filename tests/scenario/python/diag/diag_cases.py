"""diag_cases.py CASE — small torch DDP jobs (2 ranks, Gloo, CPU) that go
wrong the ways users' jobs do (issue 30), one function a case. The line of
each bug carries a `# BUG CASE` mark: the tests find the line number there and
check that ddptop's final verdict names it.

    ddptop run -n 2 --headless --json --hang-after 3 --timeout 10 diag_cases.py CASE
"""
import ctypes
import datetime
import os
import queue
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def setup(bn=False):
    # DIAG_PG_TIMEOUT: the process group's timeout in seconds (torch's default, 30 min, unset), so
    # a bare run of a hanging case ends by itself as torch ends it
    secs = os.environ.get("DIAG_PG_TIMEOUT")
    dist.init_process_group("gloo", **({"timeout": datetime.timedelta(seconds=int(secs))} if secs else {}))
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(20, 64), nn.BatchNorm1d(64), nn.Linear(64, 3)) if bn else nn.Linear(20, 3)
    model = DDP(net)
    return dist.get_rank(), model, torch.optim.SGD(model.parameters(), lr=0.1)


def train_step(model, opt):
    loss = model(torch.randn(16, 20)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


def barrier_end():
    rank, model, opt = setup()
    for _ in range(40):
        train_step(model, opt)
    if rank == 0:
        dist.barrier()  # BUG barrier_end
    dist.destroy_process_group()


def barrier_mid():
    rank, model, opt = setup()
    for step in range(40):
        train_step(model, opt)
        if step == 20 and rank == 0:
            dist.barrier()  # BUG barrier_mid


def validate(model):
    model.eval()
    total = 0.0
    for _ in range(3):
        total += float(model(torch.randn(16, 20)).sum())  # BUG eval_rank0
    model.train()
    return total


def eval_rank0():
    rank, model, opt = setup(bn=True)
    for step in range(40):
        train_step(model, opt)
        if step == 20 and rank == 0:
            validate(model)
    dist.destroy_process_group()


def op_desync():
    rank = setup()[0]
    t = torch.ones(10)
    for _ in range(5):
        dist.all_reduce(t)
    if rank == 0:
        dist.broadcast(t, 0)  # BUG op_desync
    else:
        dist.all_reduce(t)
    dist.destroy_process_group()


def accumulate(model, opt, rank):
    """Gradient accumulation whose no_sync() window differs by rank (rank 0
    syncs every 2nd micro-batch, rank 1 every 3rd): the ranks' DDP
    all-reduces pair wrongly, and rank 0 goes on to all-reduces rank 1
    never makes."""
    accum = 2 + rank
    for i in range(24):
        if (i + 1) % accum:
            with model.no_sync():
                model(torch.randn(16, 20)).square().mean().backward()
        else:
            model(torch.randn(16, 20)).square().mean().backward()  # BUG no_sync
            opt.step()
            opt.zero_grad()


def no_sync():
    rank, model, opt = setup()
    accumulate(model, opt, rank)
    dist.barrier()  # BUG no_sync_barrier (every rank done before it leaves)
    dist.destroy_process_group()


def no_sync_exit():
    rank, model, opt = setup()
    accumulate(model, opt, rank)
    dist.destroy_process_group()


def queue_get():
    rank, model, opt = setup()
    q = queue.Queue()
    for step in range(40):
        if step == 10 and rank == 1:
            q.get()  # BUG queue_get
        train_step(model, opt)
    dist.destroy_process_group()


def spin():
    rank, model, opt = setup()
    for step in range(40):
        if step == 10 and rank == 1:
            while time.time() > 0:  # BUG spin
                pass
        train_step(model, opt)
    dist.destroy_process_group()


def sigkill():
    rank, model, opt = setup()
    for step in range(40):
        if step == 30 and rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # BUG sigkill (the OOM killer, say)
        train_step(model, opt)
        time.sleep(0.05)
    dist.destroy_process_group()


def raises():
    rank, model, opt = setup()
    for step in range(40):
        if step == 10 and rank == 1:
            raise ValueError(f"bad batch {step}")  # BUG raises
        train_step(model, opt)
    dist.destroy_process_group()


def gil_hold():
    """Rank 0 blocks in native code that keeps Python's GIL (a C call made
    through ctypes.PyDLL, as a C extension that never releases it, or a
    ProcessGroup's destructor joining a thread that waits for the GIL)
    right after an all-reduce: its heartbeat thread cannot run, so its last
    beat (sent as the all-reduce began) goes stale, while rank 1 waits for
    it in the next all-reduce until Gloo's timeout."""
    rank, model, opt = setup()
    for _ in range(5):
        train_step(model, opt)
    t = torch.ones(10)
    dist.all_reduce(t)  # BUG gil_hold_heard (its last beat)
    if rank == 0:
        ctypes.PyDLL(None).sleep(int(os.environ.get("DIAG_GIL_S", "60")))  # BUG gil_hold
    dist.all_reduce(t)
    dist.destroy_process_group()


if __name__ == "__main__":
    globals()[sys.argv[1]]()
