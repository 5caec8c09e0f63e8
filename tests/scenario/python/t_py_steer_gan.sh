# A GAN-style script (two DDP modules, two optimizers stepping every
# iteration, DataLoader workers) checkpointed and stopped from ddptop's side
# of the wire (fake_front.py): the checkpoint holds both models, each in its
# own file in the order they were built (model.safetensors: the generator,
# model-1.safetensors: the discriminator) and both optimizers
# (trainer.safetensors, trainer-1.safetensors, in the order they first
# stepped), equal to what the script's finally block saved after the stop.
. tests/lib.sh
. tests/lib_py.sh
cat >"$TMP/gan.py" <<'PYEOF'
import sys, torch, torch.nn as nn, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset, DistributedSampler
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
G = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)))
D = DDP(nn.Sequential(nn.Linear(4, 12), nn.ReLU(), nn.Linear(12, 1)))
og = torch.optim.Adam(G.parameters(), lr=1e-3)
od = torch.optim.SGD(D.parameters(), lr=1e-2, momentum=0.9)
bce = nn.BCEWithLogitsLoss()
ds = TensorDataset(torch.randn(256, 4) + 1)
sampler = DistributedSampler(ds)
dl = DataLoader(ds, batch_size=16, sampler=sampler, num_workers=2, persistent_workers=True)
try:
    for epoch in range(1000):
        sampler.set_epoch(epoch)
        for (real,) in dl:
            z = torch.randn(16, 8)
            od.zero_grad(set_to_none=True)
            ld = bce(D(real), torch.ones(16, 1)) + bce(D(G(z).detach()), torch.zeros(16, 1))
            ld.backward()
            od.step()
            og.zero_grad(set_to_none=True)
            lg = bce(D(G(z)), torch.ones(16, 1))
            lg.backward()
            og.step()
finally:
    if rank == 0:
        torch.save({"G": G.module.state_dict(), "D": D.module.state_dict()}, sys.argv[1])
PYEOF
"$PY" - "$TMP" <<'PYEOF' || die "a GAN's checkpoint"
import json, os, sys
sys.path[:0] = ["tests/tools"]
import torch
from fake_front import Front
from safetensors import safe_open
from safetensors.torch import load_file

tmp = sys.argv[1]
f = Front(os.path.abspath("workers/python/ddptop-worker-py"), world=2, args=[f"{tmp}/gan.py", f"{tmp}/final.pt"],
          env={"DDPTOP_CKPT_DIR": f"{tmp}/ck"}, log_dir=tmp)
try:
    assert f.wait_until(lambda f: all(f.max_step(r) >= 6 for r in range(2)), 60), "no steps"
    f.cmd(1, "ckpt", 1)
    f.cmd(1, "stop", 2)
    codes = f.finish(60)
except BaseException:
    print(f.logs())
    raise
assert codes == [0, 0], (codes, f.logs())
S = f.max_step(0)
assert f.max_step(1) == S, (S, f.max_step(1))
ours = [m for m in f.of("ckpt", 0) if "/ck/" in m["path"]]
assert len(ours) == 1 and ours[0]["ok"] and ours[0]["step"] == S, ours
d = f"{tmp}/ck/step-{S:08d}"
assert sorted(os.listdir(d)) == ["model-1.safetensors", "model.safetensors", "trainer-1.safetensors",
                                 "trainer.safetensors"], os.listdir(d)
final = torch.load(f"{tmp}/final.pt")
for name, file in (("G", "model.safetensors"), ("D", "model-1.safetensors")):
    sd = load_file(f"{d}/{file}")
    assert sd.keys() == final[name].keys() and all(torch.equal(sd[k], final[name][k]) for k in sd), (name, file)
# D's SGD stepped first: trainer.safetensors; G's Adam: trainer-1
for file, opt, bufs in (("trainer.safetensors", "SGD", {"momentum_buffer"}),
                        ("trainer-1.safetensors", "Adam", {"exp_avg", "exp_avg_sq"})):
    with safe_open(f"{d}/{file}", "pt") as h:
        meta, keys = h.metadata(), list(h.keys())
    assert meta["optimizer"] == opt and int(meta["step"]) == S, (file, meta)
    assert json.loads(meta["models"]) == [["model.safetensors", "Sequential"], ["model-1.safetensors", "Sequential"]], meta
    assert keys and {k.rsplit(".", 1)[1] for k in keys} <= bufs | {"step"}, (file, keys)
print(f"PASS: both models and both optimizers in the checkpoint of step {S}")
PYEOF
wait_for 10 no_workers || die "workers left running"
echo "PASS: a GAN's checkpoint from ddptop holds both models and both optimizers"
