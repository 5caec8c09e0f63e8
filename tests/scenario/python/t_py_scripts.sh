# Scripts written the ways users write them, not the way examples/ does,
# under `ddptop run -n 2`:
# - init_process_group with its timeout by position (torch's own signature):
#   the adapter's default timeout is not passed a second time; a call torch
#   refuses (an unknown keyword) fails on every rank at once;
# - gradient accumulation with no_sync and loss / K: the step's loss is the
#   sum of the backwards' scalars, the loss the script prints; LBFGS's
#   step(closure) evaluating it 5 times: the first, which step() returns;
# - a validation sampler iterated mid-epoch leaves the epoch and the shard
#   view to the training sampler;
# - a collective on a subgroup (dist.new_group) takes no number of the
#   default group's: no false desync;
# - a BatchNorm model under DDP (broadcast_buffers, the default): DDP's
#   buffer broadcast before every forward, and its broadcast of the model at
#   construction, arrive as `broadcast` colls with the buffers' bytes;
# - sys.exit("message") on one rank: the message is in the rank's log and
#   ddptop's events and verdict, as Python would print it, exit 1;
# - a child the script forks (os.fork, as DataLoader workers are made) while
#   another thread holds the rank's socket lock (the heartbeat flushing):
#   ddptop.log and torch.save in the child are the child's own, a child
#   that runs to the script's end exits with its own status, neither hangs,
#   and nothing of the children's reaches ddptop;
# - a script with no process group (-n 1): hello and phase train at its
#   first optimizer step;
# - the explicit API (`import ddptop`) in a script run bare by an
#   interpreter without zmq or msgpack: a no-op, not an ImportError.
. tests/lib.sh
. tests/lib_py.sh

# run NAME SCRIPT ARGS: ddptop run -n 2 headless, recorded; $TMP/NAME/{out.jsonl,rec.jsonl,logs}
run() {
    local name=$1; shift
    local d=$TMP/$name
    mkdir -p "$d"
    timeout 120 "$DDPTOP" run -n 2 --python "$PY" --headless --json --record "$d/rec" --log-dir "$d/logs" \
        "$@" >"$d/out.jsonl" 2>&1
    echo $? >"$d/rc"
    "$DDPTOP" export "$d/rec" --jsonl "$d/rec.jsonl" >/dev/null 2>&1 || die "$name: export failed"
}
rc_of() { cat "$TMP/$1/rc"; }

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
run bn "$TMP/bn.py"
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
run accum "$TMP/accum.py"
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
run lbfgs "$TMP/lbfgs.py"
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
run midval "$TMP/midval.py"
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
run subgroup "$TMP/subgroup.py"
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

# a call torch refuses fails on every rank at once, as it does bare: no rank
# waits for a store rank 0 never starts (30 s, then ddptop's SIGTERM)
cat >"$TMP/badinit.py" <<'PYEOF'
import torch.distributed as dist
dist.init_process_group("gloo", no_such_argument=1)
PYEOF
start=$(date +%s)
run badinit "$TMP/badinit.py"
secs=$(( $(date +%s) - start ))
[ "$(rc_of badinit)" = 1 ] || { cat "$TMP/badinit/out.jsonl"; die "a refused init_process_group: exit $(rc_of badinit), not 1"; }
for r in 0 1; do
    grep -q "\"r\":$r,\"level\":\"error\",\"text\":\"rank $r (pid [0-9]*) ended: exit 1" "$TMP/badinit/out.jsonl" \
        || { cat "$TMP/badinit/out.jsonl"; die "rank $r did not fail by itself (${secs}s)"; }
done
grep -q "TypeError: init_process_group() got an unexpected keyword argument 'no_such_argument'" "$TMP/badinit/out.jsonl" \
    || { cat "$TMP/badinit/out.jsonl"; die "torch's TypeError not shown"; }
[ $secs -lt 25 ] || die "a refused init_process_group took ${secs}s"

cat >"$TMP/exitmsg.py" <<'PYEOF'
import sys, torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 1:
    sys.exit("bad config: no data on rank 1")
dist.barrier()
PYEOF
run exitmsg "$TMP/exitmsg.py"
[ "$(rc_of exitmsg)" = 1 ] || { cat "$TMP/exitmsg/out.jsonl"; die "sys.exit(message): ddptop exited $(rc_of exitmsg), not 1"; }
grep -qx "bad config: no data on rank 1" "$TMP/exitmsg/logs/rank-1.log" || { cat "$TMP/exitmsg/logs/rank-1.log"; die "sys.exit's message not in the rank's log"; }
grep -q '"r":1,"level":"error","text":"rank 1: train -> error: sys.exit: bad config: no data on rank 1"' "$TMP/exitmsg/out.jsonl" \
    || { cat "$TMP/exitmsg/out.jsonl"; die "sys.exit's message not in ddptop's events"; }
grep -q '"verdict":"job failed: rank 1 exit 1[^"]*bad config: no data on rank 1' "$TMP/exitmsg/out.jsonl" \
    || { grep summary "$TMP/exitmsg/out.jsonl"; die "the verdict does not say why rank 1 exited"; }

