# Live faults and ddptop's heartbeat, driven through tests/tools/fake_front.py:
# a fault sent as a `cmd` (op "fault", arg as fault_pack) takes effect on
# the rank it names and is explained in a warn log; workers never judge a
# frontend that has not pinged, but once pings came, DDPTOP_PING_TIMEOUT
# seconds of silence end every rank (exit 1, one line on stderr).
. tests/lib.sh
"$PY" -c 'import zmq, msgpack' 2>/dev/null || skip "skip: $PY lacks zmq or msgpack"
case $BUILD in /*) W=$BUILD/ddptop-worker;; *) W=$PWD/$BUILD/ddptop-worker;; esac
"$PY" - "$W" "$TMP" <<'PYEOF' || die "live fault scenario failed"
import sys, time
sys.path.insert(0, "tests/tools")
from fake_front import Front
worker, tmp = sys.argv[1], sys.argv[2]
KILL, SLOW = 1, 3
def pack(kind, rank, value):   # fault.c: kind 4 bits | rank 20 bits | value 39 bits
    return (kind << 59) | (rank << 39) | value
args = ["--dataset", "synthetic", "--model", "mlp:20,32,4", "--batch-size", "8", "--epochs", "100000",
        "--no-final-ckpt", "--timeout", "20"]
def fail(f, why):
    print("FAIL:", why)
    print(f.logs())
    f.finish(1)
    raise SystemExit(1)
def warned(f, r, text):
    return any(m.get("level") == "warn" and text in m.get("text", "") for m in f.of("log", r))

# heartbeat: no pings, no judgement; pings, then silence: every rank leaves
f = Front(worker, 2, args, env={"DDPTOP_PING_TIMEOUT": "2"}, log_dir=tmp)
if not f.wait_until(lambda f: f.max_step(0) >= 5 and f.max_step(1) >= 5, 20):
    fail(f, "ranks did not train")
f.pump(3.0)
if f.codes:
    fail(f, f"a rank left before any ping: {f.codes}")
f.cmd(1, "fault", 1, pack(SLOW, 1, 20))
if not f.wait_until(lambda f: warned(f, 1, "rank 1 sleeps 20 ms every step"), 10):
    fail(f, "no slow fault sentence from rank 1")
if warned(f, 0, "sleeps"):
    fail(f, "rank 0 took rank 1's fault")
for i in range(6):
    f.cmd_all("ping", i + 1)
    f.pump(0.5)
if f.codes:
    fail(f, f"a pinged rank left: {f.codes}")
t0 = time.monotonic()
f.wait_until(lambda f: len(f.codes) == 2, 10)
took = time.monotonic() - t0
codes = f.finish(1)
if codes != [1, 1]:
    print(f.logs()); raise SystemExit(f"exit codes {codes} after the pings stopped, want [1, 1]")
if "nothing from ddptop for" not in f.logs():
    print(f.logs()); raise SystemExit("no heartbeat line on stderr")
print(f"pings stopped: ranks left after {took:.1f} s")

# a live kill
f = Front(worker, 2, args, log_dir=tmp)
if not f.wait_until(lambda f: f.max_step(0) >= 5 and f.max_step(1) >= 5, 20):
    fail(f, "ranks did not train")
f.cmd(1, "fault", 1, pack(KILL, 1, 0))
f.wait_until(lambda f: len(f.codes) == 2, 20)
ok = warned(f, 1, "fault: rank 1 kills itself")
codes = f.finish(5)
if codes != [1, -9] or not ok:
    print(f.logs()); raise SystemExit(f"live kill: codes {codes} (want [1, -9]), sentence {ok}")
print("live faults ok")
PYEOF
wait_for 5 no_workers || die "workers left: $(our_workers)"
