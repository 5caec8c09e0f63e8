# The torch adapter's ctl reads from two threads: the script's thread waits
# for a store reply while the heartbeat thread reads ctl for pings and
# "stacks" asks (every 0.1 s). A store reply the heartbeat thread's read
# takes off the socket is kept for the waiting store call, not dropped (the
# call returned it at once, not a "no reply" error 10 s later), and the
# "stacks" ask read in the same pass is the heartbeat thread's, not a
# command for the script's thread. Driven step by step (the test holds the
# uplink's lock where the race would fall), so it needs no timing luck.
. tests/lib.sh
"$PY" -c 'import zmq' 2>/dev/null || skip "no pyzmq for $PY (the test's ddptop side)"
export PYTHONPATH=$PWD/workers/python${PYTHONPATH:+:$PYTHONPATH}
"$PY" - "$TMP" <<'PYEOF' || die "the store reply or the stacks ask went astray"
import sys, threading, time
import zmq
from ddptop import uplink, wire
d = sys.argv[1]
ctx = zmq.Context()
router = ctx.socket(zmq.ROUTER)
router.bind(f"ipc://{d}/ctl")
pull = ctx.socket(zmq.PULL)
pull.bind(f"ipc://{d}/tel")
u = uplink.Uplink(f"ipc://{d}/ctl", f"ipc://{d}/tel", 1)
got = {}
def store():
    try:
        t0 = time.monotonic()
        got["val"] = u.store_get("rdzv/x", 5.0)
        got["s"] = time.monotonic() - t0
    except Exception as e:      # StoreError: the reply was lost
        got["err"] = repr(e)
th = threading.Thread(target=store)
th.start()
ident, frame = router.recv_multipart()
assert wire.decode(frame)["k"] == "get", wire.decode(frame)
with u.lock:        # the script's thread is between two polls
    router.send_multipart([ident, wire.encode("val", -1, {"key": "rdzv/x", "ok": True, "val": b"abc"})])
    router.send_multipart([ident, wire.encode("cmd", -1, {"id": 4, "op": "stacks", "arg": 4})])
    deadline = time.monotonic() + 5
    while not u.ctl.getsockopt(u.z.EVENTS) & u.z.POLLIN and time.monotonic() < deadline:
        time.sleep(0.01)
    tok = u.take_stack_ask()     # as the heartbeat thread does, reading both frames
th.join(20)
assert tok == 4, tok
assert got.get("val") == b"abc" and got["s"] < 3, got
assert u.commands() == [], "the stacks ask reached the script's commands"
u.close(0)
router.close(0)
pull.close(0)
ctx.term()
print("PASS: the store reply kept, the stacks ask the heartbeat's")
PYEOF
echo "PASS: the adapter's ctl read from two threads"
