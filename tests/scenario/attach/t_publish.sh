#!/usr/bin/env bash
# t_publish.sh — the pub socket seen from Python: examples/subscriber.py
# (pyzmq + msgpack) receives what a publisher (tests/tool_pub, through
# transport/net/publish.c) re-publishes, prints one line per step with the
# right loss, and exits 0 once every rank said bye. Over tcp://127.0.0.1:*
# (the port the publisher got) and over ipc://. Steps lost on the way
# (tool_pub --lose) are named on its stderr, once per rank and gap.

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

# Frames lost on the way (step 3 of every rank): the subscriber says which.
"$TOOL" "ipc://$TMP/lose.sock" "$TMP/go-lose" --ranks 2 --steps 5 --lose 3 >"$TMP/pub-lose.out" 2>&1 &
lose_pid=$!
CLEANUPS+=("kill $lose_pid")
wait_for 10 grep -q '^endpoint=' "$TMP/pub-lose.out" || die "lose: publisher did not start: $(cat "$TMP/pub-lose.out")"
timeout 30 "$PY" "$SUB" "ipc://$TMP/lose.sock" --timeout 20 >"$TMP/sub-lose.out" 2>"$TMP/sub-lose.err" &
sub_pid=$!
wait_for 15 bash -c "[ \$(grep -c ' hello: ' '$TMP/sub-lose.out') -ge 2 ]" || die "lose: subscriber saw no hellos"
touch "$TMP/go-lose"
wait $sub_pid || die "lose: subscriber exited $?: $(cat "$TMP/sub-lose.err")"
wait $lose_pid || die "lose: publisher failed: $(cat "$TMP/pub-lose.out")"
for r in 0 1; do
    grep -q "^rank $r: step 3 missing (lost on the way" "$TMP/sub-lose.err" \
        || die "lose: no gap reported for rank $r: $(cat "$TMP/sub-lose.err")"
done
[ "$(grep -c missing "$TMP/sub-lose.err")" = 2 ] || die "lose: gaps reported: $(cat "$TMP/sub-lose.err")"
grep -q "  step 3  " "$TMP/sub-lose.out" && die "lose: step 3 printed though never sent"
echo "lose: step 3 of each rank reported missing"
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

# A CURVE publisher (ddptop run --keys, tcp): the subscriber with the job's
# key file gets every step; without it, nothing (CURVE refuses it); a key
# file others can read is refused in one line, exit 2.
if [ -x "$BUILD/ddptop" ] && "$PY" -c 'import zmq, sys; sys.exit(not zmq.has("curve"))' 2>/dev/null; then
    mkdir -p "$TMP/curve"
    ddptop=$(cd "$BUILD" && pwd)/ddptop
    ( cd "$TMP/curve" && exec "$ddptop" run --headless --keys job.keys --publish 'tcp://127.0.0.1:*' \
        -n 2 --stop-grace 1 -- --steps 30 --pace 10 >out 2>&1 ) &
    job=$!
    CLEANUPS+=("kill $job")
    wait_for 15 grep -q '^ddptop: publishing on ' "$TMP/curve/out" || die "curve: no endpoint: $(cat "$TMP/curve/out")"
    ep=$(sed -n 's/^ddptop: publishing on //p' "$TMP/curve/out")
    timeout 60 "$PY" "$SUB" --keys "$TMP/curve/job.keys" "$ep" --timeout 30 >"$TMP/curve/keyed" 2>&1 &
    keyed=$!
    timeout 30 "$PY" "$SUB" "$ep" --timeout 2 >"$TMP/curve/plain" 2>&1; plain_rc=$?
    wait $keyed || die "curve: the subscriber with keys exited $?: $(cat "$TMP/curve/keyed")"
    wait $job || die "curve: the job failed: $(cat "$TMP/curve/out")"
    [ "$(grep -c '  step ' "$TMP/curve/keyed")" = 60 ] && grep -q '^all 2 ranks said bye' "$TMP/curve/keyed" \
        || die "curve: the keyed subscriber missed steps: $(cat "$TMP/curve/keyed")"
    [ $plain_rc = 1 ] && ! grep -q '  step ' "$TMP/curve/plain" \
        || die "curve: a subscriber without keys was let in (exit $plain_rc): $(cat "$TMP/curve/plain")"
    cp "$TMP/curve/job.keys" "$TMP/curve/open.keys" && chmod 644 "$TMP/curve/open.keys"
    "$PY" "$SUB" --keys "$TMP/curve/open.keys" "$ep" >"$TMP/curve/open" 2>&1; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <"$TMP/curve/open")" = 1 ] && grep -q 'readable by others' "$TMP/curve/open" \
        || die "curve: an open key file not refused in one line, exit 2 (exit $rc): $(cat "$TMP/curve/open")"
    echo "curve: 60 steps with the job's keys, none without"
fi
echo "publish: ok"
