# A hang, as the engineer debugging one reads it from a script: rank 1 of a
# real 2-rank job is SIGSTOPped; rank 0 waits in its all-reduce; ddptop's
# headless JSON says {"k":"hang",...,"waiting":[0],"missing":[1]} with a
# verdict naming rank 1 as stopped; the shutdown ladder then ends the job
# (exit 1) and nothing is left running. The same with the scripted feeder
# and 4 ranks (3 waiting, 1 missing).
. tests/lib.sh
out=$TMP/out.jsonl
"$DDPTOP" run -n 2 --headless --json --hang-after 2 --stop-grace 1 -- --dataset synthetic \
    --model mlp:16,32,4 --epochs 100000 --batch-size 8 --no-final-ckpt >"$out" 2>"$TMP/err" &
dp=$!
CLEANUPS+=("kill -9 $dp")
wait_for 20 grep -q '"k":"progress".*"step":[1-9]' "$out" || { cat "$out" "$TMP/err"; die "job never trained"; }
sleep 0.5
victim=""
for p in $(our_workers); do
    tr '\0' '\n' </proc/$p/environ | grep -qx RANK=1 && victim=$p
done
[ -n "$victim" ] || die "no rank 1 worker found"
kill -STOP "$victim"
CLEANUPS+=("kill -CONT $victim")
wait_for 15 grep -q '"k":"hang"' "$out" || { tail -5 "$out"; die "no hang object within 15 s"; }
hang=$(grep '"k":"hang"' "$out" | head -1)
echo "$hang"
"$PY" - "$hang" <<'PYEOF' || die "hang object wrong"
import json, sys
h = json.loads(sys.argv[1])
assert h["waiting"] == [0] and h["missing"] == [1], h
assert h["op"] == "allreduce" and h["seq"] > 0 and h["waited_ms"] >= 2000, h
assert "rank 1" in h["verdict"] and "SIGSTOP" in h["verdict"], h["verdict"]
PYEOF
# the event names the cause first: the stopped rank, then who waits for it
grep -q '"text":"hang: rank 1 is stopped (SIGSTOP)[^"]*; rank 0 waits in all-reduce' "$out" || die "no hang event line"
kill -TERM "$dp"
ended_within 15 $dp || die "ddptop did not end after SIGTERM"
[ $rc -eq 1 ] || die "ddptop exited $rc, want 1 (a rank had to be killed)"
kill -CONT "$victim" 2>/dev/null
wait_for 5 no_workers || die "workers left: $(our_workers)"

# four ranks, scripted: ranks 0,2,3 inside all-reduce #N, rank 1 stalled outside it
FEED=$PWD/$BUILD/tests/tool_feed
case $BUILD in /*) FEED=$BUILD/tests/tool_feed;; esac
cat >"$TMP/h.feed" <<'FEED'
set beat=0.3 sync=1
0    *    hello max_steps=9000
0.1  *    phase phase=train
0.1  *    train from=1 to=9000 rate=20 buckets=1
1.0  1    stall
1.0  0,2,3 block
FEED
DDPTOP_WORKER=$FEED timeout 40 "$DDPTOP" run -n 4 --headless --json --hang-after 2 --stop-grace 1 -- \
    --script "$TMP/h.feed" >"$TMP/f.jsonl" 2>&1 &
fp=$!
CLEANUPS+=("kill -9 $fp")
wait_for 15 grep -q '"k":"hang"' "$TMP/f.jsonl" || { tail -5 "$TMP/f.jsonl"; die "no hang object from the feeder job"; }
"$PY" - "$(grep '"k":"hang"' "$TMP/f.jsonl" | head -1)" <<'PYEOF' || die "feeder hang object wrong"
import json, sys
h = json.loads(sys.argv[1])
assert h["waiting"] == [0, 2, 3] and h["missing"] == [1], h
assert h["verdict"].startswith("ranks 0,2,3 wait in all-reduce #"), h["verdict"]
PYEOF
kill -TERM "$fp"
wait "$fp"
echo "hang verdicts ok"
