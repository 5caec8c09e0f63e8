# a aborts a running job on demand: no clean stop, SIGTERM at once (the
# events say so), ddptop leaves with a non-zero status and no rank is left.
# The scripted feeder plays the ranks; ddptop's heartbeat pings reach them.
. tests/lib.sh
. tests/lib_tui.sh
cat >"$TMP/a.feed" <<'FEED'
set beat=0.5 sync=10
0    *  hello max_steps=50000 steps_per_epoch=100 dataset_size=6400
0.2  *  phase phase=train
0.2  *  train from=1 to=50000 rate=40 buckets=1
FEED
start_feed 120 40 "" -n 2 --log-dir "$TMP/logs" -- --script "$TMP/a.feed"
wait_for 10 hasE " RUNNING .*step [1-9]" || dies "not training"
wait_for 5 grep -q "cmd ping id [0-9]* " "$TMP/logs/rank-1.log" || die "no ping reached rank 1: $(cat "$TMP/logs/rank-1.log")"
keys a
# ddptop leaves as soon as the ranks are gone, so the event may be on screen
# for a frame only: look for it, or for ddptop having left
wait_for 5 bash -c "tmux -L '$TS' capture-pane -p -t '$TS' | grep -q 'abort requested (a): no clean stop: sent SIGTERM to 2 ranks' || test -s '$TMP/exit'" ||
    dies "no abort event"
left_with 1
grep -q "cmd stop" "$TMP/logs/rank-0.log" && die "abort sent a clean stop"
grep -q "SIGTERM by ddptop" "$TMP/after.txt" || { cat "$TMP/after.txt"; die "summary does not say SIGTERM ended the ranks"; }
