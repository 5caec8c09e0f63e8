#!/usr/bin/env bash
# t_publish.sh — the pub socket seen from Python: examples/subscriber.py
# (pyzmq + msgpack) receives what a publisher (tests/tool_pub, through
# transport/net/publish.c) re-publishes, prints one line per step with the
# right loss, and exits 0 once every rank said bye. Over tcp://127.0.0.1:*
# (the port the publisher got) and over ipc://.

. tests/lib.sh
TOOL=$BUILD/tests/tool_pub
SUB=examples/subscriber.py
[ -x "$TOOL" ] || die "$TOOL is not built"
"$PY" -c 'import zmq, msgpack' 2>/dev/null || skip "skip: $PY cannot import zmq and msgpack"

one_run() {   # ENDPOINT LABEL
    local ep=$1 label=$2 flag=$TMP/go-$2 out=$TMP/pub-$2.out sub=$TMP/sub-$2.out
    "$TOOL" "$ep" "$flag" --ranks 3 --steps 5 >"$out" 2>&1 &
    local pub_pid=$!
    CLEANUPS+=("kill $pub_pid")
    wait_for 10 grep -q '^endpoint=' "$out" || die "$label: publisher did not start: $(cat "$out")"
    local bound
    bound=$(sed -n 's/^endpoint=//p' "$out")
    timeout 30 "$PY" "$SUB" "$bound" --timeout 20 >"$sub" 2>"$sub.err" &
    local sub_pid=$!
    # The publisher repeats hellos until the subscriber has seen every rank.
    wait_for 15 bash -c "[ \$(grep -c ' hello: ' '$sub') -ge 3 ]" || die "$label: subscriber saw no hellos: $(cat "$sub" "$sub.err")"
    touch "$flag"
    wait $sub_pid; local rc=$?
    wait $pub_pid || die "$label: publisher failed: $(cat "$out")"
    [ $rc = 0 ] || die "$label: subscriber exited $rc: $(cat "$sub" "$sub.err")"
    "$PY" - "$sub" "$label" <<'PYEOF' || exit 1
import sys
lines = open(sys.argv[1]).read().splitlines()
steps = [l for l in lines if "  step " in l]
want = [f"rank {r}  epoch 0  step {s}  loss {(r + 1) / (s + 1):.6g}" for s in range(1, 6) for r in range(3)]
ok = steps == want and lines[-1] == "all 3 ranks said bye" and \
     sorted(l for l in lines if " bye " in l) == [f"rank {r} bye (status 0) after step 5" for r in range(3)]
if not ok:
    print(f"FAIL: {sys.argv[2]}: subscriber printed:\n" + "\n".join(lines))
    sys.exit(1)
PYEOF
    grep -q "drops=0" "$out" || die "$label: publisher dropped frames: $(cat "$out")"
    echo "$label: 15 steps and 3 byes received"
}
one_run "tcp://127.0.0.1:*" tcp
one_run "ipc://$TMP/pub.sock" ipc
[ ! -e "$TMP/pub.sock" ] || die "the publisher left its ipc socket file"

# Not loopback: refused in one line that says why.
"$TOOL" "tcp://0.0.0.0:5555" "$TMP/never" >"$TMP/refused" 2>&1; rc=$?
[ $rc = 2 ] && [ "$(wc -l <"$TMP/refused")" = 1 ] && grep -q "CURVE keys" "$TMP/refused" \
    || die "tcp://0.0.0.0 not refused properly (exit $rc): $(cat "$TMP/refused")"

# Ctrl-C: a quiet exit 0, no traceback. (A background job of a script starts
# with SIGINT ignored; restore Python's handler as a terminal would have it.)
"$PY" -c 'import runpy, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")' "$SUB" "ipc://$TMP/nobody.sock" >"$TMP/int.out" 2>&1 &
sp=$!
CLEANUPS+=("kill -9 $sp")
wait_for 10 grep -q listening "$TMP/int.out" || die "subscriber did not start"
kill -INT $sp
wait_for 10 bash -c "! kill -0 $sp 2>/dev/null" || die "subscriber ignored Ctrl-C"
wait $sp; rc=$?
[ $rc = 0 ] && ! grep -q Traceback "$TMP/int.out" || die "Ctrl-C: exit $rc: $(cat "$TMP/int.out")"
echo "publish: ok"
