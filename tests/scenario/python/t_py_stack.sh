# The w key on a torch script, in tmux as a user sees it: rank 1 of
# examples/ddp_basics.py (2 ranks) is selected, w shows every thread's
# Python stack with the script's own file in it (faulthandler's dump, read
# back from the rank's log), and its row names its current line. Then d
# ends the job cleanly, q leaves, and no rank is left.
. tests/lib.sh
. tests/lib_py.sh
. tests/lib_tui.sh # the tmux helpers (its feeder is not used here)
tmux new-session -d -s "$TS" -x 120 -y 45 \
    "cd '$PWD' && DDPTOP_TEST_TAG='$DDPTOP_TEST_TAG' LANG=C.UTF-8 $(py_run_line -n 2 --log-dir "'$TMP/logs'" -- \
    examples/ddp_basics.py --data synthetic --limit 512 --batch-size 8 --epochs 100000 --out "'$TMP/m.pt'") \
    >'$TMP/after.txt' 2>&1; echo \$? >'$TMP/exit'; sleep 120"
wait_for 60 hasE " train +[0-9]+ .*at ddp_basics\.py:[0-9]+ in main" || dies "no training rank's row names its line"
tmux send-keys -t "$TS" Down
tmux send-keys -t "$TS" w
wait_for 15 has "rank 1 Python stacks" || dies "w did not open the stacks page"
wait_for 15 has "most recent call first" || dies "no stack shown"
# the main thread comes last in faulthandler's dump, its script frame under
# torch's: page down to it (the page takes a dump written in parts too)
script_frame() { has 'ddp_basics.py", line'; }
for k in 1 2 3 4 5 6 7 8; do script_frame && break; tmux send-keys -t "$TS" PgDn; sleep 0.3; done
wait_for 5 script_frame || dies "the script's file is not in the stack"
tmux send-keys -t "$TS" Home
wait_for 5 has "Current thread 0x\|Thread 0x" || dies "no thread header"
has "rank 1 (pid " || dies "the page does not say whose stack it is"
tmux send-keys -t "$TS" Escape
page_closed() { ! has "Python stacks"; }
wait_for 5 page_closed || dies "Esc did not close the page"
tmux send-keys -t "$TS" d
wait_for 60 has "press q to leave" || dies "the job did not end cleanly after d"
has "job done: every rank ended cleanly" || { tmux send-keys -t "$TS" 6; sleep 1; dies "the job failed after d"; }
tmux send-keys -t "$TS" q
wait_for 15 test -s "$TMP/exit" || dies "ddptop did not leave on q"
[ "$(cat "$TMP/exit")" = 0 ] || { cat "$TMP/after.txt"; die "ddptop exited $(cat "$TMP/exit") after d"; }
wait_for 10 no_ranks || die "ranks left running: $(our_ranks)"

# ddptop's own C trainer has no Python stack: w says so in one line
tmux kill-session -t "$TS"
rm -f "$TMP/exit"
tmux new-session -d -s "$TS" -x 120 -y 45 \
    "cd '$PWD' && DDPTOP_TEST_TAG='$DDPTOP_TEST_TAG' LANG=C.UTF-8 '$DDPTOP' run -n 1 -- --dataset synthetic \
    --model mlp:16,32,4 --epochs 100000 --batch-size 8 --no-final-ckpt >'$TMP/after.txt' 2>&1; echo \$? >'$TMP/exit'"
wait_for 30 hasE " train +[0-9]+ " || dies "the C trainer never trained"
tmux send-keys -t "$TS" w
wait_for 5 has "rank 0 is not a Python rank" || dies "w on a C rank did not say why"
has "Python stacks" && dies "w on a C rank opened the stacks page"
tmux send-keys -t "$TS" q
tmux send-keys -t "$TS" y
wait_for 30 test -s "$TMP/exit" || dies "ddptop did not leave"
wait_for 10 no_workers || die "workers left running: $(our_workers)"
echo "PASS: w shows a torch rank's Python stacks, and says why not for a C rank"
