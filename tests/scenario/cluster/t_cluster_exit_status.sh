# Exit status on node K > 0 (docs/TUI.md "Exit status"): an agent exits as
# node 0 does and says node 0's verdict, and keeps its ranks' logs when the
# run did not exit 0:
#  1. the final checkpoint lost (the directory turned into a file after
#     launch): node 0 and node 1 both exit 3;
#  2. node 1's rank killed: node 1 exits 1 and keeps (and names) its logs;
#  3. Ctrl-C on node 1: a clean stop of the whole job, node 1 exits 130.
. tests/lib.sh
. tests/scenario/cluster/lib_cluster.sh
port=$(free_port 6)
SLOW="--dataset synthetic --model mlp:20,16,3 --batch-size 8 --epochs 100000"

# 1. checkpoint lost: rank 0 sleeps 100 ms a step, so 60 steps leave time
#    to take the directory away
node0 $port "$TMP/k1" "$TMP/a.out" --stop-grace 5 -- $SLOW --steps 60 --fault slow:0:100 --ckpt-dir "$TMP/ck"; pa=$!
CLEANUPS+=("kill -9 $pa")
wait_for 10 test -s "$TMP/k1" || die "node 0 wrote no key file"
node1 $port "$TMP/k1" "$TMP/b.out" -- $SLOW --steps 60 --fault slow:0:100 --ckpt-dir "$TMP/ck"; pb=$!
CLEANUPS+=("kill -9 $pb")
wait_for 30 grep -q "broadcast -> train" "$TMP/a.out" || { cat "$TMP/a.out"; die "the job did not start"; }
rm -rf "$TMP/ck" && touch "$TMP/ck"
wait $pa; ra=$?
wait $pb; rb=$?
echo "--- node 0"; tail -n 4 "$TMP/a.out"; echo "--- node 1"; cat "$TMP/b.out"
for d in $(kept "$TMP/a.out" "$TMP/b.out"); do CLEANUPS+=("rm -rf '$d'"); done
[ $ra -eq 3 ] || die "checkpoint lost: node 0 exited $ra, want 3"
[ $rb -eq 3 ] || die "checkpoint lost: node 1 exited $rb, want 3 as node 0"
grep -q "node 0: job failed: checkpoint lost: step 60 was not written .*(exit 3)" "$TMP/b.out" \
    || die "node 1 does not say node 0's verdict"

# 2. node 1's rank killed: exit 1, its log kept and named
p2=$((port + 2))
node0 $p2 "$TMP/k2" "$TMP/c.out" --stop-grace 5 -- $SLOW --steps 400 --no-final-ckpt --fault kill:1@20; pc=$!
CLEANUPS+=("kill -9 $pc")
wait_for 10 test -s "$TMP/k2" || die "node 0 wrote no key file (2)"
node1 $p2 "$TMP/k2" "$TMP/d.out" -- $SLOW --steps 400 --no-final-ckpt --fault kill:1@20; pd=$!
CLEANUPS+=("kill -9 $pd")
wait $pc; rc_=$?
wait $pd; rd=$?
echo "--- node 1"; cat "$TMP/d.out"
for d in $(kept "$TMP/c.out"); do CLEANUPS+=("rm -rf '$d'"); done
[ $rc_ -eq 1 ] && [ $rd -eq 1 ] || die "a killed rank: node 0 exited $rc_, node 1 $rd, want 1 and 1"
logs=$(kept "$TMP/d.out")
[ -n "$logs" ] || die "node 1 does not name its kept logs"
CLEANUPS+=("rm -rf '$logs'")
[ -f "$logs/rank-1.log" ] || die "node 1's rank log is not kept: $(ls "$logs")"
[ -e "$logs/ctl" ] && die "node 1 kept its relay socket"

# 3. Ctrl-C on node 1
p3=$((port + 4))
node0 $p3 "$TMP/k3" "$TMP/e.out" --stop-grace 5 -- $SLOW --no-final-ckpt; pe=$!
CLEANUPS+=("kill -9 $pe")
wait_for 10 test -s "$TMP/k3" || die "node 0 wrote no key file (3)"
node1 $p3 "$TMP/k3" "$TMP/f.out" -- $SLOW --no-final-ckpt; pf=$!
CLEANUPS+=("kill -9 $pf")
wait_for 30 grep -q "broadcast -> train" "$TMP/e.out" || { cat "$TMP/e.out"; die "the job did not start (3)"; }
kill -INT $pf
wait $pf; rf=$?
wait $pe
echo "--- node 1"; cat "$TMP/f.out"
[ $rf -eq 130 ] || die "Ctrl-C on node 1: exit $rf, want 130"
kept "$TMP/f.out" | grep -q . && die "a clean stop kept its logs"
wait_for 5 no_workers || die "workers left running: $(our_workers)"
echo "PASS: nodes K > 0 exit as node 0 does and keep a failed run's logs"
