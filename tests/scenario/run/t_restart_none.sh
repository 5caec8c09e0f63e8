# --max-restarts 0 (the default): a killed rank ends the job; ddptop stops
# the other rank, starts nothing again, exits non-zero, leaves nothing.
. tests/lib.sh
out=$TMP/out.txt
"$DDPTOP" run -n 2 --headless --max-restarts 0 --stop-grace 3 -- --ckpt-every 10 --steps 200 --epochs 1000 \
    --dataset synthetic --model mlp:784,1024,1024,10 --batch-size 128 --ckpt-dir "$TMP/ck" >"$out" 2>&1 &
dp=$!
CLEANUPS+=("kill -9 $dp")
wait_for 30 test -e "$TMP/ck/step-00000020" || { cat "$out"; die "no checkpoint at step 20"; }
victim=""
for p in $(our_workers); do
    tr '\0' '\n' </proc/$p/environ | grep -qx RANK=1 && victim=$p
done
[ -n "$victim" ] || die "no rank 1 worker found"
kill -9 "$victim"
wait $dp
rc=$?
cat "$out"
[ $rc -ne 0 ] || die "ddptop exited 0 after a rank was killed"
grep -q "restart 1/" "$out" && die "restarted with --max-restarts 0"
grep -qi "job failed" "$out" || die "no failed verdict"
wait_for 3 no_workers || die "workers left running: $(our_workers)"
