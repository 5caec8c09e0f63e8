# The f menu's u on a torch script (examples/ddp_basics.py, 2 ranks, in
# tmux), as on the C trainer: rank 1 alone stops without the agreement and
# waits in its final barrier while rank 0 blocks in the next all-reduce, so
# the class sees the shutdown hang (both rows in a collective, a desync
# line) and d's ladder ends it (exit 1); the ranks do not stop together.
. tests/lib.sh
. tests/scenario/python/lib_py.sh
py_tui_start "" -n 2 --hang-after 2 --stop-grace 2 -- examples/ddp_basics.py --data synthetic --limit 512 \
    --epochs 100000 --batch-size 16 --out "$TMP/final.pt"
wait_for 90 hasE " RUNNING .*step [1-9][0-9]" || dies "the script never trained 10 steps on screen"
tmux send-keys -t "$S" Down
tmux send-keys -t "$S" f
wait_for 5 has "unsafe stop: rank 1 stops alone" || dies "the menu's u is not on rank 1"
tmux send-keys -t "$S" u
wait_for 20 grep -q "fault: unsafe stop - rank 1 stops alone at step [1-9]" "$TMP/logs/rank-1.log" ||
    dies "rank 1 did not stop alone at its step"
wait_for 30 hasE "^[! ] +0 .* in allreduce #[0-9]+ for [1-9]" || dies "rank 0 not shown waiting in the all-reduce"
wait_for 20 hasE "^! +1 .* in barrier #[0-9]+ for" || dies "rank 1 not shown in its barrier"
grep -q "fault: unsafe stop" "$TMP/logs/rank-0.log" && dies "rank 0 stopped too"
has "job done" && dies "the job ended cleanly"
# the rank that left is the cause, in the hang and in the verdict
wait_for 20 has "hang: rank 1 left the training loop (unsafe stop) after step [0-9]* and waits in barrier" ||
    dies "the hang does not blame rank 1's unsafe stop"
has "for rank 0" && dies "the hang blames rank 0"
# the `!` stands on the culprit alone, not on the rank that waits for it
wait_for 5 hasE "^! +1 .* in barrier #" || dies "no ! on rank 1, the cause"
hasE "^  +0 .* in allreduce #" || dies "rank 0, which only waits, is marked"
tmux send-keys -t "$S" d
wait_for 60 has "job failed" || dies "the ladder did not end the hang"
tmux send-keys -t "$S" q
wait_for 15 test -s "$TMP/exit" || dies "ddptop did not leave after q"
[ "$(cat "$TMP/exit")" = 1 ] || { cat "$TMP/after.txt"; die "ddptop exited $(cat "$TMP/exit"), want 1"; }
grep -q "job failed: rank 1 left the training loop (unsafe stop) after step [0-9]* (rank 0 waited for it" \
    "$TMP/after.txt" || { cat "$TMP/after.txt"; die "the verdict does not blame rank 1's unsafe stop"; }
wait_for 10 no_ranks || die "ranks left running: $(our_ranks)"
echo "PASS: u on a torch script is the shutdown hang"
