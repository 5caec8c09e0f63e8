# A "stack" answer counts only for the look that asked for it: each look's
# "stacks" command carries a new token, and ddptop drops an answer with
# another one (a late answer to an earlier look). A hand-made rank under
# `ddptop listen` (the adapter's uplink, no torch) answers every ask twice
# with the wrong tokens (the previous look's, and one no look had):
# `ddptop stacks` shows "(no stack within 3 s)" and none of those answers'
# frames. The same rank answering with the asked token: its frame.
. tests/lib.sh
export PYTHONPATH=$PWD/workers/python${PYTHONPATH:+:$PYTHONPATH}
cat >"$TMP/fake.py" <<'PYEOF'
import os, sys, time
from ddptop import env, uplink
port, mode, keys, release = int(sys.argv[1]), sys.argv[2], env.read_keys(sys.argv[3]), sys.argv[4]
u = uplink.Uplink(f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port + 1}", 0, keys)
u.send_important("hello", {"local_rank": 0, "world": 1, "local_world": 1, "pid": os.getpid(), "host": "fake",
                           "device": "cpu", "backend": "gloo", "version": "fake"})
def dump(fn):
    return f'Thread 0x00000000000000a1 (most recent call first):\n  File "fake.py", line 7 in {fn}\n'
while not os.path.exists(release):
    u.send("beat", {"step": 0, "phase": "train", "seq": -1, "op": "", "since": 0, "where": "fake.py:7 wait_here"})
    u.flush()
    tok = u.take_stack_ask()
    if tok is not None and mode == "stale":
        u.send_ctl("stack", {"tok": tok - 1, "cut": False, "text": dump("an_earlier_looks_answer")})
        u.send_ctl("stack", {"tok": tok + 1000, "cut": False, "text": dump("no_looks_answer")})
    elif tok is not None:
        u.send_ctl("stack", {"tok": tok, "cut": False, "text": dump("this_looks_answer")})
    time.sleep(0.1)
u.send_important("bye", {"status": 0, "step": 0})
u.close()
PYEOF
for mode in stale fresh; do
    port=$(free_port 2) keys=$TMP/$mode.keys
    timeout 90 "$DDPTOP" listen tcp://127.0.0.1:$port --headless --keys "$keys" >"$TMP/$mode.out" 2>&1 &
    pl=$!
    CLEANUPS+=("kill -9 $pl")
    wait_for 10 test -s "$keys" || { cat "$TMP/$mode.out"; die "listen wrote no key file"; }
    timeout 80 "$PY" "$TMP/fake.py" $port $mode "$keys" "$TMP/release-$mode" >"$TMP/$mode.rank" 2>&1 &
    pr=$!
    CLEANUPS+=("kill -9 $pr")
    timeout 60 "$DDPTOP" stacks tcp://127.0.0.1:$port --keys "$keys" >"$TMP/$mode.tree" 2>&1 ||
        { cat "$TMP/$mode.tree" "$TMP/$mode.out" "$TMP/$mode.rank"; die "$mode: ddptop stacks failed"; }
    echo "--- $mode"; cat "$TMP/$mode.tree"
    touch "$TMP/release-$mode"
    wait $pr || { cat "$TMP/$mode.rank"; die "$mode: the rank failed"; }
    wait $pl || { tail -5 "$TMP/$mode.out"; die "$mode: ddptop listen exited $?"; }
done
grep -q "answer" "$TMP/stale.tree" && die "an answer with another look's token was taken"
grep -q "(no stack within 3 s)" "$TMP/stale.tree" || die "stale: no '(no stack within 3 s)'"
grep -Eq '^\* +1 +0 +.*fake\.py:7 this_looks_answer$' "$TMP/fresh.tree" || die "fresh: the answer's frame not shown"
echo "PASS: a stack answer counts only for the look whose token it carries"
