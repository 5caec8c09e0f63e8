# The f menu's faults on the real trainer, in tmux (2 ranks), as a class
# sees them: `u` on rank 1 makes rank 1 alone stop without the agreement,
# so rank 0 blocks in the next all-reduce: the hang view names rank 1 and
# `d` (the stop ladder) ends the job with SIGTERM, exit 1. The ranks do not
# stop at one step and end cleanly. Then a live stall says the step it
# stopped at (not "at step 0"), and a slowed rank is named the straggler
# on its own row while the others say they wait for it.
. tests/lib.sh
. tests/lib_tui.sh
case $BUILD in /*) W=$BUILD/ddptop-worker;; *) W=$PWD/$BUILD/ddptop-worker;; esac
# a new job in a new pane: the last one's tmux server gone, its exit file too
fresh() {
    tmux kill-server 2>/dev/null
    wait_for 10 sh -c "! command tmux -L '$TS' ls >/dev/null 2>&1" || die "tmux server did not go"
    rm -f "$TMP/exit"
}
args="--dataset synthetic --model mlp:16,32,4 --epochs 100000 --batch-size 8 --no-final-ckpt --timeout 120 --ckpt-dir $TMP/ck"
start_feed 120 40 "DDPTOP_WORKER='$W'" -n 2 --hang-after 2 --stop-grace 2 --log-dir "$TMP/logs" -- $args
wait_for 60 hasE " RUNNING .*step [1-9][0-9]" || dies "not training"
keys Down
keys f
wait_for 5 has "unsafe stop: rank 1 stops alone" || dies "the menu's u is not on the selected rank"
keys u
wait_for 20 grep -q "fault: unsafe stop - rank 1 stops alone at step [1-9]" "$TMP/logs/rank-1.log" ||
    dies "rank 1 did not stop alone at its step"
step=$(grep -o "stops alone at step [0-9]*" "$TMP/logs/rank-1.log" | head -1 | grep -o "[0-9]*$")
# rank 0 is left in an all-reduce rank 1 never joins: the hang view says so
wait_for 20 hasE "^[! ] +0 .* in allreduce #[0-9]+ for [1-9]" || dies "rank 0 not shown waiting"
wait_for 20 hasE "^! +1 .* in barrier #[0-9]+ for" || dies "rank 1 not shown in its final barrier"
wait_for 10 hasE "desync: collective #[0-9]+ is (barrier on rank 1 but allreduce on rank 0|allreduce on rank 0 but barrier on rank 1)" ||
    dies "no desync named"
wait_for 10 has "r1 stopping after step $step: unsafe stop (fault): rank 1 stops alone" || dies "rank 1's stop"
has "r0 stopping after step" && dies "rank 0 stopped too: no hang to see"
has "job done" && dies "the job ended cleanly"
# the hang names the rank that left as the cause, never rank 0
wait_for 20 has "hang: rank 1 left the training loop (unsafe stop) after step $step and waits in barrier" ||
    dies "the hang does not blame rank 1's unsafe stop"
has "for rank 0" && dies "the hang blames rank 0"
# the `!` stands on the culprit alone, not on the rank that waits for it
wait_for 5 hasE "^! +1 .* in barrier #" || dies "no ! on rank 1, the cause"
hasE "^  +0 .* in allreduce #" || dies "rank 0, which only waits, is marked"
keys d
wait_for 30 has "job failed" || dies "the ladder did not end the hang"
keys q
left_with 1
grep -q "rank 0: SIGTERM by ddptop" "$TMP/after.txt" || { cat "$TMP/after.txt"; die "rank 0 not ended by the ladder"; }
grep -q "job failed: rank 1 left the training loop (unsafe stop) after step $step (rank 0 waited for it in all-reduce" \
    "$TMP/after.txt" || { cat "$TMP/after.txt"; die "the verdict does not blame rank 1's unsafe stop"; }

# a live stall names the step the rank stopped at
fresh
start_feed 120 40 "DDPTOP_WORKER='$W'" -n 2 --hang-after 2 --stop-grace 2 --log-dir "$TMP/logs2" -- $args
wait_for 60 hasE " RUNNING .*step [1-9][0-9]" || dies "not training (stall)"
keys Down
keys f t
wait_for 20 grep -q "fault: rank 1 stops stepping at step [1-9]" "$TMP/logs2/rank-1.log" ||
    { cat "$TMP/logs2/rank-1.log"; dies "the stall does not say its step"; }
wait_for 10 has "rank 1 stops stepping at step [1-9]" || dies "the stall's step is not on screen"
keys d
wait_for 30 has "job failed" || dies "the ladder did not end the stall"
keys q
left_with 1

# w (slow rank 1 by 50 ms a step): every rank's step takes 50 ms longer, but
# rank 1's own row names it the straggler; rank 0's says whom it waits for
fresh
start_feed 120 40 "DDPTOP_WORKER='$W'" -n 2 --log-dir "$TMP/logs3" -- $args
wait_for 60 hasE " RUNNING .*step [1-9][0-9]" || dies "not training (slow)"
keys Down
keys f w
wait_for 20 hasE "^. +1 [^ ]+ .* straggler: \+(4[5-9]|5[0-9]) ms/step" || dies "rank 1 not named the straggler"
wait_for 10 hasE "^ +0 [^ ]+ .* waiting for rank 1" || dies "rank 0 does not say it waits for rank 1"
hasE "^. +0 .*slow [0-9.]+x median" && dies "rank 0, the one waiting, is called slow"
keys d
wait_for 30 has "job done" || dies "d did not end the slow job"
keys q
left_with 0
echo "fault menu ok"
