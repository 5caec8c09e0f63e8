#!/usr/bin/env bash
# t_py_step_engine.sh — the adapter's C++ step engine (_steps.cpp: a step's
# bookkeeping and its coll and step messages encoded in C++) says exactly
# what the Python path says. One deterministic script (fixed seeds, two DDP
# buckets, gradient accumulation of two backwards a step, an LBFGS phase
# whose step evaluates its closure up to 5 times, a validation loader, a
# DistributedSampler with set_epoch) runs twice with 2 ranks: as is (the
# C++ comm hook and the engine from the second step on) and with
# DDPTOP_PY_HOOK=python (everything in Python). Every step and coll message
# of both ranks must agree on every field that is not a time (epoch, step,
# loss, lr, samples, drops; seq, op, bucket, step, bytes) and carry the same
# keys in the same order; the times must be sane (every ms >= 0, each part
# of a step within the step); the losses must be the ones the script prints.
# (A bucket all-reduced inside an optimizer step, as LBFGS's closure does,
# is that step's on both paths.)
. tests/lib.sh
. tests/lib_py.sh
[ -f workers/python/ddptop/_hook.torch-version ] || skip "skip: the C++ hook is not built for this torch"
cat >"$TMP/eng.py" <<'PYEOF'
import torch, torch.nn as nn, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
ds = TensorDataset(torch.randn(512, 20, generator=g), torch.randint(0, 3, (512,), generator=g))
val = TensorDataset(torch.randn(64, 20, generator=g), torch.randint(0, 3, (64,), generator=g))
model = DDP(nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3)), bucket_cap_mb=0.004)
sampler = DistributedSampler(ds, shuffle=True, seed=3)
loader = DataLoader(ds, batch_size=16, sampler=sampler)
vloader = DataLoader(val, batch_size=32, sampler=DistributedSampler(val, shuffle=False))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
lf = nn.CrossEntropyLoss()
step = 0
for epoch in range(2):
    sampler.set_epoch(epoch)
    it = iter(loader)
    for x, y in it:
        x2, y2 = next(it, (x, y))
        opt.zero_grad()
        l1 = lf(model(x), y) / 2
        l1.backward()
        l2 = lf(model(x2), y2) / 2
        l2.backward()
        opt.step()
        step += 1
        print(f"rank {rank} step {step} loss {(l1.item() + l2.item())!r}", flush=True)
    with torch.no_grad():
        for vx, vy in vloader:
            model(vx)
lb = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=5)
xb, yb = ds.tensors[0][:32], ds.tensors[1][:32]
def closure():
    lb.zero_grad()
    loss = lf(model(xb), yb)
    loss.backward()
    return loss
for k in range(3):
    loss = lb.step(closure)
    step += 1
    print(f"rank {rank} step {step} loss {loss.item()!r}", flush=True)
dist.destroy_process_group()
PYEOF
py_rec cxx "$TMP/eng.py"
[ "$(rc_of cxx)" = 0 ] || { tail -5 "$TMP"/cxx/logs/*; die "C++ path: exit $(rc_of cxx)"; }
DDPTOP_PY_HOOK=python py_rec py "$TMP/eng.py"
[ "$(rc_of py)" = 0 ] || { tail -5 "$TMP"/py/logs/*; die "Python path: exit $(rc_of py)"; }
grep -q 'steps kept in C++ from step 2' "$TMP/cxx/logs/rank-0.log" || die "the C++ run did not use the step engine: $(grep ddptop-py "$TMP/cxx/logs/rank-0.log")"
grep -q 'steps kept in C++' "$TMP/py/logs/rank-0.log" && die "DDPTOP_PY_HOOK=python used the step engine"
"$PY" - "$TMP" <<'PYEOF' || exit 1
import json, math, re, sys
d = sys.argv[1]
def msgs(mode, kind, r):
    return [m for m in (json.loads(l) for l in open(f"{d}/{mode}/rec.jsonl")) if m.get("k") == kind and m.get("r") == r]
fail = []
for r in (0, 1):
    for kind, same in (("step", ("epoch", "step", "loss", "lr", "samples", "drops")),
                       ("coll", ("seq", "op", "bucket", "step", "bytes"))):
        a, b = msgs("cxx", kind, r), msgs("py", kind, r)
        if len(a) != len(b) or not a:
            fail.append(f"rank {r}: {len(a)} {kind} messages in C++, {len(b)} in Python")
            continue
        for x, y in zip(a, b):
            kx = [k for k in x if not k.startswith("_")]
            ky = [k for k in y if not k.startswith("_")]
            if kx != ky:
                fail.append(f"rank {r} {kind}: keys {kx} in C++, {ky} in Python")
                break
            diff = [k for k in same if x[k] != y[k] and not (isinstance(x[k], float) and math.isclose(x[k], y[k], rel_tol=1e-12))]
            if diff:
                fail.append(f"rank {r} {kind} {x.get('step')}: {', '.join(f'{k} {x[k]} vs {y[k]}' for k in diff)}")
                break
    for x in msgs("cxx", "step", r):
        # each part within the step (a closure's backwards are inside its optimizer step)
        if min(x[k] for k in ("step_ms", "fwd_ms", "bwd_ms", "opt_ms", "comm_ms", "exposed_ms")) < 0 or \
                (x["step"] > 1 and max(x["fwd_ms"], x["bwd_ms"], x["opt_ms"]) > x["step_ms"] * 1.001 + 0.01):
            fail.append(f"rank {r} step {x['step']}: times {x}")
            break
    printed = {int(s): float(l) for s, l in re.findall(r"^rank %d step (\d+) loss (\S+)$" % r,
                                                        open(f"{d}/cxx/logs/rank-{r}.log").read(), re.M)}
    got = {m["step"]: m["loss"] for m in msgs("cxx", "step", r)}
    bad = [s for s in printed if abs(printed[s] - got.get(s, 1e9)) > 1e-6]
    if bad or len(printed) != len(got):
        fail.append(f"rank {r}: losses not the printed ones at steps {bad[:5]} ({len(printed)} printed, {len(got)} sent)")
n = len(msgs("cxx", "step", 0))
print(f"{n} steps a rank, {len(msgs('cxx', 'coll', 0))} colls: the C++ engine and the Python path agree" if not fail else "")
if fail:
    print("FAIL: " + "; ".join(fail[:6]))
    sys.exit(1)
PYEOF
no_workers || die "workers left running"
echo "PASS: the step engine's messages are the Python path's"
