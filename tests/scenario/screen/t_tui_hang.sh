# A hang, as the engineer debugging one sees it: rank 1 stops calling the
# all-reduce; ranks 0, 2, 3 sit in it. Their rows say "in allreduce #N for
# Ns", the all-reduce panel says everybody waits for r1; d stops rank 1
# cleanly but the others never leave the collective, so the ladder ends
# them with SIGTERM after --stop-grace, and ddptop exits 1.
. tests/lib.sh
. tests/lib_tui.sh
cat >"$TMP/h.feed" <<'FEED'
set beat=0.3 sync=1
0    *    hello max_steps=9000
0.1  *    phase phase=train
0.1  *    train from=1 to=9000 rate=20 buckets=1
1.0  1    stall
1.0  0,2,3 block
FEED
start_feed 120 40 "" -n 4 --stop-grace 1 -- --script "$TMP/h.feed"
wait_for 10 hasE "^! +0 .* in allreduce #[0-9]+ for [1-9]" || dies "rank 0 not shown waiting in the all-reduce"
hasE "^! +2 .* in allreduce #[0-9]+ for" || dies "rank 2 not shown waiting"
hasE "^  +1 feed-host .* train " || dies "rank 1 not shown as a plain training row"
wait_for 5 hasE "^#[0-9]+ +allreduce .* 3/4 in, waiting [0-9.]+s for r1$" || dies "all-reduce panel does not name r1"
keys d
wait_for 15 has "job failed" || dies "no failure verdict"
for r in 0 2 3; do hasE "^✗ +$r .*FAILED SIGTERM by ddp" || dies "rank $r not shown ended by SIGTERM"; done
hasE "^✓ +1 .* destroyed .* exit 0" || dies "rank 1 not shown ended cleanly"
keys q
left_with 1
grep -q "rank 1: exit 0" "$TMP/after.txt" || { cat "$TMP/after.txt"; die "rank 1 did not stop cleanly"; }
grep -q "rank 0: SIGTERM by ddptop" "$TMP/after.txt" || { cat "$TMP/after.txt"; die "rank 0 not ended by SIGTERM"; }
echo "hang ok"
