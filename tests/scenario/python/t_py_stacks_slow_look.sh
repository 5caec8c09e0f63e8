# The second look of a gathering never reads the first look's dump as its
# own. A rank whose dump is written slowly (a busy machine: here the
# script's own handler stands in for faulthandler and writes thread A's
# frames one every 150 ms for 3.75 s, then thread B) is still writing its
# first dump when the first look's 3 s are up; the second look's signal
# waits until the rank's log has been quiet 200 ms, so what the second
# look reads is the second dump alone: `ddptop stacks` shows frames of
# one dump only (each dump names its number in its functions), never
# thread B of the first dump beside thread A of the second.
. tests/lib.sh
. tests/scenario/python/lib_py.sh
cat >"$TMP/slow.py" <<'PYEOF'
import os, signal, sys, time
import torch.distributed as dist
dist.init_process_group("gloo")
n = [0]
busy, pending = [False], [0]
def slow_dump(sig, frame):
    if busy[0]:              # one dump at a time, as faulthandler's: the next one after this one
        pending[0] += 1
        return
    busy[0] = True
    while True:
        n[0] += 1
        sys.stderr.write('Thread 0x00000000000000a1 (most recent call first):\n')
        sys.stderr.flush()
        for i in range(25):
            sys.stderr.write(f'  File "slow.py", line {100 + i} in dump_{n[0]}\n')
            sys.stderr.flush()
            time.sleep(0.15)
        sys.stderr.write(f'\nThread 0x00000000000000b2 (most recent call first):\n'
                         f'  File "slow.py", line 5 in dump_{n[0]}_b\n\n')
        sys.stderr.flush()
        if not pending[0]:
            break
        pending[0] -= 1
    busy[0] = False
signal.signal(signal.SIGUSR1, slow_dump)   # in place of the adapter's faulthandler
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
dist.destroy_process_group()
PYEOF
py_exec -n 1 --headless --log-dir "$TMP/logs" -- "$TMP/slow.py" "$TMP/go" >"$TMP/out" 2>&1 &
dp=$!
CLEANUPS+=("kill -9 $dp" "for p in \$(our_ranks); do kill -9 \$p; done")
EP=
find_ep() {
    local p
    for p in $(our_ranks); do
        EP=$(tr '\0' '\n' </proc/$p/environ | sed -n 's/^DDPTOP_CTL=//p') && [ -n "$EP" ] && return 0
    done
    return 1
}
wait_for 60 find_ep || die "no rank with a control endpoint"
wait_for 60 grep -q "rank 0 hello" "$TMP/out" || { cat "$TMP/out"; die "no hello"; }
timeout 60 "$DDPTOP" stacks "$EP" >"$TMP/tree.txt" 2>"$TMP/tree.err" || { cat "$TMP/tree.err"; die "ddptop stacks failed"; }
cat "$TMP/tree.txt"
grep -q "dump_" "$TMP/tree.txt" || die "no frame of a dump in the tree"
dumps=$(grep -o 'dump_[0-9]*' "$TMP/tree.txt" | sort -u)
[ "$(echo "$dumps" | wc -l)" = 1 ] || die "the second look read more than its own dump: $(echo $dumps)"
touch "$TMP/go"
wait $dp
rc=$?
[ $rc = 0 ] || { tail -5 "$TMP/out"; die "ddptop exited $rc"; }
echo "PASS: the second look reads its own dump only ($dumps)"
