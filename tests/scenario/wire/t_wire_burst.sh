#!/usr/bin/env bash
# t_wire_burst.sh — bursts from a Python peer (pyzmq + msgpack, no ddptop
# code) reach a real ddptop: 2 ranks run as `--no-python python peer.py`,
# say hello on ctl, then send their steps 5 to a burst frame on tel (the
# first burst on ctl, which a receiver accepts as well) and end
# with a burst of phase + bye. The job must end DONE with both ranks at step
# 20. Then rank 0 turns hostile inside its bursts: a step claiming rank 1
# (loss 12345), bytes that are no message, a hello, a burst in a burst, and
# a whole burst claiming rank 1 from its own process (on tel) and from its
# routing id (on ctl). None of that may show; each is one bad frame (6), the
# warning names the forged step, and the good
# steps around them still count. Both runs are recorded; their replays end
# with the same summary as the live runs.
. tests/lib.sh
"$PY" -c 'import zmq, msgpack' 2>/dev/null || skip "skip: $PY cannot import zmq and msgpack"

cat >"$TMP/peer.py" <<'PYEOF'
import os, sys, time, msgpack, zmq
r, world, hostile = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), sys.argv[1] == "hostile"
ctx = zmq.Context()
ctl = ctx.socket(zmq.DEALER)
ctl.setsockopt(zmq.ROUTING_ID, f"rank-{r}".encode())
ctl.connect(os.environ["DDPTOP_CTL"])
tel = ctx.socket(zmq.PUSH)
tel.setsockopt(zmq.LINGER, 5000)
tel.connect(os.environ["DDPTOP_TEL"])
def P(k, rank=r, **kw):
    return msgpack.packb({"v": 1, "k": k, "r": rank, "t": time.time_ns(), **kw})
def burst(m, rank=r, sock=None):
    (sock or tel).send(msgpack.packb({"v": 1, "k": "burst", "r": rank, "t": time.time_ns(), "m": m}))
hello = dict(local_rank=r, world=world, local_world=world, pid=os.getpid(), host="peer", device="cpu",
             backend="gloo", version="peer.py", dataset="synthetic", model="mlp:4,2", params=10, batch=8,
             max_steps=20, steps_per_epoch=20, dataset_size=160)
ctl.send(P("hello", **hello))
time.sleep(0.3)
tel.send(P("phase", phase="train", detail=""))
step = lambda k, rank=r, loss=None: P("step", rank, epoch=0, step=k, loss=loss or 1.0 / k, lr=0.1,
                                      samples=8 * k, step_ms=5.0)
for s in range(1, 21, 5):
    m = [step(k) for k in range(s, s + 5)]
    if hostile and r == 0 and s == 6:
        m[1:1] = [step(7, rank=1, loss=12345.0), b"\xc1garbage", P("hello", **hello),
                  msgpack.packb({"v": 1, "k": "burst", "r": 0, "m": [step(8, loss=12345.0)]})]
    burst(m, sock=ctl if s == 1 else None)   # a receiver takes bursts on ctl too
    if s == 1:
        time.sleep(0.5)   # ZeroMQ keeps no order across two sockets: the later steps must not overtake these
    if hostile and r == 0 and s == 6:
        burst([step(9, rank=1, loss=12345.0)], rank=1)
        burst([step(9, rank=1, loss=12345.0)], rank=1, sock=ctl)   # from routing id rank-0
    time.sleep(0.05)
if hostile:
    time.sleep(1.5)   # a progress line (once a second) after the hostile frames
burst([P("phase", phase="destroyed", detail=""), P("bye", status=0, step=20)])
time.sleep(0.3)
PYEOF

for mode in good hostile; do
    out=$TMP/$mode.json
    timeout 60 "$DDPTOP" run -n 2 --headless --json --record "$TMP/$mode.rec" --no-python "$PY" "$TMP/peer.py" $mode \
        >"$out" 2>&1
    rc=$?
    [ $rc = 0 ] || { tail -n 20 "$out"; die "$mode: ddptop exited $rc"; }
    # the recording keeps the bursts; its replay shows what the live screen showed
    timeout 60 "$DDPTOP" replay "$TMP/$mode.rec" --speed 64 --headless --json >"$TMP/$mode.replay" 2>&1 \
        || die "$mode: replay exited $?: $(tail -3 "$TMP/$mode.replay")"
    [ "$(grep '"k":"summary"' "$out" | sed 's/"t":[0-9.]*,//')" = "$(grep '"k":"summary"' "$TMP/$mode.replay" | sed 's/"t":[0-9.]*,//')" ] \
        || die "$mode: replay summary differs: $(grep summary "$out" "$TMP/$mode.replay")"
    "$PY" - "$out" $mode <<'PYEOF' || exit 1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
mode = sys.argv[2]
fail = []
summ = [l for l in lines if l["k"] == "summary"]
if not summ or summ[-1]["state"] != "DONE" or [x["step"] for x in summ[-1]["ranks"]] != [20, 20]:
    fail.append(f"summary: {summ}")
elif [x["loss"] for x in summ[-1]["ranks"]] != [0.05, 0.05]:
    fail.append(f"last losses {[x['loss'] for x in summ[-1]['ranks']]}")
prog = [l for l in lines if l["k"] == "progress"]
bad = prog[-1]["bad_frames"] if prog else None
text = open(sys.argv[1]).read()
if "12345" in text:
    fail.append("a forged loss of 12345 reached the screen")
warn = [l["text"] for l in lines if l["k"] == "event" and l["level"] == "warn"]
if mode == "good":
    if bad != 0 or warn:
        fail.append(f"good bursts: bad_frames {bad}, warnings {warn}")
else:
    if bad != 6:
        fail.append(f"hostile bursts: bad_frames {bad}, want 6")
    if not any("dropped a step claiming rank 1 from a burst of rank 0" in w for w in warn):
        fail.append(f"no warning names the forged step: {warn}")
if fail:
    print("FAIL: %s:\n  " % mode + "\n  ".join(fail))
    sys.exit(1)
print(f"{mode}: 2 ranks at step 20 through bursts, bad_frames {bad}")
PYEOF
done
echo "PASS: bursts from Python reach ddptop whole; forged or broken messages inside them are dropped and counted"
