# Peers inside the trust boundary (same uid, ipc) that lie. Before the ranks
# connect (they start 2 s late, through a wrapper) a squatter connects to
# ctl as "rank-0" and "rank-1" and sends a hello for rank 0: the real ranks
# still get in (their routing ids are their own, rank-R.PID.NONCE), the
# squatter's hello is refused and named, and it hears none of their traffic.
# While the 2-rank job trains headless, pyzmq peers
#   - connect a second DEALER as "rank-0" and send a hello: it gets none of
#     rank 0's traffic (no pings) and the real rank 0 keeps working;
#   - send a hello for rank 1 from routing id "evil-cmd" (host "evil-host"):
#     refused and named in the events, the host never shown;
#   - push a step for rank 0 with loss 12345 and drops 10^12, and an eval
#     with accuracy 0.999, from a process that is not rank 0: dropped and
#     counted, neither reaches the status line nor the result;
#   - use the store: a value over 1 MiB gets ok=false with a reason (it
#     once got no reply at all), timeout_ms 2^63-1 is not answered at once;
#   - 16 viewers re-send "attach" for 8 s without reading: the real
#     `ddptop attach` still gets in.
# Then Ctrl-C ends the job cleanly (exit 0, both ranks' bye).
. tests/lib.sh
"$PY" -c 'import zmq, msgpack' 2>/dev/null || skip "skip: $PY cannot import zmq and msgpack"
out=$TMP/run.out
case $BUILD in /*) W=$BUILD/ddptop-worker;; *) W=$PWD/$BUILD/ddptop-worker;; esac
printf '#!/bin/sh\nsleep 2\nexec "%s" "$@"\n' "$W" >"$TMP/late-worker"
chmod +x "$TMP/late-worker"
DDPTOP_WORKER=$TMP/late-worker "$DDPTOP" run -n 2 --headless -- --dataset synthetic --model mlp:64,64,10 --epochs 100000 --batch-size 8 \
    --no-final-ckpt >"$out" 2>&1 &
pj=$!
CLEANUPS+=("kill -9 $pj")
# the squatter: finds ddptop's private directory (owner.pid) and connects
# to its ctl as the ranks' old names before any rank runs
"$PY" - "$pj" "$TMP/squat.out" >"$TMP/squat.log" 2>&1 <<'PYEOF' &
import glob, os, sys, time, msgpack, zmq
pid, report = sys.argv[1], sys.argv[2]
d, t0 = None, time.time()
while not d and time.time() - t0 < 20:
    for o in glob.glob(os.path.join(os.environ.get("TMPDIR", "/tmp"), "ddptop-*", "owner.pid")) + \
             glob.glob("/tmp/ddptop-*/owner.pid"):
        try:
            if open(o).read().split()[0] == pid and os.path.exists(os.path.dirname(o) + "/ctl"):
                d = os.path.dirname(o)
        except (OSError, IndexError):
            pass
    time.sleep(0.005)
ctx = zmq.Context()
socks = []
for r in (0, 1):
    s = ctx.socket(zmq.DEALER); s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.ROUTING_ID, f"rank-{r}".encode()); s.connect(f"ipc://{d}/ctl"); socks.append(s)
socks[0].send(msgpack.packb({"v": 1, "k": "hello", "r": 0, "t": time.time_ns(), "local_rank": 0, "world": 2,
                             "local_world": 2, "pid": os.getpid(), "host": "squat-host", "device": "cpu",
                             "backend": "gloo", "version": "squatter"}))
open(report + ".up", "w").write(f"connected at {time.time() - t0:.2f} s\n")
heard = 0
while True:
    for s in socks:
        while s.poll(0):
            s.recv(); heard += 1
    open(report, "w").write(f"{heard}\n")
    time.sleep(0.2)
PYEOF
sq=$!
CLEANUPS+=("kill -9 $sq")
wait_for 30 test -f "$TMP/squat.out.up" || die "the squatter found no ctl: $(cat "$TMP/squat.log")"
grep -q -- "-> rendezvous" "$out" && die "a rank was up before the squatter connected: $(cat "$out")"
wait_for 60 grep -q "broadcast -> train" "$out" || { cat "$out"; die "the job did not start training"; }
ep=$(sed -n 's/.*attach: ddptop attach \(ipc:[^ ]*\).*/\1/p' "$out" | head -n 1)
[ -n "$ep" ] || { cat "$out"; die "no attach endpoint in the events"; }
tel=${ep%/ctl}/tel

"$PY" - "$ep" "$tel" >"$TMP/py.out" 2>&1 <<'PYEOF' &
import os, sys, time, msgpack, zmq
ep, tel = sys.argv[1], sys.argv[2]
ctx = zmq.Context()
def dealer(ident):
    s = ctx.socket(zmq.DEALER); s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.ROUTING_ID, ident.encode()); s.connect(ep); return s
def pk(k, **kw):
    m = {"v": 1, "k": k, "t": time.time_ns()}; m.update(kw); return msgpack.packb(m)
hello = dict(local_rank=0, world=2, local_world=2, pid=os.getpid(), host="evil-host", device="cpu",
             backend="gloo", version="rogue", dataset="synthetic", model="mlp:64,64,10")
