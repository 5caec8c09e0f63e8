# w on a rank a script spawned itself (torch.multiprocessing.spawn, run as
# `ddptop run SCRIPT`, no -n), in tmux as a user sees it: both ranks share
# the launched process's log, so w asks rank 1 on ctl as every gathering
# does (run_stack_route) and its heartbeat thread sends its own dump back.
# Rank 1 straggles in its own loop while rank 0 waits for it in a barrier:
# rank 1's page names its straggle line (spawned.py line 9) and says the
# dump came on ctl, and never rank 0's barrier line (line 20). Then rank 1
# is let go and the job ends cleanly (exit 0).
. tests/lib.sh
. tests/scenario/python/lib_py.sh
. tests/scenario/python/lib_spawn.sh

spawned_straggler "$TMP/spawned.py"

port=$(free_port 1)
# no hang report: its gathering's ask would race w's (a rank answers its latest ask)
command -v tmux >/dev/null || skip "tmux not installed"
S=ddptop-py-$$-$RANDOM
CLEANUPS+=("command tmux -L $S kill-server")
tmux new-session -d -s "$S" -x 120 -y 40 \
  "cd '$PWD' && DDPTOP_TEST_TAG='$DDPTOP_TEST_TAG' LANG=C.UTF-8 '$DDPTOP' run --python '$PY' --hang-after 3600 --log-dir '$TMP/logs' '$TMP/spawned.py' $port '$TMP/release' >'$TMP/after.txt' 2>&1; echo \$? >'$TMP/exit'; sleep 120"
# both spawned ranks said hello (rank 0 waits in the barrier, rank 1 straggles)
wait_for 120 has "spawned.py:9" || { screen; cat "$TMP/after.txt"; die "rank 1 never showed its line"; }
on_rank1() { hasE "▶ +1 " || { tmux send-keys -t "$S" Down; false; }; }
wait_for 20 on_rank1 || dies "rank 1 never selected"
tmux send-keys -t "$S" w
wait_for 15 has "rank 1 Python stacks" || dies "w did not open rank 1's stacks page"
wait_for 15 has "most recent call first (from its heartbeat thread, on ctl)" || dies "rank 1's dump did not come on ctl"
# its main thread comes last in the dump: page down to it
own() { has 'spawned.py", line 9 in straggle'; }
for k in 1 2 3 4 5 6 7 8; do own && break; tmux send-keys -t "$S" PgDn; sleep 0.3; done
wait_for 5 own || dies "rank 1's page has no straggle frame of its own"
has 'spawned.py", line 19 in worker' || dies "rank 1's page has not its worker frame"
tmux send-keys -t "$S" Home
sleep 0.5
for k in 1 2 3 4 5 6 7 8; do
    has 'line 20 in worker' && dies "rank 1's page shows rank 0's barrier line"
    tmux send-keys -t "$S" PgDn
    sleep 0.3
done
tmux send-keys -t "$S" Escape
page_closed() { ! has "Python stacks"; }
wait_for 10 page_closed || dies "Esc did not close the stacks page"
touch "$TMP/release"
wait_for 60 has "press q to leave" || dies "the job did not end after the release"
has "job done: every rank ended cleanly" || dies "the job failed after the release"
tmux send-keys -t "$S" q
wait_for 15 test -s "$TMP/exit" || dies "ddptop did not leave after q"
[ "$(cat "$TMP/exit")" = 0 ] || { cat "$TMP/after.txt"; die "ddptop exited $(cat "$TMP/exit")"; }
wait_for 20 none_tagged || die "processes left running: $(tagged)"
echo "PASS: w on a spawned rank shows its own stack, asked on ctl"
