# --no-inject: `PYTHON SCRIPT ARGS` bare, no adapter, so no hello ever
# comes. ddptop still shows each rank's exit code and, for a failure, its
# log tail; an exit 0 is a clean end. When one rank fails, nothing can hear
# a stop command: the others get SIGTERM at once (torchrun's rule), well
# before --stop-grace's 30 s, and nothing is left running.
. tests/lib.sh
cat >"$TMP/bare.py" <<'PYEOF'
import os, sys, time
rank = int(os.environ["RANK"])
print(f"rank {rank} of {os.environ['WORLD_SIZE']} args {' '.join(sys.argv[1:])}", flush=True)
if "--fail" in sys.argv and rank == 1:
    time.sleep(0.5)
    print("rank 1 gives up: no data", file=sys.stderr, flush=True)
    sys.exit(3)
if "--fail" in sys.argv:
    time.sleep(120)
PYEOF

out=$TMP/ok.jsonl
"$DDPTOP" run -n 2 --python "$PY" --no-inject --headless --json --log-dir "$TMP/logs" "$TMP/bare.py" a b >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$out" "$TMP"/logs/*; die "bare, both exit 0: ddptop exited $rc"; }
grep -q '"verdict":"job done: all 2 ranks ended cleanly"' "$out" || { cat "$out"; die "no clean verdict"; }
for r in 0 1; do
    grep -qx "rank $r of 2 args a b" "$TMP/logs/rank-$r.log" || { cat "$TMP/logs/rank-$r.log"; die "rank $r: not run bare"; }
    grep -q "\"r\":$r,\"state\":\"exited\",\"how\":\"exit 0\"" "$out" || { cat "$out"; die "rank $r: not exit 0"; }
done
! grep -q '"k":"hang"' "$out" || { cat "$out"; die "a hang verdict for ranks that speak no protocol"; }

out=$TMP/fail.jsonl
start=$(date +%s)
timeout 100 "$DDPTOP" run -n 2 --python "$PY" --no-inject --headless --json "$TMP/bare.py" --fail >"$out" 2>&1
rc=$?
secs=$(( $(date +%s) - start ))
cat "$out"
[ $rc -eq 1 ] || die "a failing bare rank: ddptop exited $rc, not 1"
[ $secs -lt 25 ] || die "the other rank was not stopped at once (${secs}s)"
grep -q '"r":1,"level":"error","text":"rank 1 (pid [0-9]*) ended: exit 3' "$out" || die "rank 1's exit code not shown"
grep -q '"r":1,"level":"error","text":"log: rank 1 gives up: no data"' "$out" || die "rank 1's log tail not shown"
grep -q '"r":0,"level":"error","text":"rank 0 (pid [0-9]*) ended: SIGTERM by ddptop' "$out" || die "rank 0 not ended by SIGTERM"
pids=$(grep -o '(pid [0-9]*) ended' "$out" | tr -dc '0-9\n')
[ "$(echo "$pids" | wc -w)" -eq 2 ] || die "not two rank pids: $pids"
for p in $pids; do ! kill -0 "$p" 2>/dev/null || die "rank pid $p still running"; done
echo "PASS: --no-inject: exit codes, log tails, a failure stops the others at once"
