# What ddptop shows of training written the ways users write it, not the
# way examples/ does, under `ddptop run -n 2`:
# - a BatchNorm model under DDP (broadcast_buffers, the default), with
#   init_process_group's timeout by position: DDP's buffer broadcast before
#   every forward, and its broadcast of the model at construction, arrive as
#   `broadcast` colls with the buffers' bytes, and the adapter's default
#   timeout is not passed a second time;
# - gradient accumulation with no_sync and loss / K: the step's loss is the
#   sum of the backwards' scalars, the loss the script prints; LBFGS's
#   step(closure) evaluating it 5 times: the first, which step() returns;
# - a validation sampler iterated mid-epoch leaves the epoch and the shard
#   view to the training sampler;
# - a collective on a subgroup (dist.new_group) takes no number of the
#   default group's: no false desync.
. tests/lib.sh
. tests/lib_py.sh
cat >"$TMP/bn.py" <<'PYEOF'
import datetime, torch, torch.nn as nn, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo", "env://", datetime.timedelta(seconds=120))
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 1))
state_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
buf_bytes = sum(b.numel() * b.element_size() for b in model.buffers())
ddp = DDP(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
for step in range(4):
    loss = ddp(torch.randn(8, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"rank {rank} state {state_bytes} buffers {buf_bytes}", flush=True)
dist.destroy_process_group()
PYEOF
py_rec bn "$TMP/bn.py"
[ "$(rc_of bn)" = 0 ] || { cat "$TMP/bn/out.jsonl" "$TMP"/bn/logs/*; die "BatchNorm, timeout by position: exit $(rc_of bn)"; }
"$PY" - "$TMP/bn" <<'PYEOF' || die "DDP's broadcasts are not what ddptop shows"
import json, re, sys
d = sys.argv[1]
msgs = [json.loads(l) for l in open(f"{d}/rec.jsonl")]
for r in (0, 1):
    state, bufs = map(int, re.search(r"^rank %d state (\d+) buffers (\d+)$" % r, open(f"{d}/logs/rank-{r}.log").read(), re.M).groups())
    bc = [(m["step"], m["bytes"]) for m in msgs if m.get("k") == "coll" and m.get("r") == r and m["op"] == "broadcast"]
    # the model's state at construction (step 0), then the buffers before each of the 4 forwards
    assert bc == [(0, state)] + [(s, bufs) for s in range(4)], (r, bc, state, bufs)
    assert [m["status"] for m in msgs if m.get("k") == "bye" and m.get("r") == r] == [0]
PYEOF

# gradient accumulation (no_sync, loss / K): the step's loss is the sum of
# the K backwards' scalars, what the script prints as its loss
cat >"$TMP/accum.py" <<'PYEOF'
import contextlib, torch, torch.nn as nn, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)
ddp = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)))
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
K = 4
for step in range(5):
    opt.zero_grad(set_to_none=True)
    total = 0.0
    for micro in range(K):
        with ddp.no_sync() if micro < K - 1 else contextlib.nullcontext():
            loss = nn.functional.mse_loss(ddp(torch.randn(8, 8)), torch.randn(8, 1)) / K
            loss.backward()
        total += loss.item()
    opt.step()
    print(f"rank {rank} step {step + 1} loss {total!r}", flush=True)
dist.destroy_process_group()
PYEOF
py_rec accum "$TMP/accum.py"
[ "$(rc_of accum)" = 0 ] || { cat "$TMP/accum/out.jsonl" "$TMP"/accum/logs/*; die "accumulation: exit $(rc_of accum)"; }
"$PY" - "$TMP/accum" <<'PYEOF' || die "an accumulated step's loss is not the script's"
import json, re, sys
d = sys.argv[1]
msgs = [json.loads(l) for l in open(f"{d}/rec.jsonl")]
for r in (0, 1):
    printed = [(int(s), float(l)) for s, l in re.findall(r"^rank %d step (\d+) loss (\S+)$" % r, open(f"{d}/logs/rank-{r}.log").read(), re.M)]
    got = [(m["step"], m["loss"]) for m in msgs if m.get("k") == "step" and m.get("r") == r]
    assert len(got) == len(printed) == 5 and all(g[0] == p[0] and abs(g[1] - p[1]) < 1e-9 for g, p in zip(got, printed)), (r, got, printed)
PYEOF

# LBFGS: step(closure) evaluates the closure (a backward each) up to
# max_iter times; the step's loss is the first, the one step() returns
cat >"$TMP/lbfgs.py" <<'PYEOF'
import torch, torch.nn as nn, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
ddp = DDP(nn.Linear(4, 1))
opt = torch.optim.LBFGS(ddp.parameters(), lr=0.5, max_iter=5)
x, y = torch.randn(16, 4), torch.randn(16, 1)
def closure():
    opt.zero_grad()
    loss = nn.functional.mse_loss(ddp(x), y)
    loss.backward()
    return loss
for step in range(3):
    loss = opt.step(closure)
    print(f"rank {rank} step {step + 1} loss {loss.item()!r}", flush=True)
dist.destroy_process_group()
PYEOF
py_rec lbfgs "$TMP/lbfgs.py"
[ "$(rc_of lbfgs)" = 0 ] || { cat "$TMP/lbfgs/out.jsonl" "$TMP"/lbfgs/logs/*; die "LBFGS: exit $(rc_of lbfgs)"; }
"$PY" - "$TMP/lbfgs" 3 <<'PYEOF' || die "an LBFGS step's loss is not what step() returned"
import json, re, sys
d, n = sys.argv[1], int(sys.argv[2])
msgs = [json.loads(l) for l in open(f"{d}/rec.jsonl")]
for r in (0, 1):
    printed = [(int(s), float(l)) for s, l in re.findall(r"^rank %d step (\d+) loss (\S+)$" % r, open(f"{d}/logs/rank-{r}.log").read(), re.M)]
    got = [(m["step"], m["loss"]) for m in msgs if m.get("k") == "step" and m.get("r") == r]
    assert len(got) == len(printed) == n and all(g[0] == p[0] and abs(g[1] - p[1]) < 1e-6 for g, p in zip(got, printed)), (r, got, printed)
PYEOF

# a validation set's DistributedSampler (shuffle=False, never set_epoch)
# iterated mid-epoch: the steps keep the training sampler's epoch and the
# shard view keeps the training set's shards, one an epoch
cat >"$TMP/midval.py" <<'PYEOF'
import torch, torch.nn as nn, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset, DistributedSampler
dist.init_process_group("gloo")
torch.manual_seed(0)
ddp = DDP(nn.Linear(4, 2))
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
train = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
val = TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))
train_sampler, val_sampler = DistributedSampler(train), DistributedSampler(val, shuffle=False)
val_loader = DataLoader(val, batch_size=8, sampler=val_sampler)
for epoch in range(2):
    train_sampler.set_epoch(epoch)
    for i, (x, y) in enumerate(DataLoader(train, batch_size=8, sampler=train_sampler)):
        loss = nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i % 2 == 1:            # evaluate every 2 steps
            with torch.no_grad():
                for x, y in val_loader:
                    ddp(x)
dist.destroy_process_group()
PYEOF
py_rec midval "$TMP/midval.py"
[ "$(rc_of midval)" = 0 ] || { cat "$TMP/midval/out.jsonl" "$TMP"/midval/logs/*; die "mid-epoch validation: exit $(rc_of midval)"; }
"$PY" - "$TMP/midval/rec.jsonl" <<'PYEOF' || die "a validation sampler moved the epoch"
import json, sys
msgs = [json.loads(l) for l in open(sys.argv[1])]
for r in (0, 1):
    epochs = [m["epoch"] for m in msgs if m.get("k") == "step" and m.get("r") == r]
    assert epochs == [0] * 4 + [1] * 4, (r, epochs)
    shards = [(m["epoch"], m["size"]) for m in msgs if m.get("k") == "shard" and m.get("r") == r]
    assert shards == [(0, 64), (1, 64)], (r, shards)
PYEOF

# collectives on a group of rank 0 alone (dist.new_group): no number of
# the default group's (-1), so the ranks' numbers still pair up and ddptop
# sees no desync
cat >"$TMP/subgroup.py" <<'PYEOF'
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
alone = dist.new_group([0])
if rank == 0:
    dist.all_reduce(torch.ones(2), group=alone)
for i in range(2):
    dist.barrier()
    dist.broadcast(torch.ones(3), 0)
dist.destroy_process_group()
PYEOF
py_rec subgroup "$TMP/subgroup.py"
[ "$(rc_of subgroup)" = 0 ] || { cat "$TMP/subgroup/out.jsonl" "$TMP"/subgroup/logs/*; die "a subgroup: exit $(rc_of subgroup)"; }
! grep -q desync "$TMP/subgroup/out.jsonl" || { grep desync "$TMP/subgroup/out.jsonl"; die "a subgroup's collective read as a desync"; }
"$PY" - "$TMP/subgroup/rec.jsonl" <<'PYEOF' || die "a subgroup's collective took a number of the default group's"
import json, sys
msgs = [json.loads(l) for l in open(sys.argv[1])]
seqs = {r: [(m["seq"], m["op"]) for m in msgs if m.get("k") == "coll" and m.get("r") == r] for r in (0, 1)}
# the same numbers on both ranks (1.13: the adapter's 1..4; 2.x: torch's)
assert seqs[0] == [(-1, "allreduce")] + seqs[1], seqs
assert [op for _, op in seqs[1]] == ["barrier", "broadcast"] * 2 and 0 < seqs[1][0][0] < seqs[1][1][0] < seqs[1][2][0] < seqs[1][3][0], seqs
PYEOF

wait_for 10 no_workers || die "workers left running"
echo "PASS: training as users write it: DDP's broadcasts, accumulation, LBFGS, validation samplers, subgroups"
