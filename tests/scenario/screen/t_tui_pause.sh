# p with real workers: every rank pauses after the same step (the events
# say which), nothing trains while paused, p resumes from that step; then
# d ends the job cleanly.
. tests/lib.sh
command -v tmux >/dev/null || skip "tmux not installed"
S=ddptop-pause-$$
tmux() { command tmux -L "$S" "$@"; }
CLEANUPS+=("command tmux -L $S kill-server")
tmux new-session -d -s "$S" -x 120 -y 40 \
  "cd '$PWD' && DDPTOP_TEST_TAG='$DDPTOP_TEST_TAG' LANG=C.UTF-8 '$DDPTOP' run -n 2 -- --dataset synthetic --model mlp:64,128,10 --epochs 100000 --batch-size 32 --ckpt-dir '$TMP/ck' --no-final-ckpt >'$TMP/after.txt' 2>&1; echo \$? >'$TMP/exit'; sleep 60"
screen() { tmux capture-pane -p -t "$S"; }
has() { screen | grep -q -- "$1"; }
hasE() { screen | grep -Eq -- "$1"; }
dies() { screen; die "$*"; }
wait_for 20 hasE "^. +1 +[^ ]+ +[0-9]+ +train " || dies "ranks never trained"
tmux send-keys -t "$S" p
wait_for 5 has "pause requested (p)" || dies "no pause request event"
wait_for 15 hasE "paused: all 2 ranks at step [0-9]+" || dies "ranks did not both pause at one step"
has " PAUSED " || dies "title does not say PAUSED"
step=$(screen | grep -Eo "paused: all 2 ranks at step [0-9]+" | grep -Eo "[0-9]+$")
hasE "^. +0 .* paused +[0-9]+ +$step " || dies "rank 0's row is not paused at step $step"
sleep 1
hasE "^. +1 .* paused +[0-9]+ +$step " || dies "rank 1 moved while paused"
tmux send-keys -t "$S" p
wait_for 5 has "resume requested (p)" || dies "no resume request event"
wait_for 15 has "resumed at step $step" || dies "no resumed event"
wait_for 10 hasE " RUNNING .*step [0-9]+/" || dies "not running after resume"
tmux send-keys -t "$S" d
wait_for 30 has "job done" || dies "d did not end the job"
tmux send-keys -t "$S" q
wait_for 10 test -s "$TMP/exit" || dies "ddptop did not leave"
[ "$(cat "$TMP/exit")" = 0 ] || { cat "$TMP/after.txt"; die "ddptop exited $(cat "$TMP/exit")"; }
wait_for 5 no_workers || die "workers left: $(our_workers)"
echo "pause ok at step $step"
