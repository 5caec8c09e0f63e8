# The screen as a user sees it, in tmux: both ranks' rows, a loss that
# changes, `c` writes a checkpoint, `d` ends every rank cleanly (exit 0),
# `q` leaves with status 0 and nothing left running.
. tests/lib.sh
command -v tmux >/dev/null || skip "tmux not installed"
S=ddptop-test-$$
# A private tmux server (-L): no interference with the user's sessions, and
# the environment below is exactly what ddptop sees.
tmux() { command tmux -L "$S" "$@"; }
CLEANUPS+=("command tmux -L $S kill-server")
tmux new-session -d -s "$S" -x 120 -y 40 \
  "cd '$PWD' && DDPTOP_TEST_TAG='$DDPTOP_TEST_TAG' LANG=C.UTF-8 '$DDPTOP' run -n 2 -- --dataset synthetic --model mlp:64,128,10 --epochs 100000 --batch-size 32 --ckpt-dir '$TMP/ck' --no-final-ckpt >'$TMP/after.txt' 2>&1; echo \$? >'$TMP/exit'; sleep 60"
screen() { tmux capture-pane -p -t "$S"; }
has() { screen | grep -q -- "$1"; }
# both rank rows, training
wait_for 20 has 'train' || { screen; die "ranks never reached train"; }
screen >"$TMP/s1"
# a rank's row: marker, RANK, HOST, PID, PHASE, EPOCH, STEP, LOSS, ...
row() { grep -E "^. +$1 +[^ ]+ +[0-9]+ +train " "$2"; }
step_loss() { row 0 "$1" | sed -E 's/^. +0 +[^ ]+ +[0-9]+ +train +[0-9]+ +([0-9]+) +([0-9.]+) .*/\1 \2/'; }
row 0 "$TMP/s1" >/dev/null || { cat "$TMP/s1"; die "no row for rank 0"; }
row 1 "$TMP/s1" >/dev/null || { cat "$TMP/s1"; die "no row for rank 1"; }
loss1=$(step_loss "$TMP/s1")
sleep 1.5
screen >"$TMP/s1b"
loss2=$(step_loss "$TMP/s1b")
[ -n "$loss1" ] && [ "$loss1" != "$loss2" ] || die "rank 0's step/loss did not change: '$loss1' -> '$loss2'"
# c: a checkpoint appears and the events say so
tmux send-keys -t "$S" c
wait_for 20 test -e "$TMP/ck/latest/model.safetensors" || { screen; die "no checkpoint after c"; }
wait_for 5 has "checkpoint step" || { screen; die "no checkpoint event on screen"; }
# d: every rank ends cleanly; the screen stays until q
tmux send-keys -t "$S" d
wait_for 30 no_workers || { screen; die "workers still running after d"; }
wait_for 5 has "job done" || { screen; die "screen does not say the job is done"; }
screen >"$TMP/s2"
[ "$(grep -c 'destroyed' "$TMP/s2")" -ge 2 ] || { cat "$TMP/s2"; die "ranks not shown as destroyed"; }
tmux send-keys -t "$S" q
wait_for 10 test -s "$TMP/exit" || { screen; die "ddptop did not leave after q"; }
[ "$(cat "$TMP/exit")" = 0 ] || { cat "$TMP/after.txt"; die "ddptop exited $(cat "$TMP/exit")"; }
grep -q "rank 0: exit 0" "$TMP/after.txt" || { cat "$TMP/after.txt"; die "no summary after leaving"; }
grep -q "rank 1: exit 0" "$TMP/after.txt" || { cat "$TMP/after.txt"; die "no summary for rank 1"; }
echo "tui ok"
