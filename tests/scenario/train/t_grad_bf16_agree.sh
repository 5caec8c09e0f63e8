# --grad-dtype bf16 on the wire (tests/tools/fake_front.py as ddptop): every
# bucket's coll message counts the bf16 bytes (2 x its elements: the flags
# no longer ride in it) with busbw from them; and the command flags, which
# travel in an FP32 all-reduce of their own after the last bucket, still
# make both ranks act at one agreed step: a checkpoint (id 1001, which bf16
# cannot hold: it would round to 1000 and checkpoint again) heard by rank 0
# before rank 1, a pause heard the same way, and a stop heard by rank 1 only.
. tests/lib.sh
"$PY" -c 'import zmq, msgpack' 2>/dev/null || skip "skip: $PY lacks zmq or msgpack"
case $BUILD in /*) W=$BUILD/ddptop-worker;; *) W=$PWD/$BUILD/ddptop-worker;; esac
"$PY" - "$W" "$TMP" <<'PYEOF' || die "bf16 agreement scenario failed"
import sys
sys.path.insert(0, "tests/tools")
from fake_front import Front
worker, tmp = sys.argv[1], sys.argv[2]
f = Front(worker, 2, ["--dataset", "synthetic", "--model", "mlp:20,64,4", "--batch-size", "8",
                      "--epochs", "100000", "--ckpt-dir", f"{tmp}/ck", "--timeout", "20", "--grad-dtype", "bf16"],
          log_dir=tmp)
ok = False
try:
    def fail(why):
        print("FAIL:", why)
        print(f.logs())
        raise SystemExit(1)
    if not f.wait_until(lambda f: f.max_step(0) >= 20 and f.max_step(1) >= 20, 30):
        fail("ranks did not train 20 steps")
    hello = f.of("hello")
    if [h.get("grad_dtype") for h in hello] != ["bf16", "bf16"]:
        fail(f"hello grad_dtype: {[h.get('grad_dtype') for h in hello]}")
    numel = 20 * 64 + 64 + 64 * 4 + 4   # one bucket
    for r in (0, 1):
        colls = [c for c in f.of("coll", r) if c["bucket"] >= 0]
        if len(colls) < 20:
            fail(f"rank {r}: {len(colls)} bucket coll messages")
        for c in colls:
            if c["bytes"] != 2 * numel:
                fail(f"rank {r}: coll bytes {c['bytes']}, want {2 * numel} (bf16)")
            if c["count"] != numel or c["dtype"] != "bfloat16":
                fail(f"rank {r}: coll count {c['count']} dtype {c['dtype']!r}, want {numel} bfloat16")
            dt = c["done"] - c["start"]
            if dt > 0 and abs(c["busbw"] - c["bytes"] / dt) > 1e-9 * max(c["busbw"], 1):
                fail(f"busbw {c['busbw']} is not from the bf16 bytes: {c}")
    print(f"coll bytes: {2 * numel} per step (bf16), fp32 would be {4 * (numel + 7)}")
    # a checkpoint heard by rank 0, then (some steps later) by rank 1
    f.cmd(0, "ckpt", 1001)
    f.pump(0.05)
    f.cmd(1, "ckpt", 1001)
    if not f.wait_until(lambda f: len(f.of("ckpt")) >= 1, 15):
        fail("no checkpoint")
    s = f.max_step()
    if not f.wait_until(lambda f: f.max_step(0) >= s + 10 and f.max_step(1) >= s + 10, 15):
        fail("no training after the checkpoint")
    ck = f.of("ckpt")
    if len(ck) != 1 or not ck[0]["ok"]:
        fail(f"want one checkpoint for one command, got {ck}")
    print(f"one checkpoint for command 1001, at step {ck[0]['step']}")
    # a pause heard by rank 0 first: both pause after one step
    f.cmd(0, "pause", 1)
    f.pump(0.05)
    f.cmd(1, "pause", 1)
    paused = lambda r: bool(f.phases(r)) and f.phases(r)[-1] == "paused"
    if not f.wait_until(lambda f: paused(0) and paused(1), 10):
        fail(f"not both paused: {f.phases(0)[-3:]} {f.phases(1)[-3:]}")
    d = [m["detail"] for r in (0, 1) for m in f.of("phase", r) if m["phase"] == "paused"]
    if f.max_step(0) != f.max_step(1) or d[0] != d[1]:
        fail(f"paused at different steps: {d}")
    print(f"both {d[0]}")
    f.cmd_all("resume", 1)
    s = f.max_step()
    if not f.wait_until(lambda f: f.max_step(0) >= s + 10 and f.max_step(1) >= s + 10, 15):
        fail("no training after resume")
    # a stop heard by rank 1 alone ends both at one step
    f.cmd(1, "stop", 1)
    codes = f.finish(20)
    if codes != [0, 0]:
        fail(f"exit codes {codes}")
    byes = [m["step"] for m in f.of("bye")]
    if len(byes) != 2 or byes[0] != byes[1]:
        fail(f"byes {byes}")
    print(f"a stop heard by rank 1 alone: both ranks stopped at step {byes[0]}, exit 0")
    ok = True
finally:
    if not ok:
        f.finish(1)
PYEOF
no_workers || die "workers left running"
