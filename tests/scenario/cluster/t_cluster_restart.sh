# --max-restarts across nodes: two ddptops on 127.0.0.1 (node 0 and node 1's
# agent) share a checkpoint directory; rank 1, on node 1, is killed (kill -9)
# after the first checkpoints; node 0 stops rank 0, both nodes start their
# ranks again with --resume CKPT_DIR/latest, and the job ends cleanly on both.
. tests/lib.sh
port=$(free_port 2)
KEYS=$TMP/job.keys
TRAIN="--dataset synthetic --model mlp:784,512,512,10 --batch-size 64 --steps 150 --epochs 1000 --ckpt-every 10 \
    --ckpt-dir $TMP/ck"
"$DDPTOP" run --headless -n 1 --nnodes 2 --node-rank 0 --rdzv 127.0.0.1:$port --keys "$KEYS" --max-restarts 1 \
    --stop-grace 3 -- $TRAIN >"$TMP/a.out" 2>&1 &
pa=$!
CLEANUPS+=("kill -9 $pa")
wait_for 10 test -s "$KEYS" || die "node 0 wrote no key file"
"$DDPTOP" run -n 1 --nnodes 2 --node-rank 1 --rdzv 127.0.0.1:$port --keys "$KEYS" -- $TRAIN >"$TMP/b.out" 2>&1 &
pb=$!
CLEANUPS+=("kill -9 $pb")
wait_for 30 test -e "$TMP/ck/step-00000020" || { cat "$TMP/a.out"; die "no checkpoint at step 20"; }
victim=""
for p in $(our_workers); do
    tr '\0' '\n' </proc/$p/environ | grep -qx RANK=1 && victim=$p
done
[ -n "$victim" ] || die "no rank 1 worker found"
kill -9 "$victim"
wait $pa; ra=$?
wait $pb; rb=$?
tail -n 8 "$TMP/a.out"; cat "$TMP/b.out"
[ $ra -eq 0 ] || die "node 0 exited $ra after the restart, want 0"
[ $rb -eq 0 ] || die "node 1 exited $rb after the restart, want 0"
grep -q "restart 1/1: resuming from step [1-9][0-9]*" "$TMP/a.out" || die "no restart line on node 0"
grep -q "rank 1: exit 0, step 150" "$TMP/a.out" || die "rank 1 did not reach step 150 after the restart"
grep -q "killed by signal 9" "$TMP/b.out" || die "node 1 did not report the kill"
[ "$(grep -c "started ranks 1-1 of 2" "$TMP/b.out")" = 2 ] || die "node 1 did not start its rank again"
grep -q "restart .*--resume" "$TMP/b.out" || die "node 1's restart did not resume"
wait_for 5 no_workers || die "workers left running: $(our_workers)"
echo "PASS: a restart across nodes resumes on both and ends cleanly"
