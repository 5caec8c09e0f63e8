#!/usr/bin/env bash
# t_tel_stream.sh — the telemetry stream (transport/net/tstream.h,
# docs/PROTOCOL.md "The telemetry stream"). A 2-rank job of the built-in
# trainer sends its telemetry over ddptop's TEL.stream (both ranks connected
# there, not to ZeroMQ's tel), while a stranger of the same uid connects to
# the stream and
#   - greets it with "GET / HTTP/1.1": closed, one warning naming it;
#   - greets it right, then sends a step for rank 0 with loss 12345 from its
#     own process: dropped (not rank 0's process) and counted;
#   - announces a frame of 2^31 bytes: closed;
#   - opens 200 connections (more than the 68 a 2-rank job takes): the rest
#     are closed, the ranks keep theirs.
# Rank 0 steps at most every 8 ms (--fault slow), so the job is still
# training while the stranger works. The job must train to its last step
# with every step in its recording, nothing dropped, the forged loss
# nowhere, the bad frames counted. Then the
# same job with DDPTOP_TEL_STREAM=0 runs on ZeroMQ's tel alone (no stream
# file while it runs) to the same end.
. tests/lib.sh
"$PY" -c 'import msgpack' 2>/dev/null || skip "skip: $PY cannot import msgpack"
command -v ss >/dev/null || skip "skip: no ss (iproute2)"
out=$TMP/run.json
"$DDPTOP" run -n 2 --headless --json --record "$TMP/run.rec" -- --dataset synthetic --model mlp:64,64,10 \
    --steps 1000 --batch-size 8 --fault slow:0:8ms --ckpt-dir "$TMP/ck" --no-final-ckpt >"$out" 2>"$TMP/run.err" &
pj=$!
CLEANUPS+=("kill -9 $pj")
dir=
wait_for 20 grep -q '"text":"attach: ddptop attach ipc://' "$out" || die "no attach line: $(tail -3 "$out")"
dir=$(sed -n 's|.*attach: ddptop attach ipc://\(.*\)/ctl".*|\1|p' "$out" | head -1)
[ -S "$dir/tel.stream" ] || die "no telemetry stream at $dir/tel.stream"
conns() { ss -x 2>/dev/null | grep -c "$dir/tel.stream"; }
wait_for 20 sh -c "[ \$(ss -x 2>/dev/null | grep -c '$dir/tel.stream') -ge 2 ]" ||
    die "the ranks are not on the stream ($(conns) connections)"
"$PY" - "$dir/tel.stream" >"$TMP/stranger.out" 2>&1 <<'PYEOF' || die "the stranger failed: $(tail -3 "$TMP/stranger.out")"
import os, socket, sys, time, msgpack
path = sys.argv[1]
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s
def closed(s, secs=5):
    s.settimeout(secs)
    try:
        return s.recv(1) == b""
    except (socket.timeout, ConnectionResetError):
        return False
a = conn(); a.sendall(b"GET / HTTP/1.1\r\n\r\n")
step = msgpack.packb({"v": 1, "k": "step", "r": 0, "t": time.time_ns(), "epoch": 0, "step": 5, "loss": 12345.0,
                      "lr": 0.1, "samples": 40})
b = conn(); b.sendall(b"DDPTEL1\n" + len(step).to_bytes(4, "little") + step)
c = conn(); c.sendall(b"DDPTEL1\n" + (1 << 31).to_bytes(4, "little"))
print("greeting closed:", closed(a), "length closed:", closed(c))
many = []
for _ in range(200):
    try:
        many.append(conn())
    except OSError:
        break
time.sleep(1.0)
shut = sum(closed(s, 0.2) for s in many)
print(f"of {len(many)} more connections {shut} closed")
if not shut:
    sys.exit("none of 200 extra connections was closed")
for s in many + [a, b, c]:
    s.close()
