# A rank killed (-9) right after it published its Gloo address leaves the
# others in Gloo's connect, where no store wait sees a stop: they used to
# wait out ddptop's 30 s stop grace (then SIGTERM) or --timeout. Now they
# ask ddptop between connect attempts and leave within a second or so, each
# with one line naming the dead rank, exit 0; the job's verdict names rank 1.
# The window comes from the worker's test hook DDPTOP_TEST_KILL_AFTER_SET
# (workers/comm/comm_gloo.cc): rank 1 dies after setting its key "coll/1".
. tests/lib.sh
export DDPTOP_TEST_KILL_AFTER_SET=coll/1
start=$(date +%s)
# --timeout 60: without the fix the survivors sit in Gloo for 30-60 s.
timeout 90 "$DDPTOP" run -n 3 --headless -- --dataset synthetic --model mlp:20,16,3 --timeout 60 \
    --no-final-ckpt >"$TMP/out" 2>&1
rc=$?
took=$(( $(date +%s) - start ))
tail -n 8 "$TMP/out"
[ $rc = 1 ] || die "exit $rc, want 1 (rank 1 died)"
grep -q "rank 1 (pid [0-9]*) ended: signal 9" "$TMP/out" || die "rank 1 was not killed by the hook"
grep -q "job failed: rank 1 signal 9" "$TMP/out" || die "the verdict does not name rank 1"
grep -q "sent SIGTERM\|sent SIGKILL" "$TMP/out" && die "ddptop had to signal the survivors (they did not act on the stop)"
# each survivor stopped naming the dead rank, or failed at once on its own
# connect (Gloo's ECONNREFUSED when it was the side that connects)
for r in 0 2; do
    grep -q "r$r rank $r: rendezvous -> stopping (rank 1 died during the rendezvous" "$TMP/out" ||
        grep -q "r$r .*rank $r: rendezvous -> error: .*Connection refused" "$TMP/out" ||
        die "rank $r neither stopped naming rank 1 nor failed on its connect"
done
grep -q "rendezvous -> stopping (rank 1 died during the rendezvous" "$TMP/out" ||
    echo "note: both survivors were the connecting side this time (nothing waited in the connect)"
[ $took -le 20 ] || die "the job took $took s to end after rank 1 died (the stop grace is 30 s)"
wait_for 10 no_workers || die "workers left running: $(our_workers)"
echo "PASS: the survivors left the connect ${took} s after the start, naming rank 1"