fail = []
# 1. a second rank-0: no traffic for it
twin = dealer("rank-0")
twin.send(pk("hello", r=0, **hello))
# 2. a hello for rank 1 from another routing id
evil = dealer("evil-cmd")
evil.send(pk("hello", r=1, **hello))
# 3. forged telemetry from this process
push = ctx.socket(zmq.PUSH); push.setsockopt(zmq.LINGER, 1000); push.connect(tel)
for i in range(20):
    push.send(pk("step", r=0, epoch=0, step=10 + i, loss=12345.0, drops=10**12, samples=1))
push.send(pk("eval", r=0, epoch=0, step=10, loss=0.01, accuracy=0.999, correct=999, total=1000))
evil.send(pk("step", r=1, epoch=0, step=5, loss=12345.0, drops=10**12, samples=1))
# 4. the store (a rank routing id the job does not have)
st = dealer("rank-7")
st.send(pk("set", r=7, key="big", val=b"x" * ((1 << 20) + 1)))
if st.poll(10000):
    m = msgpack.unpackb(st.recv(), raw=False)
    if m.get("ok") is not False or "1048576" not in m.get("error", ""):
        fail.append(f"oversized set answered {m}")
else:
    fail.append("no reply to a set over 1 MiB")
st.send(pk("get", r=7, key="never", timeout_ms=2**63 - 1))
if st.poll(1500):
    fail.append(f"a get with timeout_ms 2^63-1 was answered at once: {msgpack.unpackb(st.recv(), raw=False)}")
st.send(pk("set", r=7, key="small", val=b"ok"))
if not st.poll(10000) or msgpack.unpackb(st.recv(), raw=False).get("ok") is not True:
    fail.append("a small set was not acknowledged")
# 5. 16 blind viewers, re-sending attach for 8 s; the twin must hear nothing
blind = [dealer(f"view-{i}-blind") for i in range(16)]
heard = 0
t0 = time.time()
while time.time() - t0 < 8:
    for b in blind:
        b.send(pk("cmd", op="attach", arg=1, id=0))
    while twin.poll(0):
        twin.recv(); heard += 1
    time.sleep(0.5)
if heard:
    fail.append(f"the second rank-0 received {heard} frames meant for rank 0")
print("FAIL: " + "; ".join(fail) if fail else "rogue peers done")
# keep the blind viewers knocking while the real viewer attaches
t0 = time.time()
while time.time() - t0 < 12:
    for b in blind:
        b.send(pk("cmd", op="attach", arg=1, id=0))
    time.sleep(0.5)
PYEOF
py=$!
CLEANUPS+=("kill -9 $py")
wait_for 40 grep -q "rogue peers done\|FAIL" "$TMP/py.out" || die "the rogue peers did not finish: $(cat "$TMP/py.out")"
grep -q "FAIL" "$TMP/py.out" && die "$(cat "$TMP/py.out")"
# the real viewer gets in beside 16 knocking blind ones
timeout 8 "$DDPTOP" attach "$ep" --headless --wait 5 >"$TMP/view.out" 2>&1
grep -q "attached as viewer" "$TMP/view.out" || die "ddptop attach was locked out: $(tail -n 5 "$TMP/view.out")"
grep -q "attach refused" "$TMP/view.out" && die "ddptop attach was refused: $(tail -n 5 "$TMP/view.out")"
wait $py
steps_before=$(grep -c "step" "$out")
sleep 1
kill -0 $pj 2>/dev/null || { cat "$out"; die "ddptop ended while peers lied"; }
kill -INT $pj
wait $pj; rc=$?
tail -n 12 "$out"
[ $rc = 130 ] || die "the job did not stop cleanly after Ctrl-C (exit $rc, want 130)"
grep -q 'refused a hello for rank 1 from routing id "evil-cmd"' "$out" || die "the evil-cmd hello was not named"
grep -q 'refused a hello for rank 0 from "rank-0"' "$out" || die "the squatter's hello was not named"
grep -q "squat-host" "$out" && die "the squatter's hello set a rank's host"
[ "$(cat "$TMP/squat.out")" = 0 ] || die "the squatter heard $(cat "$TMP/squat.out") frames meant for the ranks"
# one foreign frame is named (then counted): the tel push's step for rank 0 or the evil-cmd
# DEALER's for rank 1, whichever ddptop reads first (two sockets: no order between them)
grep -Eq "dropped a step claiming rank (0 from process|1 from)" "$out" || die "the forged step was not named"
grep -q "evil-host" "$out" && die "a forged hello set a rank's host"
# the forged values as the printers would show them (a bare "12345" or "99.9" also
# matched an honest step count or rate: CI failed once so)
grep -q "loss 12345\.\|r[01] 12345\." "$out" && die "a forged loss reached the screen: $(grep "loss 12345\.\|r[01] 12345\." "$out" | head -3)"
grep -q "1000000000000\|(999/1000)\|accuracy 99\.90%" "$out" && die "forged drops or a forged eval reached the summary: $(grep "1000000000000\|(999/1000)\|accuracy 99\.90%" "$out" | head -3)"
grep -q "nothing from ddptop" "$out" && die "a rank lost ddptop's pings"
grep -q "bad frames" "$out" || die "the dropped frames were not counted"
wait_for 10 no_workers || die "workers left running: $(our_workers)"
echo "PASS: lying peers changed nothing; each was refused, named or counted; the real viewer got in"
