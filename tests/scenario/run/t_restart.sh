# --max-restarts 1: rank 1 of a real 2-rank job is killed (kill -9) after
# its first checkpoints; ddptop stops rank 0, starts both again with
# --resume CKPT_DIR/latest, the output counts the restart ("restart 1/1:
# resuming from step N"), the job ends cleanly (exit 0), each rank has a
# log per run in --log-dir, and nothing is left running. The job starts
# from --init-from weights: the restart drops that option (the checkpoint
# has its own weights; the trainer refuses both).
. tests/lib.sh
out=$TMP/out.txt
"$DDPTOP" run -n 1 --headless -- --steps 1 --dataset synthetic --model mlp:784,1024,1024,10 --batch-size 8 \
    --ckpt-dir "$TMP/init" >/dev/null 2>&1 || die "could not make the initial weights"
"$DDPTOP" run -n 2 --headless --max-restarts 1 --stop-grace 3 --log-dir "$TMP/logs" -- --ckpt-every 10 \
    --init-from "$TMP/init/latest/model.safetensors" \
    --steps 200 --epochs 1000 --dataset synthetic --model mlp:784,1024,1024,10 --batch-size 128 \
    --ckpt-dir "$TMP/ck" >"$out" 2>&1 &
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
[ $rc -eq 0 ] || die "ddptop exited $rc after a restart, want 0"
grep -q "restart 1/1: resuming from step [1-9][0-9]*" "$out" || die "no restart line"
grep -q "signal 9" "$out" || die "the kill is not reported"
grep -qi "job done" "$out" || die "no clean verdict"
[ -e "$TMP/logs/rank-0.log" ] && [ -e "$TMP/logs/rank-1.restart-1.log" ] || die "log files: $(ls "$TMP/logs")"
wait_for 3 no_workers || die "workers left running: $(our_workers)"
