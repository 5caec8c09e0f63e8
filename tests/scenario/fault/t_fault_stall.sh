# Teaching fault stall:1@10: rank 1 stops stepping after step 10 but stays
# alive with its sockets open. The hang view names it (rank 0 waits in an
# all-reduce for rank 1, sleeping); rank 0's collective times out
# (--timeout 3) and the stop ladder ends the stalled rank: exit 1, nothing
# left running.
. tests/lib.sh
out=$TMP/out.jsonl
timeout 60 "$DDPTOP" run -n 2 --headless --json --hang-after 1 --stop-grace 1 --timeout 3 -- --dataset synthetic \
    --model mlp:16,32,4 --epochs 100000 --batch-size 8 --no-final-ckpt --fault stall:1@10 >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$out"; die "ddptop exited $rc, want 1"; }
grep -q '"r":1,"level":"warn","text":"fault: rank 1 stops stepping at step 10' "$out" || die "no fault sentence"
hang=$(grep '"k":"hang"' "$out" | head -1)
[ -n "$hang" ] || { cat "$out"; die "no hang object"; }
echo "$hang"
"$PY" - "$hang" <<'PYEOF' || die "hang object wrong"
import json, sys
h = json.loads(sys.argv[1])
assert h["waiting"] == [0] and h["missing"] == [1], h
assert "rank 1" in h["verdict"] and "after step 10" in h["verdict"], h["verdict"]
PYEOF
grep -q '"r":1,"state":"failed","how":"SIGTERM by ddptop"' "$out" || die "the ladder did not end rank 1"
wait_for 5 no_workers || die "workers left: $(our_workers)"
