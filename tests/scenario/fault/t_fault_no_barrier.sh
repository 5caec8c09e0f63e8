# Teaching fault no-barrier: the ranks destroy the communicator without the
# final barrier. Whether a rank then fails depends on timing; the job must
# end within the timeout either way, say why once, and leave nothing running.
. tests/lib.sh
out=$TMP/out.txt
timeout 60 "$DDPTOP" run -n 2 --headless -- --dataset synthetic --model mlp:16,32,4 --steps 30 \
    --batch-size 8 --no-final-ckpt --fault no-barrier >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || [ $rc -eq 1 ] || die "ddptop exited $rc (124: it did not end)"
grep -q "warning: fault: no barrier before destroy" "$out" || die "no fault sentence"
wait_for 5 no_workers || die "workers left: $(our_workers)"