cat >"$TMP/forks.py" <<'PYEOF'
import os, sys, threading, time, torch, torch.distributed as dist, ddptop
from ddptop import state
rank = int(os.environ["RANK"])

def fork_while_held(child):
    """Fork while another thread holds the rank's socket lock (what the
    heartbeat thread does once a second, for a moment); the child's exit status."""
    lock, held, done = state.run().up.lock, threading.Event(), threading.Event()
    def hold():
        with lock:
            held.set()
            done.wait()
    threading.Thread(target=hold, daemon=True).start()
    held.wait()
    pid = os.fork()
    if pid == 0:
        child()
    done.set()
    end = time.monotonic() + 20
    while time.monotonic() < end:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    sys.exit(f"rank {rank}: the forked child hung")

def saves():
    ddptop.log(child=os.getpid())
    torch.save({"x": 1}, os.path.join(sys.argv[1], f"child{rank}.pt"))
    os._exit(0)

def ends():                  # the child runs to the script's end (no process group yet: torch's own pg would hang it)
    sys.exit(4)

print(f"rank {rank} ending child exit {fork_while_held(ends)}", flush=True)
dist.init_process_group("gloo")
print(f"rank {rank} saving child exit {fork_while_held(saves)}", flush=True)
dist.barrier()
dist.destroy_process_group()
PYEOF
run forks "$TMP/forks.py" "$TMP"
[ "$(rc_of forks)" = 0 ] || { cat "$TMP/forks/out.jsonl" "$TMP"/forks/logs/*; die "a forked child: exit $(rc_of forks)"; }
for r in 0 1; do
    grep -qx "rank $r ending child exit 4" "$TMP/forks/logs/rank-$r.log" || { cat "$TMP/forks/logs/rank-$r.log"; die "rank $r: the child that ran to the end did not exit 4"; }
    grep -qx "rank $r saving child exit 0" "$TMP/forks/logs/rank-$r.log" || { cat "$TMP/forks/logs/rank-$r.log"; die "rank $r: the child did not exit 0"; }
    [ -s "$TMP/child$r.pt" ] || die "rank $r: the child's torch.save did not write"
done
! grep -q '"k":"ckpt"\|child=' "$TMP/forks/rec.jsonl" || die "a forked child spoke to ddptop as the rank"
"$PY" - "$TMP/forks/rec.jsonl" <<'PYEOF' || die "a forked child spoke to ddptop as the rank"
import json, sys
msgs = [json.loads(l) for l in open(sys.argv[1])]
for k in ("hello", "bye"):
    assert sorted(m["r"] for m in msgs if m.get("k") == k) == [0, 1], (k, [m for m in msgs if m.get("k") == k])
PYEOF

# no process group at all (-n 1, a plain training loop): the hello and phase
# train come with the first optimizer step, not only at the exit, so ddptop
# knows the rank (and its beats flow) while it trains
cat >"$TMP/nopg.py" <<'PYEOF'
import torch, torch.nn as nn
m = nn.Linear(4, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for step in range(3):
    loss = m(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
PYEOF
d=$TMP/nopg
mkdir -p "$d"
timeout 60 "$DDPTOP" run -n 1 --python "$PY" --headless --json --record "$d/rec" --log-dir "$d/logs" "$TMP/nopg.py" >"$d/out.jsonl" 2>&1 \
    || { cat "$d/out.jsonl" "$d"/logs/*; die "no process group: ddptop exited $?"; }
"$DDPTOP" export "$d/rec" --jsonl "$d/rec.jsonl" >/dev/null 2>&1 || die "nopg: export failed"
"$PY" - "$d/rec.jsonl" <<'PYEOF' || die "no process group: the rank said hello only at its end"
import json, sys
# in the order the rank sent them (hello comes on another socket than the rest: it may arrive later)
msgs = [m for m in map(json.loads, open(sys.argv[1])) if m.get("r") == 0 and m.get("k") in ("hello", "phase", "step", "bye")]
kinds = [m["k"] for m in sorted(msgs, key=lambda m: m["t"])]
assert kinds == ["hello", "phase", "step", "step", "step", "bye"], kinds
PYEOF
grep -q '"phase":"train"' "$d/rec.jsonl" || die "no process group: no phase train"

cat >"$TMP/api.py" <<'PYEOF'
import sys
sys.modules["zmq"] = sys.modules["msgpack"] = None      # an interpreter without them
import ddptop
ddptop.on_checkpoint(lambda d: None)
ddptop.log(acc=0.5)
print("should_stop", ddptop.should_stop())
PYEOF
out=$(PYTHONPATH=$PWD/workers/python "$PY" "$TMP/api.py" 2>&1) || die "the API outside ddptop: $out"
[ "$out" = "should_stop False" ] || die "the API outside ddptop: $out"

wait_for 10 no_workers || die "workers left running"
echo "PASS: scripts as users write them: positional timeout, DDP's broadcasts, sys.exit(message), forks, the API bare"
