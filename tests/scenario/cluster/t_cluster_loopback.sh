# Multi-node on one host (no namespaces needed): two ddptop processes on
# 127.0.0.1, node 0 and an agent for node 1.
#  1. a rank killed on node 1 stops the job everywhere (torchrun's rule):
#     node 0 names it, both ddptops exit non-zero, nothing is left running;
#  2. a rendezvous that does not complete within --rdzv-timeout names the
#     missing node, and the node that did join is told and leaves;
#  3. a node started with another -n is refused with both shapes named;
#  4. an agent without the key file is a usage error;
#  5. a longer job with 1 s liveness deadlines (DDPTOP_NODE_SILENT_MS): the
#     agent's beats and node 0's pings keep both sides alive; a viewer attaches
#     over tcp with the key file (and is refused without it) and sees rank 1's
#     steps; Ctrl-C on node 0 ends the job cleanly on both nodes;
#  6. node 0 killed -9: nothing is left on either node, node 1 says why.
. tests/lib.sh
# the rank logs a failed node keeps (and names) are the test's to remove
CLEANUPS+=("sed -n \"s/.*ddptop: the ranks' logs are kept in //p\" \"\$TMP\"/*.out | xargs -r rm -rf")
port=$(free_port 10)
KEYS=$TMP/job.keys
TRAIN="--dataset synthetic --model mlp:20,16,3 --steps 400 --batch-size 8 --no-final-ckpt"

# 1. a failure anywhere stops the job everywhere
"$DDPTOP" run --headless -n 1 --nnodes 2 --node-rank 0 --rdzv 127.0.0.1:$port --keys "$KEYS" \
    --rdzv-timeout 20 -- $TRAIN --fault kill:1@20 >"$TMP/a.out" 2>&1 &
pa=$!
CLEANUPS+=("kill -9 $pa")
wait_for 10 test -s "$KEYS" || die "node 0 wrote no key file"
# --rdzv 127.0.0.1:PORT binds loopback only, never every interface
if command -v ss >/dev/null; then
    bound=$(ss -Hltn "sport = :$port or sport = :$((port + 1))" | awk '{print $4}' | sort -u | tr '\n' ' ')
    case "$bound" in *0.0.0.0:*|*'*:'*|*'[::]:'*) die "--rdzv 127.0.0.1:$port bound $bound";; esac
    case "$bound" in *127.0.0.1:$port*) ;; *) die "--rdzv 127.0.0.1:$port: nothing bound there ($bound)";; esac
fi
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

# 5. liveness across nodes, attach over tcp, a clean stop
port5=$((port + 6))
export DDPTOP_NODE_SILENT_MS=1000
LONG="--dataset synthetic --model mlp:64,64,10 --epochs 100000 --batch-size 8 --no-final-ckpt"
"$DDPTOP" run --headless -n 1 --nnodes 2 --node-rank 0 --rdzv 127.0.0.1:$port5 --keys "$TMP/k5" -- $LONG \
    >"$TMP/h.out" 2>&1 &
ph=$!
CLEANUPS+=("kill -9 $ph")
wait_for 10 test -s "$TMP/k5" || die "no key file for the liveness case"
"$DDPTOP" run -n 1 --nnodes 2 --node-rank 1 --rdzv 127.0.0.1:$port5 --keys "$TMP/k5" -- $LONG >"$TMP/i.out" 2>&1 &
pi=$!
CLEANUPS+=("kill -9 $pi")
wait_for 15 grep -q "broadcast -> train" "$TMP/h.out" || { cat "$TMP/h.out"; die "the long job did not start"; }
"$DDPTOP" attach tcp://127.0.0.1:$port5 --headless >"$TMP/j.out" 2>&1
rj=$?
[ $rj -eq 2 ] && grep -q "keys" "$TMP/j.out" || { cat "$TMP/j.out"; die "attach over tcp without keys: exit $rj"; }
"$DDPTOP" attach tcp://127.0.0.1:$port5 --keys "$TMP/k5" --headless >"$TMP/v.out" 2>&1 &
pv=$!
CLEANUPS+=("kill -9 $pv")
sleep 3.5     # more than three liveness deadlines
kill -INT $ph                  # Ctrl-C on node 0: the clean path, on both nodes
wait $ph; rh=$?
wait $pi; ri=$?
wait $pv; rv=$?
tail -n 5 "$TMP/h.out"; cat "$TMP/i.out"; tail -n 5 "$TMP/v.out"
grep -q "is lost" "$TMP/h.out" && die "node 0 lost its agent although it beats"
grep -q "silent" "$TMP/i.out" && die "the agent took node 0 for silent"
[ $rh -eq 130 ] && [ $ri -eq 130 ] || die "the stopped job: node 0 $rh, node 1 $ri (want 130 on both: Ctrl-C)"
grep -q "signal received: asking every rank to stop" "$TMP/h.out" || die "node 0 did not take the clean path"
[ $rv -eq 0 ] || die "the tcp viewer exited $rv"
grep -q "rank 1: exit 0" "$TMP/v.out" || die "the tcp viewer did not see rank 1 end cleanly"

# 6. node 0 killed -9: its ranks die with it, node 1's agent stops its rank
#    once node 0 has been silent past the deadline, and leaves with 1
port6=$((port + 8))
"$DDPTOP" run --headless -n 1 --nnodes 2 --node-rank 0 --rdzv 127.0.0.1:$port6 --keys "$TMP/k6" -- $LONG \
    >"$TMP/m.out" 2>&1 &
pm=$!
CLEANUPS+=("kill -9 $pm")
wait_for 10 test -s "$TMP/k6" || die "no key file for the kill case"
"$DDPTOP" run -n 1 --nnodes 2 --node-rank 1 --rdzv 127.0.0.1:$port6 --keys "$TMP/k6" -- $LONG >"$TMP/n.out" 2>&1 &
pn=$!
CLEANUPS+=("kill -9 $pn")
wait_for 15 grep -q "broadcast -> train" "$TMP/m.out" || { cat "$TMP/m.out"; die "the job to kill did not start"; }
kill -9 $pm
wait_for 10 sh -c "! kill -0 $pn 2>/dev/null" || { cat "$TMP/n.out"; die "node 1's agent outlived node 0 by 10 s"; }
wait $pn; rn=$?
cat "$TMP/n.out"
[ $rn -eq 1 ] || die "node 1's agent exited $rn after node 0 vanished (want 1)"
grep -q "node 0 has been silent" "$TMP/n.out" || die "node 1 did not say node 0 went silent"
unset DDPTOP_NODE_SILENT_MS
wait_for 5 no_workers || die "workers left running: $(our_workers)"
echo "PASS: failures and rendezvous errors across nodes; liveness; attach over tcp; node 0 killed"
