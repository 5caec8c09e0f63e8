# No false words for a script that peeks, validates or reads ahead (issue
# 29): pytorch/examples' tutorial series peeks one batch with
# next(iter(loader)) before set_epoch each epoch, then validates through a
# DistributedSampler of its own, and its training loop reads one batch
# ahead. Under ddptop: no set_epoch warning, each rank's shards are epochs
# 0, 1, 2 once each with the sampler's own indices, and the steps' samples
# count training batches only (3 epochs x 64 samples a rank, not the peeked
# or validation ones). The forgotten set_epoch (the same script with that
# call removed) still warns, so the lint is not just silenced.
. tests/lib.sh
. tests/lib_py.sh
cat >"$TMP/peek.py" <<'PYEOF'
import sys, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
forget = "--forget" in sys.argv
dist.init_process_group("gloo")
torch.manual_seed(0)
train = TensorDataset(torch.randn(128, 12), torch.randint(0, 3, (128,)))
val = TensorDataset(torch.randn(40, 12), torch.randint(0, 3, (40,)))
sampler = DistributedSampler(train, shuffle=True, seed=5)
loader = DataLoader(train, batch_size=8, sampler=sampler)
vloader = DataLoader(val, batch_size=4, sampler=DistributedSampler(val, shuffle=False))
model = DDP(torch.nn.Linear(12, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(3):
    b_sz = len(next(iter(loader))[0])          # the tutorial's peek, before set_epoch
    if not forget:
        sampler.set_epoch(epoch)
    it = iter(loader)
    nxt = next(it, None)
    while nxt is not None:                      # one batch read ahead
        x, y = nxt
        nxt = next(it, None)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    with torch.no_grad():
        for x, y in vloader:
            model(x)
dist.destroy_process_group()
PYEOF
run_it() { # $1: name, then the script's args
    local name=$1; shift
    timeout 120 env DDPTOP_WORKER=$PY_WORKER "$DDPTOP" run -n 2 --headless --json --record "$TMP/$name.rec" \
        -- "$TMP/peek.py" "$@" >"$TMP/$name.json" 2>&1 || { tail -20 "$TMP/$name.json"; die "$name: ddptop failed"; }
    "$DDPTOP" export "$TMP/$name.rec" --jsonl "$TMP/$name.jsonl" >/dev/null || die "$name: export failed"
}
run_it peek
"$PY" - "$TMP/peek.jsonl" <<'PYEOF' || die "false words for a script that peeks, validates and reads ahead"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
warns = [l for l in lines if l.get("k") == "log" and "set_epoch" in l.get("text", "")]
assert not warns, warns
for r in range(2):
    shards = [l for l in lines if l.get("k") == "shard" and l.get("r") == r]
    assert [s["epoch"] for s in shards] == [0, 1, 2], (r, [s["epoch"] for s in shards])
    steps = [l for l in lines if l.get("k") == "step" and l.get("r") == r]
    assert steps and steps[-1]["step"] == 24, (r, steps[-1:])
    assert steps[-1]["samples"] == 3 * 64, f"rank {r}: samples {steps[-1]['samples']}, want {3 * 64} (training batches only)"
print("ok: no set_epoch warning; shards of epochs 0, 1, 2; 192 training samples a rank")
PYEOF
run_it forget --forget
grep -q "without set_epoch" "$TMP/forget.json" || { grep -i "epoch" "$TMP/forget.json" | head; die "the forgotten set_epoch was not warned about"; }
echo "ok: the forgotten set_epoch still warns"
wait_for 10 no_ranks || die "ranks left running"
