#!/usr/bin/env bash
# t_custom_trainer.sh — examples/custom_trainer speaks the protocol: a
# Python stand-in for ddptop (ROUTER for ctl, PULL for tel, as
# docs/PROTOCOL.md says) launches 2 ranks with ddptop's environment, sees
# each rank's hello on ctl under routing id "rank-N", steps with a falling
# loss on tel, sends "stop", and gets stopping/destroying/destroyed phases,
# bye with status 0 and exit 0. Also: DDPTOP_CHECK_ARGS and bad options.
. tests/lib.sh
BIN=$BUILD/examples/custom_trainer
[ -x "$BIN" ] || die "$BIN is not built (mk/examples.mk)"
"$PY" -c 'import zmq, msgpack' 2>/dev/null || skip "skip: $PY cannot import zmq and msgpack"

DDPTOP_CHECK_ARGS=1 "$BIN" --timeout 300 --steps 5 || die "DDPTOP_CHECK_ARGS with good options: exit $?"
"$BIN" --bogus 2>"$TMP/e"; rc=$?
[ $rc = 2 ] && grep -q 'unknown option "--bogus"' "$TMP/e" || die "bad option: exit $rc $(cat "$TMP/e")"
env -u DDPTOP_CTL "$BIN" 2>"$TMP/e"; rc=$?
[ $rc = 2 ] && grep -q "DDPTOP_CTL" "$TMP/e" || die "no environment: exit $rc $(cat "$TMP/e")"

timeout 60 "$PY" - "$BIN" "$TMP" <<'PYEOF' || die "custom trainer protocol check failed"
import os, subprocess, sys, time
import msgpack, zmq
binary, tmp = sys.argv[1], sys.argv[2]
ctx = zmq.Context()
ctl = ctx.socket(zmq.ROUTER); ctl.bind(f"ipc://{tmp}/ctl")
tel = ctx.socket(zmq.PULL); tel.bind(f"ipc://{tmp}/tel")
procs = []
for r in range(2):
    env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
               DDPTOP_CTL=f"ipc://{tmp}/ctl", DDPTOP_TEL=f"ipc://{tmp}/tel")
    procs.append(subprocess.Popen([binary, "--timeout", "300", "--steps", "2000", "--step-ms", "5"], env=env))
import atexit
atexit.register(lambda: [p.kill() for p in procs if p.poll() is None])   # no orphans on failure
hello, steps, phases, byes, stopped = {}, {0: [], 1: []}, {0: [], 1: []}, {}, False
poller = zmq.Poller(); poller.register(ctl, zmq.POLLIN); poller.register(tel, zmq.POLLIN)
deadline = time.time() + 30
while len(byes) < 2 and time.time() < deadline:
    for sock, _ in poller.poll(200):
        if sock is ctl:
            ident, frame = ctl.recv_multipart()
            m = msgpack.unpackb(frame, raw=False)
            assert m["v"] == 1 and m["k"] == "hello", m
            assert ident == f"rank-{m['r']}".encode(), (ident, m["r"])
            hello[m["r"]] = m
        else:
            m = msgpack.unpackb(tel.recv(), raw=False)
            assert m["v"] == 1 and isinstance(m["t"], int), m
            r = m["r"]
            if m["k"] == "step": steps[r].append(m)
            elif m["k"] == "phase": phases[r].append(m["phase"])
            elif m["k"] == "bye": byes[r] = m
    if not stopped and len(hello) == 2 and all(len(s) >= 5 for s in steps.values()):
        for r in range(2):
            ctl.send_multipart([f"rank-{r}".encode(),
                                msgpack.packb({"v": 1, "k": "cmd", "t": time.time_ns(), "id": 1, "op": "stop", "arg": 0})])
        stopped = True
codes = [p.wait(timeout=10) for p in procs]
assert codes == [0, 0], codes
assert sorted(hello) == [0, 1] and all(h["world"] == 2 for h in hello.values()), hello
for r in range(2):
    s = steps[r]
    assert [m["step"] for m in s] == list(range(1, len(s) + 1)), "steps in order"
    assert s[-1]["loss"] < s[0]["loss"], "loss falls"
    assert phases[r] == ["init", "train", "stopping", "destroying", "destroyed"], phases[r]
    assert byes[r]["status"] == 0 and byes[r]["step"] == s[-1]["step"], byes[r]
    assert len(s) < 2000, "stop was honoured"
print("custom_trainer: hello on ctl as rank-N, %d+%d steps, stop honoured, bye 0" % (len(steps[0]), len(steps[1])))
PYEOF
