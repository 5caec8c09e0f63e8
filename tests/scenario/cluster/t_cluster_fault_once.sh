# --fault kill:R@S with --max-restarts across nodes fires once: rank 1, on
# node 1's agent, kills itself at step 25; both nodes restart from the step-20
# checkpoint, and node 1's agent hands its rank DDPTOP_FAULTS_SPENT as node 0
# hands its own, so the resumed rank 1 passes step 25 and the job ends
# cleanly after one restart (without it the kill fires again after every
# restart and the job fails once the restarts are spent).
. tests/lib.sh
. tests/scenario/cluster/lib_cluster.sh
port=$(free_port 2)
KEYS=$TMP/job.keys
TRAIN="--dataset synthetic --model mlp:20,16,3 --batch-size 8 --steps 60 --epochs 1000 --ckpt-every 10 \
    --ckpt-dir $TMP/ck --fault kill:1@25"
node0 $port "$KEYS" "$TMP/a.out" --max-restarts 2 --stop-grace 3 -- $TRAIN
pa=$!
CLEANUPS+=("kill -9 $pa")
wait_for 10 test -s "$KEYS" || die "node 0 wrote no key file"
node1 $port "$KEYS" "$TMP/b.out" -- $TRAIN
pb=$!
CLEANUPS+=("kill -9 $pb")
wait $pa; ra=$?
wait $pb; rb=$?
echo "--- node 0"; tail -n 12 "$TMP/a.out"; echo "--- node 1"; cat "$TMP/b.out"
kills=$(grep -c "killed by signal 9" "$TMP/b.out")
[ "$kills" -eq 1 ] || die "rank 1's kill fired $kills times on node 1, want once"
grep -q "restart 1/2: resuming from step 20" "$TMP/a.out" || die "no restart from step 20 on node 0"
grep -q "restart 2/2" "$TMP/a.out" && die "a second restart: the fault fired again"
grep -q "rank 1: exit 0, step 60" "$TMP/a.out" || die "rank 1 did not reach step 60 after the restart"
[ $ra -eq 0 ] || die "node 0 exited $ra after one restart, want 0"
[ $rb -eq 0 ] || die "node 1 exited $rb after one restart, want 0"
wait_for 5 no_workers || die "workers left running: $(our_workers)"
echo "PASS: a kill on node 1 fires once across restarts"
