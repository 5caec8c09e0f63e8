# Multi-node on one host (no namespaces needed): two ddptop processes on
# 127.0.0.1, node 0 and an agent for node 1.
#  1. a rank killed on node 1 stops the job everywhere (torchrun's rule):
#     node 0 names it, both ddptops exit non-zero, nothing is left running;
#  2. a rendezvous that does not complete within --rdzv-timeout names the
#     missing node, and the node that did join is told and leaves;
#  3. a node started with another -n is refused with both shapes named;
#  4. an agent without the key file is a usage error.
. tests/lib.sh
port=$((20000 + RANDOM % 20000))
KEYS=$TMP/job.keys
TRAIN="--dataset synthetic --model mlp:20,16,3 --steps 400 --batch-size 8 --no-final-ckpt"

# 1. a failure anywhere stops the job everywhere
"$DDPTOP" run --headless -n 1 --nnodes 2 --node-rank 0 --rdzv 127.0.0.1:$port --keys "$KEYS" \
    --rdzv-timeout 20 -- $TRAIN --fault kill:1@20 >"$TMP/a.out" 2>&1 &
pa=$!
CLEANUPS+=("kill -9 $pa")
wait_for 10 test -s "$KEYS" || die "node 0 wrote no key file"
"$DDPTOP" run -n 1 --nnodes 2 --node-rank 1 --rdzv 127.0.0.1:$port --keys "$KEYS" -- $TRAIN --fault kill:1@20 \
    >"$TMP/b.out" 2>&1 &
pb=$!
CLEANUPS+=("kill -9 $pb")
wait $pa; ra=$?
wait $pb; rb=$?
echo "--- node 0"; tail -n 12 "$TMP/a.out"; echo "--- node 1"; cat "$TMP/b.out"
[ $ra -ne 0 ] || die "node 0 exited 0 although rank 1 was killed"
[ $rb -ne 0 ] || die "node 1 exited 0 although its rank was killed"
grep -q "rank 1: signal 9 (Killed)" "$TMP/a.out" || die "node 0 did not name rank 1's end"
grep -q "asking every rank to stop" "$TMP/a.out" || die "node 0 did not stop the others"
grep -q "rank 1 (pid [0-9]*) killed by signal 9" "$TMP/b.out" || die "node 1 did not report its rank's death"
wait_for 5 no_workers || die "workers left running: $(our_workers)"

# 2. rendezvous timeout names the missing node
port2=$((port + 2))
"$DDPTOP" run --headless -n 1 --nnodes 3 --node-rank 0 --rdzv 127.0.0.1:$port2 --keys "$TMP/k2" \
    --rdzv-timeout 4 -- $TRAIN >"$TMP/c.out" 2>&1 &
pc=$!
CLEANUPS+=("kill -9 $pc")
wait_for 10 test -s "$TMP/k2" || die "no key file for the timeout case"
"$DDPTOP" run -n 1 --nnodes 3 --node-rank 1 --rdzv 127.0.0.1:$port2 --keys "$TMP/k2" --rdzv-timeout 30 -- $TRAIN \
    >"$TMP/d.out" 2>&1 &
pd=$!
CLEANUPS+=("kill -9 $pd")
wait $pc; rc_=$?
wait $pd; rd=$?
cat "$TMP/c.out" "$TMP/d.out"
[ $rc_ -eq 1 ] || die "node 0 exited $rc_ after a failed rendezvous (want 1)"
grep -q "rendezvous did not complete within 4 s: node 2 of 3 never joined" "$TMP/c.out" || die "the missing node is not named"
grep -q "node 1 joined" "$TMP/c.out" || die "node 1's join was not reported"
[ $rd -ne 0 ] || die "node 1 exited 0 after a failed rendezvous"
grep -q "node 0 ended the job before it started" "$TMP/d.out" || die "node 1 was not told"

# 3. a node with another shape is refused, both named
port3=$((port + 4))
"$DDPTOP" run --headless -n 1 --nnodes 2 --node-rank 0 --rdzv 127.0.0.1:$port3 --keys "$TMP/k3" \
    --rdzv-timeout 4 -- $TRAIN >"$TMP/e.out" 2>&1 &
pe=$!
CLEANUPS+=("kill -9 $pe")
wait_for 10 test -s "$TMP/k3" || die "no key file for the shape case"
"$DDPTOP" run -n 2 --nnodes 2 --node-rank 1 --rdzv 127.0.0.1:$port3 --keys "$TMP/k3" -- $TRAIN >"$TMP/f.out" 2>&1
rf=$?
wait $pe
cat "$TMP/f.out"
[ $rf -eq 2 ] || die "a refused node exited $rf (want 2)"
grep -q "node 0 refused this node: node 1 was started with --nnodes 2 -n 2; node 0 runs --nnodes 2 -n 1" "$TMP/f.out" \
    || die "the refusal does not name both shapes"

# 4. no key file
"$DDPTOP" run -n 1 --nnodes 2 --node-rank 1 --rdzv 127.0.0.1:$port3 -- $TRAIN >"$TMP/g.out" 2>&1
rg=$?
cat "$TMP/g.out"
[ $rg -eq 2 ] && grep -q "needs the job's key file" "$TMP/g.out" || die "an agent without keys: exit $rg"
wait_for 5 no_workers || die "workers left running: $(our_workers)"
echo "PASS: failures and rendezvous errors across nodes"
