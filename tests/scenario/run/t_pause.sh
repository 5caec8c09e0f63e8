# Pause, checkpoint while paused, resume and stop take effect at a step (or
# paused round) agreed by every rank, however late each rank hears of them.
# Driven through tests/tools/fake_front.py (ddptop's side of the wire in Python):
# a pause reaching rank 0 before rank 1 still pauses both after the same
# step; nothing trains while paused; a checkpoint asked for meanwhile is of
# that step; a resume that only one rank has heard keeps both paused; then
# both train again, and a stop ends both cleanly at one step.
. tests/lib.sh
"$PY" -c 'import zmq, msgpack' 2>/dev/null || skip "skip: $PY lacks zmq or msgpack"
case $BUILD in /*) W=$BUILD/ddptop-worker;; *) W=$PWD/$BUILD/ddptop-worker;; esac
"$PY" - "$W" "$TMP" <<'PYEOF' || die "pause scenario failed"
import sys, time
sys.path.insert(0, "tests/tools")
from fake_front import Front
worker, tmp = sys.argv[1], sys.argv[2]
f = Front(worker, 2, ["--dataset", "synthetic", "--model", "mlp:20,64,4", "--batch-size", "8",
                      "--epochs", "100000", "--ckpt-dir", f"{tmp}/ck", "--timeout", "20"],
          log_dir=tmp)
ok = False
try:
    def fail(why):
        print("FAIL:", why)
        print(f.logs())
        raise SystemExit(1)
    def paused(r):
        ph = f.phases(r)
        return bool(ph) and ph[-1] == "paused"
    if not f.wait_until(lambda f: f.max_step(0) >= 20 and f.max_step(1) >= 20, 20):
        fail("ranks did not train 20 steps")
    f.cmd(0, "pause", 1)            # rank 0 hears first ...
    f.pump(0.05)
    f.cmd(1, "pause", 1)            # ... rank 1 some steps later
    if not f.wait_until(lambda f: paused(0) and paused(1), 10):
        fail(f"not both paused: {f.phases(0)[-3:]} {f.phases(1)[-3:]}")
    s0, s1 = f.max_step(0), f.max_step(1)
    d = [m["detail"] for r in (0, 1) for m in f.of("phase", r) if m["phase"] == "paused"]
    print(f"paused at steps {s0} / {s1}: {d}")
    if s0 != s1 or d[0] != d[1] or d[0] != f"paused after step {s0}":
        fail("ranks paused at different steps")
    f.pump(1.3)
    if f.max_step(0) != s0 or f.max_step(1) != s1:
        fail("a rank trained while paused")
    beats = [m for m in f.of("beat") if m["phase"] == "paused"]
    if {m["r"] for m in beats} != {0, 1}:
        fail(f"no heartbeat saying paused from each rank: {beats[-4:]}")
    # a checkpoint while paused is of the paused step, and the ranks stay paused
    f.cmd_all("ckpt", 1)
    if not f.wait_until(lambda f: f.of("ckpt"), 10):
        fail("no checkpoint while paused")
    c = f.of("ckpt")[0]
    f.pump(0.2)
    if not c["ok"] or c["step"] != s0 or not (paused(0) and paused(1)):
        fail(f"checkpoint while paused: {c}, phases {f.phases(0)[-3:]}")
    # a resume heard by one rank only: nobody moves
    f.cmd(1, "resume", 1)
    f.pump(0.5)
    if f.max_step() != s0 or not (paused(0) and paused(1)):
        fail("one rank's resume unpaused the job")
    f.cmd(0, "resume", 1)
    if not f.wait_until(lambda f: f.max_step(0) >= s0 + 10 and f.max_step(1) >= s0 + 10, 10):
        fail(f"no training after resume: {f.phases(0)[-3:]}")
    if f.phases(0)[-1] != "train" or f.phases(1)[-1] != "train":
        fail("phase is not train after resume")
    # a second pause/resume pair works the same way (ids count per op)
    f.cmd_all("pause", 2)
    if not f.wait_until(lambda f: paused(0) and paused(1), 10):
        fail("second pause")
    f.cmd_all("stop", 1)            # stop while paused
    codes = f.finish(20)
    if codes != [0, 0]:
        fail(f"exit codes {codes}")
    byes = [m["step"] for m in f.of("bye")]
    if len(byes) != 2 or byes[0] != byes[1]:
        fail(f"byes {byes}")
    print(f"stopped while paused: both ranks at step {byes[0]}, exit 0")
    ok = True
finally:
    if not ok:
        f.finish(1)
PYEOF
[ -L "$TMP/ck/latest" ] || die "no final checkpoint"
no_workers || die "workers left running"
