# Teaching fault unsafe-stop@10: rank 0 stops after step 10, rank 1 would
# after 11, without agreeing through the flags: rank 1 waits in an
# all-reduce rank 0 never joins (rank 0 waits in its final barrier). The
# headless JSON has a hang object naming both, with the op mismatch; SIGTERM to ddptop runs the
# shutdown ladder, which ends the job (exit 1), and nothing is left running.
. tests/lib.sh
out=$TMP/out.jsonl
"$DDPTOP" run -n 2 --headless --json --hang-after 2 --stop-grace 2 -- --dataset synthetic \
    --model mlp:16,32,4 --epochs 100000 --batch-size 8 --no-final-ckpt --fault unsafe-stop@10 >"$out" 2>"$TMP/err" &
dp=$!
CLEANUPS+=("kill -9 $dp")
wait_for 15 grep -q '"k":"hang"' "$out" || { cat "$out" "$TMP/err"; die "no hang object within 15 s"; }
hang=$(grep '"k":"hang"' "$out" | head -1)
echo "$hang"
"$PY" - "$hang" <<'PYEOF' || die "hang object wrong"
import json, sys
h = json.loads(sys.argv[1])
# rank 1 in all-reduce #N, rank 0 in barrier #N: which of the two the
# hang view calls the waiter depends on whose beat came first
assert sorted(h["waiting"] + h["missing"]) == [0, 1] and len(h["waiting"]) == 1, h
assert h["op"] in ("allreduce", "barrier") and h["mismatch"], h
assert "after step 10" in h["verdict"], h["verdict"]
PYEOF
grep -q '"r":0,"level":"warn","text":"fault: unsafe stop' "$out" || die "no fault sentence"
kill -TERM "$dp"
ended_within 15 $dp || die "ddptop did not end after SIGTERM"
[ $rc -eq 1 ] || die "ddptop exited $rc, want 1"
wait_for 5 no_workers || die "workers left: $(our_workers)"
