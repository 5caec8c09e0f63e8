#!/usr/bin/env bash
# t_replay_tui.sh — `ddptop replay` in tmux: a recorded job plays to "end of
# recording" with the same rank rows (step, loss) as the live summary; the
# replay keys (pause, step, go to step, speed, seek) answer on the status
# line; c, d and p say they are disabled; q leaves with status 0; both
# example recordings open.
. tests/lib.sh
command -v tmux >/dev/null || skip "tmux not installed"
"$DDPTOP" --help 2>/dev/null | grep -q 'ddptop replay' || skip "skip: this ddptop has no replay yet"
S=ddptop-replay-$$-$RANDOM
tmux() { command tmux -L "$S" "$@"; }
CLEANUPS+=("command tmux -L $S kill-server")
screen() { tmux capture-pane -p -t "$S"; }
has() { screen | grep -q -- "$1"; }
dies() { screen; die "$*"; }
keys() { tmux send-keys -t "$S" "$@"; }
# open FILE ARGS...: ddptop replay in a 120x40 pane; exit status to $TMP/exit
open_rec() {
    rm -f "$TMP/exit"
    # the last session's server must be gone first: a new-session that
    # reaches a server still exiting is lost ("no server running"), seen
    # on a busy machine
    command tmux -L "$S" kill-server 2>/dev/null
    wait_for 10 sh -c "! command tmux -L '$S' ls >/dev/null 2>&1" || die "the tmux server did not go"
    tmux new-session -d -s "$S" -x 120 -y 40 \
      "cd '$PWD' && DDPTOP_TEST_TAG='$DDPTOP_TEST_TAG' LANG=C.UTF-8 '$DDPTOP' replay $* >'$TMP/after.txt' 2>&1; echo \$? >'$TMP/exit'; sleep 60"
}
quit_ok() {
    keys q
    wait_for 10 test -s "$TMP/exit" || dies "replay did not leave after q"
    [ "$(cat "$TMP/exit")" = 0 ] || { cat "$TMP/after.txt"; die "replay exited $(cat "$TMP/exit")"; }
}

# --- a recorded job: the same final rows as the live summary ---
timeout 120 "$DDPTOP" run -n 2 --headless --record "$TMP/job.rec" -- --dataset synthetic --model mlp:20,16,3 \
    --batch-size 16 --steps 30 >"$TMP/live.out" 2>&1 || die "live job failed: $(tail -5 "$TMP/live.out")"
open_rec "'$TMP/job.rec'" --speed 8
wait_for 20 has "replay: end of recording" || dies "no 'end of recording'"
screen >"$TMP/s1"
for r in 0 1; do
    want=$(sed -nE "s/^rank $r: exit 0, step ([0-9]+), loss ([0-9.]+),.*/\1 \2/p" "$TMP/live.out")
    got=$(grep -E "^. +$r +[^ ]+ +[0-9]+ +[a-z]+ +[0-9]+ +[0-9]+ +[0-9.]+ " "$TMP/s1" |
          sed -E "s/^. +$r +[^ ]+ +[0-9]+ +[a-z]+ +[0-9]+ +([0-9]+) +([0-9.]+) .*/\1 \2/")
    [ -n "$want" ] && [ "$want" = "$got" ] || { cat "$TMP/s1"; die "rank $r row: '$got', live summary: '$want'"; }
done
grep -q "job done" "$TMP/s1" || { cat "$TMP/s1"; die "the end does not give the verdict"; }
quit_ok

# --- keys, on the shutdown hang (10 s long) ---
open_rec examples/recordings/shutdown-hang.rec
wait_for 10 has "replay: playing 1x" || dies "no 'playing' status"
has "space pause" || dies "no replay key line"
keys Space
wait_for 5 has "replay: paused" || dies "space did not pause"
t1=$(screen | sed -nE 's/.*replay: paused [0-9.]+x  t ([0-9.]+)\/.*/\1/p'); sleep 0.6
t2=$(screen | sed -nE 's/.*replay: paused [0-9.]+x  t ([0-9.]+)\/.*/\1/p')
[ -n "$t1" ] && [ "$t1" = "$t2" ] || dies "paused, yet the time moved: '$t1' -> '$t2'"
keys g 1 0
wait_for 5 has "go to step: 10_" || dies "g does not ask for a step"
keys Enter
wait_for 5 has "at step 10" || dies "g 10 Enter did not go to step 10"
has "paused 1x  t [0-9.]*/[0-9.]* s  step 10 " || dies "status does not show step 10"
keys .
wait_for 5 has "forward one step message: rank [0-9] step 11" || dies ". did not step forward"
keys ,
wait_for 5 has "back one step message" || dies ", did not step back"
keys ']'
wait_for 5 has "forward 10%" || dies "] did not seek"
keys +
wait_for 5 has "speed 2x" || dies "+ did not double the speed"
keys - - -
wait_for 5 has "paused 0.25x" || dies "- did not slow down to 0.25x"
for k in c d p; do
    keys $k
    wait_for 5 has "$k: .* needs live workers — disabled in a replay" || dies "$k does not say it is disabled"
done
# r (a report on disk) is the live job's: a recording holds no stacks
keys r
wait_for 5 has "report: of a running job only" || dies "r does not say a replay writes no report"
keys '>'
wait_for 5 has "forward 1 s" || dies "> did not seek 1 s"
# ? shows the replay's own keys, not the live job's
keys '?'
wait_for 5 has "ddptop replay keys" || dies "? does not show the replay's keys"
has "play / pause" && has "need live workers" || dies "the replay help lacks its keys"
has "checkpoint now" && dies "the replay help shows the live c key"
keys Escape
# to the end: the ladder's outcome, then q
keys + + + + + + + + Space
wait_for 20 has "replay: end of recording" || dies "the hang recording did not reach its end"
has "SIGKILL by ddptop" || dies "rank 1's SIGKILL not shown"
quit_ok

# --- the clean example opens; a truncated recording says where it ends ---
open_rec examples/recordings/clean-4rank.rec --speed 16
wait_for 10 has "replay: end of recording" || dies "clean-4rank.rec did not play to its end"
has "job done" || dies "clean-4rank.rec does not end cleanly"
quit_ok
size=$(stat -c %s "$TMP/job.rec")
head -c $((size / 2)) "$TMP/job.rec" >"$TMP/cut.rec"
open_rec "'$TMP/cut.rec'" --speed 16
wait_for 10 has "replay: recording ends early at byte" || dies "no 'ends early' status for a truncated recording"
quit_ok
grep -q "recording ends early" "$TMP/after.txt" || die "no 'ends early' line after leaving"
echo "replay tui ok"
