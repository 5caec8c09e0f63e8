# Two "hosts" as network namespaces joined by a veth pair, each with its own
# hostname: node 0 (host ddpA) hosts the store and the screen, node 1 (host
# ddpB) runs an agent; a 2-node Gloo job over the veth link trains to a
# clean end, every rank's host is named, the key file is private, and no
# process is left on either side. Skips where namespaces are not permitted.
. tests/lib.sh
[ "$(id -u)" = 0 ] || skip "SKIP: network namespaces need root"
command -v ip >/dev/null && command -v unshare >/dev/null || skip "SKIP: ip (iproute2) or unshare missing"
sfx=$$
A=ddpA$sfx B=ddpB$sfx VA=va$sfx VB=vb$sfx
ip netns add $A 2>/dev/null || skip "SKIP: ip netns add is not permitted here"
CLEANUPS+=("ip netns del $A" "ip netns del $B")
ip netns add $B || die "second namespace"
ip link add $VA type veth peer name $VB || skip "SKIP: veth pairs are not permitted here"
ip link set $VA netns $A && ip link set $VB netns $B || die "moving the veth ends"
ip -n $A addr add 10.231.7.1/24 dev $VA && ip -n $B addr add 10.231.7.2/24 dev $VB || die "addresses"
for ns in $A $B; do ip -n $ns link set lo up; done
ip -n $A link set $VA up && ip -n $B link set $VB up || die "links up"
ip -n $B route get 10.231.7.1 >/dev/null 2>&1 || die "node 1 has no route to node 0"

KEYS=$TMP/job.keys
TRAIN="--dataset synthetic --model mlp:20,16,3 --steps 40 --batch-size 16 --ckpt-dir $TMP/ck"
ip netns exec $A unshare --uts sh -c "hostname ddpA; exec $DDPTOP run --headless -n 1 --nnodes 2 --node-rank 0 \
    --rdzv 10.231.7.1:29431 --keys $KEYS --rdzv-timeout 30 -- $TRAIN" >"$TMP/a.out" 2>&1 &
pa=$!
CLEANUPS+=("kill -9 $pa")
wait_for 10 test -s "$KEYS" || { cat "$TMP/a.out"; die "node 0 wrote no key file"; }
[ "$(stat -c %a "$KEYS")" = 600 ] || die "key file mode $(stat -c %a "$KEYS")"
ip netns exec $B unshare --uts sh -c "hostname ddpB; exec $DDPTOP run -n 1 --nnodes 2 --node-rank 1 \
    --rdzv 10.231.7.1:29431 --keys $KEYS -- $TRAIN" >"$TMP/b.out" 2>&1 &
pb=$!
CLEANUPS+=("kill -9 $pb")
wait $pa; ra=$?
wait $pb; rb=$?
echo "--- node 0"; cat "$TMP/a.out"; echo "--- node 1"; cat "$TMP/b.out"
[ $ra -eq 0 ] || die "node 0 exited $ra"
[ $rb -eq 0 ] || die "node 1 exited $rb"
grep -q "rank 0: exit 0" "$TMP/a.out" && grep -q "rank 1: exit 0" "$TMP/a.out" || die "node 0 did not see both ranks end cleanly"
grep -q "node 1 joined from ddpB" "$TMP/a.out" || die "node 0 did not name node 1's host"
grep -q "collectives: gloo over TCP" "$TMP/a.out" || die "ranks in two network namespaces did not keep TCP"
grep -q "started ranks 1-1 of 2" "$TMP/b.out" || die "node 1 did not start global rank 1"
grep -q "relayed [1-9][0-9]* frames up, [1-9][0-9]* down, 0 dropped" "$TMP/b.out" || die "node 1's agent relayed nothing"
grep -q "ddpA" "$TMP/a.out" && grep -q "ddpB" "$TMP/a.out" || die "the ranks' hosts are not shown"
[ -L "$TMP/ck/latest" ] || die "no checkpoint from rank 0"
wait_for 5 no_workers || die "workers left running: $(our_workers)"

# The same two hosts with node 0's screen (tmux inside namespace A): the ranks
# panel shows each rank's host, and d (destroy) reaches the remote rank too.
command -v tmux >/dev/null || skip "SKIP (after the headless part passed): tmux not installed"
TS=ddptop-netns-$$
CLEANUPS+=("tmux -L $TS kill-server")   # the socket is a file: reachable from any namespace
LONG="--dataset synthetic --model mlp:64,64,10 --epochs 100000 --batch-size 8 --no-final-ckpt"
rm -f "$KEYS"
ip netns exec $A unshare --uts sh -c "hostname ddpA; exec tmux -L $TS new-session -d -x 140 -y 40 \
    'DDPTOP_TEST_TAG=$DDPTOP_TEST_TAG LANG=C.UTF-8 $DDPTOP run -n 1 --nnodes 2 --node-rank 0 --rdzv 10.231.7.1:29433 \
     --keys $KEYS -- $LONG; echo \$? >$TMP/tui.exit; sleep 60'"
wait_for 10 test -s "$KEYS" || die "node 0 (screen) wrote no key file"
scr() { ip netns exec $A tmux -L $TS capture-pane -p; }
pending_ok() { scr | grep -Eq '^.{0,3} +1 +- .*pending .*not started yet'; }
wait_for 10 pending_ok || { scr; die "before node 1 joins, rank 1 is not shown as pending"; }
scr | grep -q "rendezvous: waiting for nodes to join" || { scr; die "no rendezvous status line"; }
ip netns exec $B unshare --uts sh -c "hostname ddpB; exec $DDPTOP run -n 1 --nnodes 2 --node-rank 1 \
    --rdzv 10.231.7.1:29433 --keys $KEYS -- $LONG" >"$TMP/b2.out" 2>&1 &
pb2=$!
CLEANUPS+=("kill -9 $pb2")
rows_ok() { scr | grep -Eq '^.{0,3} +0 ddpA .* train ' && scr | grep -Eq '^.{0,3} +1 ddpB .* train '; }
wait_for 20 rows_ok || { scr; die "the ranks panel does not show rank 0 on ddpA and rank 1 on ddpB, training"; }
scr | head -8
ip netns exec $A tmux -L $TS send-keys d
wait_for 30 sh -c "ip netns exec $A tmux -L $TS capture-pane -p | grep -q 'job done: every rank ended cleanly'" \
    || { scr; die "the job did not end cleanly after d"; }
wait $pb2; rb2=$?
ip netns exec $A tmux -L $TS send-keys q
wait_for 10 test -s "$TMP/tui.exit" || { scr; die "node 0's screen did not leave on q"; }
scr | grep -q "is lost" && { scr; die "node 0 took its agent for lost after the job ended"; }
[ "$(cat "$TMP/tui.exit")" = 0 ] || { scr; die "node 0 exited $(cat "$TMP/tui.exit") after d"; }
cat "$TMP/b2.out"
[ $rb2 -eq 0 ] || die "node 1 exited $rb2 after d on node 0's screen"
wait_for 5 no_workers || die "workers left running: $(our_workers)"
echo "PASS: two nodes over a veth link, CURVE, hosts named on screen and in the summary, d reaches both, clean end"