PYEOF
cat "$TMP/stranger.out"
grep -q 'greeting closed: True length closed: True' "$TMP/stranger.out" || die "a bad connection was not closed"
wait $pj
rc=$?
[ $rc = 0 ] || die "ddptop exited $rc: $(tail -3 "$TMP/run.err")"
"$DDPTOP" export "$TMP/run.rec" --jsonl "$TMP/run.jsonl" >/dev/null || die "export failed"
"$PY" - "$out" "$TMP/run.jsonl" <<'PYEOF' || exit 1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
rec = [json.loads(l) for l in open(sys.argv[2])]
steps = {(m["r"], m["step"]) for m in rec if m.get("k") == "step"}
summ = [m for m in lines if m["k"] == "summary"][-1]
warn = [m["text"] for m in lines if m["k"] == "event" and m["level"] == "warn"]
bad = max((m.get("bad_frames", 0) for m in lines if m["k"] == "progress"), default=None)
fail = []
if summ["state"] != "DONE" or summ["step"] != 1000:
    fail.append(f"summary {summ['state']} at step {summ['step']}")
if any(m.get("k") == "step" and m.get("loss") == 12345.0 for m in rec) or "12345" in json.dumps(summ):
    fail.append("the forged loss reached the job")
for r in (0, 1):
    missing = [s for s in range(1, 1001) if (r, s) not in steps]
    if missing:
        fail.append(f"rank {r}: {len(missing)} steps missing (first {missing[0]})")
drops = max((m.get("drops", 0) for m in rec if m.get("k") == "step"), default=-1)
if drops:
    fail.append(f"drops {drops}")
if bad is None or bad < 3:
    fail.append(f"bad frames {bad}: the closed connections and the forged step are not counted")
if not any("telemetry stream: closed a connection: process" in w for w in warn):
    fail.append(f"no warning naming the closed connection: {warn}")
if not any("dropped a step claiming rank 0 from process" in w for w in warn):
    fail.append(f"no warning about the forged step: {warn}")
print(f"{len(steps)} steps, {bad} bad frames, warnings: {warn}")
if fail:
    print("FAIL: " + "; ".join(fail))
    sys.exit(1)
PYEOF
# ZeroMQ's tel alone
out2=$TMP/zmq.json
DDPTOP_TEL_STREAM=0 "$DDPTOP" run -n 2 --headless --json --record "$TMP/zmq.rec" -- --dataset synthetic --model mlp:64,64,10 --steps 2000 \
    --batch-size 8 --ckpt-dir "$TMP/ck2" --no-final-ckpt >"$out2" 2>"$TMP/zmq.err" &
pz=$!
CLEANUPS+=("kill -9 $pz")
wait_for 20 grep -q '"text":"attach: ddptop attach ipc://' "$out2" || die "no attach line: $(tail -3 "$out2")"
dir2=$(sed -n 's|.*attach: ddptop attach ipc://\(.*\)/ctl".*|\1|p' "$out2" | head -1)
sleep 0.5
[ -e "$dir2/tel.stream" ] && die "DDPTOP_TEL_STREAM=0, yet a stream at $dir2/tel.stream"
wait $pz || die "ddptop (ZeroMQ's tel) exited $?: $(tail -3 "$TMP/zmq.err")"
grep -q '"k":"summary".*"state":"DONE".*"step":2000' "$out2" || die "ZeroMQ's tel: $(grep summary "$out2")"
"$DDPTOP" export "$TMP/zmq.rec" --jsonl "$TMP/zmq.jsonl" >/dev/null || die "export failed"
n=$(grep -c '"k":"step"' "$TMP/zmq.jsonl")
[ "$n" = 4000 ] || die "ZeroMQ's tel: $n steps recorded of 4000"
no_workers || die "workers left running"
echo "PASS: telemetry over the stream, hostile connections closed and counted, ZeroMQ's tel with DDPTOP_TEL_STREAM=0"
