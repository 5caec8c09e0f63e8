# A torch DDP script steered from ddptop's side of the wire (fake_front.py):
# pause and resume, then a checkpoint and a stop sent to rank 1 alone. Both
# ranks pause after the same step, stop after the same step, rank 0 writes
# the checkpoint of that step, and it loads back into the script's model,
# equal to what the script's own finally block saved. Through the C++ comm
# hook (the rank's log says so) and through the Python one (DDPTOP_PY_HOOK).
. tests/lib.sh
. tests/lib_py.sh
for hook in $(py_hooks); do
mkdir -p "$TMP/$hook"
"$PY" - "$TMP/$hook" "$hook" <<'PYEOF' || die "steering a torch script ($hook hook)"
import os, sys, time
sys.path[:0] = ["tests/tools", "examples"]
import torch
from fake_front import Front
from ddp_basics import build_model
from safetensors.torch import load_file

tmp, hook = sys.argv[1], sys.argv[2]
f = Front(os.path.abspath("workers/python/ddptop-worker-py"), world=2,
          args=["examples/ddp_basics.py", "--data", "synthetic", "--epochs", "100", "--batch-size", "16",
                "--out", f"{tmp}/final.pt"], env={"DDPTOP_CKPT_DIR": f"{tmp}/ck", "DDPTOP_PY_HOOK": "python" if hook == "python" else ""}, log_dir=tmp)
try:
    def both(pred):
        return all(pred(r) for r in range(2))
    assert f.wait_until(lambda f: both(lambda r: f.max_step(r) >= 5), 60), "no steps"
    f.cmd(1, "pause", 1)
    assert f.wait_until(lambda f: both(lambda r: "paused" in f.phases(r)), 20), "no pause"
    paused = [f.max_step(r) for r in range(2)]
    details = [m["detail"] for m in f.of("phase") if m["phase"] == "paused"]
    assert paused[0] == paused[1] and details == [f"paused after step {paused[0]}"] * 2, (paused, details)
    f.pump(0.6)
    assert [f.max_step(r) for r in range(2)] == paused, "stepped while paused"
    f.cmd(1, "resume", 1)
    assert f.wait_until(lambda f: both(lambda r: f.max_step(r) >= paused[0] + 3), 20), "no resume"
    f.cmd(1, "ckpt", 1)
    f.cmd(1, "stop", 1)
    codes = f.finish(60)
except BaseException:
    print(f.logs())
    raise
assert codes == [0, 0], (codes, f.logs())
said = [m["text"] for m in f.of("log") if m["text"].startswith("DDP comm hook: ")]
want = "DDP comm hook: C++ (" if hook == "cxx" else "DDP comm hook: Python (DDPTOP_PY_HOOK=python)"
assert len(said) == 2 and all(t.startswith(want) for t in said), said
last = [f.max_step(r) for r in range(2)]
byes = [m["step"] for m in f.of("bye")]
assert last[0] == last[1] and byes == last, (last, byes)
S = last[0]
ck = f.of("ckpt", 0)
ours = [m for m in ck if "/ck/" in m["path"]]
assert len(ours) == 1 and ours[0]["ok"] and ours[0]["step"] == S, ck
assert not f.of("ckpt", 1), "rank 1 wrote a checkpoint"
d = f"{tmp}/ck/step-{S:08d}"
assert os.path.realpath(f"{tmp}/ck/latest") == os.path.realpath(d), os.listdir(f"{tmp}/ck")
for r in range(2):
    ph = f.phases(r)
    assert ph[-3:] == ["stopping", "destroying", "destroyed"], (r, ph)
stops = [m["text"] for m in f.of("log") if m["text"].startswith("stopping after")]
assert stops == [f"stopping after step {S}: stop requested by ddptop"] * 2, stops
# the checkpoint is the script's model at step S: it loads, and equals the
# state_dict the script's finally block saved after the stop
model = build_model()
sd = load_file(f"{d}/model.safetensors")
model.load_state_dict(sd, strict=True)
final = torch.load(f"{tmp}/final.pt")
assert sd.keys() == final.keys() and all(torch.equal(sd[k], final[k]) for k in sd), "checkpoint != final weights"
opt = load_file(f"{d}/trainer.safetensors")
assert sorted(opt) == sorted(f"state.{k}.momentum_buffer" for k in sd), sorted(opt)
print(f"PASS: {hook} hook: paused after step {paused[0]}, checkpoint and stop at step {S} on both ranks")
PYEOF
wait_for 5 no_workers || die "workers left running"
done
echo "PASS: steering a torch script"
