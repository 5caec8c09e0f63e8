# The hang the ladder ends is the hang the verdict blames. Rank 1 left the
# training loop (an unsafe stop) and waits in its final barrier; rank 0
# waits in the next all-reduce for it. d's ladder sends both SIGTERM:
# rank 0 dies at once, rank 1 runs its finally blocks for 2 s (still in
# the barrier, still beating). For those 2 s the picture reads "rank 1
# waits in barrier for rank 0, which is gone": ddptop's own doing, not a
# new hang. The summary must still blame rank 1's unsafe stop (under a
# loaded make test it once blamed "rank 0 stalled").
. tests/lib.sh
. tests/lib_tui.sh
cat >"$TMP/h.feed" <<'FEED'
set beat=0.2 sync=1
0    *  hello max_steps=9000
0.1  *  phase phase=train
0.1  *  train from=1 to=9000 rate=20 buckets=1
0.1  1  linger s=2.5
1.0  1  phase phase=stopping detail="unsafe stop - rank 1 stops alone"
1.0  1  block op=barrier
1.0  0  block
FEED
start_feed 120 40 "" -n 2 --hang-after 1 --stop-grace 1 -- --script "$TMP/h.feed"
wait_for 15 has "hang: rank 1 left the training loop (unsafe stop)" || dies "the hang does not name rank 1's unsafe stop"
keys d
wait_for 20 has "job failed" || dies "the ladder did not end the hang"
keys q
left_with 1
grep -q "rank 1: SIGTERM by ddptop" "$TMP/after.txt" || { cat "$TMP/after.txt"; die "rank 1 not ended by SIGTERM"; }
grep -q "job failed: rank 1 left the training loop (unsafe stop) after step [0-9]* (rank 0 waited for it" \
    "$TMP/after.txt" || { cat "$TMP/after.txt"; die "the verdict does not blame rank 1's unsafe stop"; }
echo "PASS: the ladder's own doing is not a new hang"
