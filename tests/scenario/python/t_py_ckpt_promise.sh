# The checkpoints ddptop promises a torch script, kept (issue 29): a stop
# (`d`, Ctrl-C) alone writes the final checkpoint of the agreed stop step,
# as for the built-in trainer, and it loads back equal to what the script's
# own finally block saved; a ZeroRedundancyOptimizer script's `c` and `d`
# give the model and the consolidated optimizer state (every parameter's
# momentum, gathered from both ranks' shards) and end 0 on both ranks;
# torch.save into a buffer (ZeRO's own exchange of state) is no checkpoint;
# files take the user's umask, not the safetensors package's 0600.
. tests/lib.sh
. tests/lib_py.sh
umask 022
"$PY" - "$TMP" <<'PYEOF' || die "checkpoints promised to a torch script"
import os, stat, sys
sys.path[:0] = ["tests/tools", "examples"]
import torch
from fake_front import Front
from safetensors.torch import load_file

tmp = sys.argv[1]
worker = os.path.abspath("workers/python/ddptop-worker-py")

# 1. a stop alone: the final checkpoint at the stop step
f = Front(worker, world=2, args=["examples/ddp_basics.py", "--data", "synthetic", "--epochs", "100",
                                 "--batch-size", "16", "--out", f"{tmp}/final.pt"],
          env={"DDPTOP_CKPT_DIR": f"{tmp}/ck"}, log_dir=tmp)
try:
    assert f.wait_until(lambda f: all(f.max_step(r) >= 5 for r in range(2)), 60), "no steps"
    f.cmd(1, "stop", 1)
    codes = f.finish(60)
except BaseException:
    print(f.logs())
    raise
assert codes == [0, 0], (codes, f.logs())
S = f.max_step(0)
assert [f.max_step(r) for r in range(2)] == [S, S], "the ranks stopped apart"
ck = [m for m in f.of("ckpt", 0) if "/ck/" in m["path"]]
assert len(ck) == 1 and ck[0]["ok"] and ck[0]["step"] == S, ck
d = f"{tmp}/ck/step-{S:08d}"
assert ck[0]["path"] == os.path.abspath(d), (ck[0]["path"], d)
assert os.path.realpath(f"{tmp}/ck/latest") == os.path.realpath(d)
mine = load_file(f"{d}/model.safetensors")
theirs = torch.load(f"{tmp}/final.pt")
assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine), "final checkpoint != the script's"
for name in os.listdir(d):
    mode = stat.S_IMODE(os.stat(f"{d}/{name}").st_mode)
    assert mode == 0o644, f"{name}: mode {mode:o} under umask 022"
print(f"ok: a stop alone wrote the final checkpoint of step {S} ({ck[0]['path']}), equal to the script's save")

# 2. ZeroRedundancyOptimizer: c, then d
script = f"{tmp}/zero.py"
with open(script, "w") as fh:
    fh.write('''
import io, os, torch, torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)))
opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD, lr=0.01, momentum=0.9)
g = torch.Generator().manual_seed(dist.get_rank())
try:
    for step in range(100000):
        x, y = torch.randn(16, 8, generator=g), torch.randint(0, 4, (16,), generator=g)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if step == 2:
            torch.save({"probe": torch.ones(3)}, io.BytesIO())   # a buffer: no checkpoint
finally:
    dist.destroy_process_group()
''')
f = Front(worker, world=2, args=[script], env={"DDPTOP_CKPT_DIR": f"{tmp}/zck"}, log_dir=f"{tmp}")
try:
    assert f.wait_until(lambda f: all(f.max_step(r) >= 5 for r in range(2)), 60), "no steps"
    f.cmd(0, "ckpt", 1)
    assert f.wait_until(lambda f: f.of("ckpt", 0), 30), "no checkpoint after c"
    f.cmd(0, "stop", 1)
    codes = f.finish(60)
except BaseException:
    print(f.logs())
    raise
assert codes == [0, 0], (codes, f.logs())
cks = f.of("ckpt")
assert all(m["path"] for m in cks), f"torch.save into a buffer reported as a checkpoint: {cks}"
assert len(cks) == 2 and all(m["ok"] and m["r"] == 0 for m in cks), cks
bad = [m["text"] for m in f.of("log") if m["level"] in ("warn", "error") and "checkpoint" in m["text"]]
assert not bad, bad
S = f.max_step(0)
d = f"{tmp}/zck/step-{S:08d}"
assert cks[-1]["step"] == S and cks[-1]["path"] == os.path.abspath(d), (cks, S)
model = load_file(f"{d}/model.safetensors")
trainer = load_file(f"{d}/trainer.safetensors")
want = {f"state.{k}.momentum_buffer" for k in model}
assert set(trainer) == want, f"optimizer state {sorted(trainer)} != every parameter's momentum {sorted(want)}"
print(f"ok: ZeroRedundancyOptimizer: c and d wrote model and consolidated state ({len(trainer)} buffers), both ranks exit 0")
PYEOF
wait_for 10 no_ranks || die "ranks left running"
