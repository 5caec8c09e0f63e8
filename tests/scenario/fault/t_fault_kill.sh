# Teaching fault kill:1@20 on a real 2-rank job: rank 1 explains itself in
# one sentence and dies by SIGKILL after 20 steps; rank 0 fails in its next
# all-reduce; ddptop reports "signal 9 (Killed)", exits 1, and nothing is
# left running.
. tests/lib.sh
out=$TMP/out.txt
timeout 60 "$DDPTOP" run -n 2 --headless -- --dataset synthetic --model mlp:16,32,4 --epochs 100000 \
    --batch-size 8 --no-final-ckpt --fault kill:1@20 >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 1 ] || die "ddptop exited $rc, want 1"
grep -q "rank 1: signal 9 (Killed), step 20" "$out" || die "rank 1's end is not signal 9 at step 20"
grep -q "warning: fault: rank 1 kills itself at step 20" "$out" || die "no fault sentence"
wait_for 5 no_workers || die "workers left: $(our_workers)"
