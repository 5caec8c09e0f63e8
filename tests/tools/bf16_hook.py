#!/usr/bin/env python3
"""torch's bf16_compress_hook on the gradients tool_bf16_reduce reduced,
compared bit for bit (tests/scenario/train/t_grad_bf16.sh).

  bf16_hook.py gen DIR WORLD N SEED   write DIR/grad-r.f32: float32 gradients
                                      of mixed signs, spread over 10 decades
  bf16_hook.py check DIR WORLD N      run torch's own bf16_compress_hook
                                      (torch.distributed.algorithms.
                                      ddp_comm_hooks.default_hooks) on every
                                      rank's bucket, the all-reduce SUM done
                                      in bf16 in rank order (torch_ddp.bf16_sum),
                                      and compare with DIR/out-r.f32

Several commands may be joined by "+" (one torch import for all): each
check's report goes to DIR/check.out; the exit status is the worst.

check prints the elements that differ from the rank-order result and the
largest difference in bf16 ulps, and exits 1 when (a) the ranks' results
differ from one another, or (b) an element equals none of the hook's results
with the partial sums taken in ring order from some rank (either direction)
— the orders a ring all-reduce may take; with --exact, when any element
differs from the rank-order result.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import torch_ddp  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: E402


def gen(d, world, n, seed):
    rng = np.random.default_rng(seed)
    for r in range(world):
        g = rng.standard_normal(n) * 10.0 ** rng.uniform(-8, 2, n)
        g.astype(np.float32).tofile(f"{d}/grad-{r}.f32")


class Group:
    def __init__(self, world):
        self.world = world

    def size(self):
        return self.world


class Bucket:
    def __init__(self, t):
        self.t = t

    def buffer(self):
        return self.t


def hook_results(grads, order):
    """Every rank's bucket through bf16_compress_hook, the all-reduce summing
    the compressed tensors in `order` (a list of ranks)."""
    world = len(grads)
    sent, futs = [], []

    def all_reduce(tensor, group=None, async_op=False):
        sent.append(tensor)
        f = torch.futures.Future()
        futs.append(f)

        class Work:
            def get_future(self):
                return f
        return Work()

    real = default_hooks.dist.all_reduce
    default_hooks.dist.all_reduce = all_reduce
    try:
        outs = [default_hooks.bf16_compress_hook(Group(world), Bucket(torch.from_numpy(g.copy()))) for g in grads]
    finally:
        default_hooks.dist.all_reduce = real
    total = torch_ddp.bf16_sum([sent[r] for r in order])
    for f in futs:
        f.set_result([total.clone()])
    return [o.wait().numpy() for o in outs]


def ulps(a, b):
    """|a - b| in bf16 ulps of the larger (a, b are bf16 values as float32)."""
    m = np.maximum(np.abs(a), np.abs(b))
    e = np.floor(np.log2(np.where(m > 0, m, 1.0)))
    return np.abs(a.astype(np.float64) - b) / 2.0 ** (e - 7)


def check(d, world, n, exact):
    grads = [np.fromfile(f"{d}/grad-{r}.f32", dtype=np.float32, count=n) for r in range(world)]
    outs = [np.fromfile(f"{d}/out-{r}.f32", dtype=np.float32, count=n) for r in range(world)]
    bad = 0
    for r in range(1, world):
        if not np.array_equal(outs[r].view(np.uint32), outs[0].view(np.uint32)):
            print(f"rank {r}'s result differs from rank 0's")
            bad = 1
    ref = hook_results(grads, list(range(world)))[0]
    got = outs[0]
    diff = got.view(np.uint32) != ref.view(np.uint32)
    nd = int(diff.sum())
    worst = float(ulps(got[diff], ref[diff]).max()) if nd else 0.0
    # the same, in ulps of the largest addend (cancellation makes a result
    # small and its ulp with it; the partial sums' roundings are of the addends' size)
    worst_addend = 0.0
    if nd:
        big = np.max([np.abs(g.astype(np.float64)) for g in grads], axis=0)[diff] / world
        worst_addend = float((np.abs(got[diff].astype(np.float64) - ref[diff]) /
                              2.0 ** (np.floor(np.log2(big)) - 7)).max())
    exact_sum = np.sum([g.astype(np.float64) for g in grads], axis=0) / world
    once = torch.from_numpy(exact_sum.astype(np.float32)).to(torch.bfloat16).float().numpy()
    shows = int((once.view(np.uint32) != ref.view(np.uint32)).sum())
    print(f"{world} ranks, {n} elements: {nd} differ from the hook's rank-order sum "
          f"(largest {worst:.3g} bf16 ulps of the result, {worst_addend:.3g} of the largest addend); one rounding of the exact mean would differ at {shows}")
    if shows == 0:
        print("the data do not tell one rounding from many: the check proves nothing")
        bad = 1
    if nd and exact:
        bad = 1
    if nd:
        orders = [[(s + k * dr) % world for k in range(world)] for s in range(world) for dr in (1, -1)]
        ok = np.zeros(n, dtype=bool)
        for o in orders:
            ok |= got.view(np.uint32) == hook_results(grads, o)[0].view(np.uint32)
        if not ok.all():
            print(f"{int((~ok).sum())} elements equal the hook's result in no ring order")
            bad = 1
        else:
            print("every element is the hook's result with the partial sums in some ring order")
    return bad


def run_one(a):
    if len(a) >= 5 and a[0] == "gen":
        gen(a[1], int(a[2]), int(a[3]), int(a[4]))
        return 0
    if len(a) >= 4 and a[0] == "check":
        with open(f"{a[1]}/check.out", "w") as out:
            saved, sys.stdout = sys.stdout, out
            try:
                return check(a[1], int(a[2]), int(a[3]), "--exact" in a[4:])
            finally:
                sys.stdout = saved
    print(__doc__.strip().splitlines()[2], file=sys.stderr)
    return 2


def main():
    cmds, cur = [], []
    for x in sys.argv[1:] + ["+"]:
        if x == "+":
            cmds.append(cur)
            cur = []
        else:
            cur.append(x)
    return max(run_one(c) for c in cmds if c) if any(cmds) else run_one([])


if __name__ == "__main__":
    sys.exit(main())
