# Uneven inputs under torch's Join, the fix ddptop's lint suggests: rank 0
# runs out of batches long before rank 1, Join shadows its all-reduces, and
# ddptop's steering must not ride them (flags carried by one rank's bucket
# and not by the other's paired buckets of different sizes: Gloo aborted).
# Both ranks end 0; a checkpoint asked for while rank 0 has joined is
# written after the Join context ends, at the same step on both ranks
# (each rank's own count: they parted inside Join). Through both comm hooks.
. tests/lib.sh
. tests/lib_py.sh
cat >"$TMP/join.py" <<'PYEOF'
import sys
import torch, torch.distributed as dist, torch.nn as nn
from torch.distributed.algorithms.join import Join
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
m = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4)))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
g = torch.Generator().manual_seed(rank)

def step():
    x, y = torch.randn(16, 64, generator=g), torch.randint(0, 4, (16,), generator=g)
    opt.zero_grad()
    nn.functional.cross_entropy(m(x), y).backward()
    opt.step()

with Join([m]):
    for i in range(40 if rank == 0 else 1000):
        step()
print(f"rank {rank} left Join", flush=True)
for i in range(100):        # in step again
    step()
print(f"rank {rank} done", flush=True)
dist.destroy_process_group()
PYEOF
for hook in $(py_hooks); do
mkdir -p "$TMP/$hook"
"$PY" - "$TMP/$hook" "$hook" "$TMP/join.py" <<'PYEOF' || die "a Join script under ddptop ($hook hook)"
import os, sys
sys.path[:0] = ["tests/tools"]
from fake_front import Front

tmp, hook, script = sys.argv[1:4]
f = Front(os.path.abspath("workers/python/ddptop-worker-py"), world=2, args=[script],
          env={"DDPTOP_CKPT_DIR": f"{tmp}/ck", "DDPTOP_PY_HOOK": "python" if hook == "python" else ""}, log_dir=tmp)
try:
    # rank 0 has joined (its 40 steps done) and rank 1 steps on alone: ask for a checkpoint now
    assert f.wait_until(lambda f: f.max_step(0) >= 40 and f.max_step(1) >= 200, 120), "no uneven steps"
    f.cmd(1, "ckpt", 1)
    codes = f.finish(120)
except BaseException:
    print(f.logs())
    raise
assert codes == [0, 0], (codes, f.logs())
last = [f.max_step(r) for r in range(2)]
assert last == [140, 1100], (last, f.logs())
said = [m["text"] for m in f.of("log") if m["text"].startswith("Join: ")]
assert len(said) == 2, said
ck = f.of("ckpt", 0)
ours = [m for m in ck if "/ck/" in m["path"]]
# written after the Join context: rank 0's steps 41..140 are the steps after it
assert len(ours) == 1 and ours[0]["ok"] and 40 < ours[0]["step"] <= 140, ck
print(f"PASS: {hook} hook: uneven steps in Join (40 and 1000), the checkpoint at rank 0's step {ours[0]['step']}")
PYEOF
done
