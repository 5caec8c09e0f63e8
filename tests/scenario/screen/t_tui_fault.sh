# f opens the fault menu on the selected rank; k sends "kill rank 1" as a
# fault command to rank 1 only, and the events explain it at once; Esc
# closes the menu without a fault; u is an unsafe stop of the selected rank
# alone (every rank's would stop them all at one step: no hang to see).
. tests/lib.sh
. tests/lib_tui.sh
cat >"$TMP/f.feed" <<'FEED'
set beat=0.5 sync=10
0    *  hello max_steps=50000 steps_per_epoch=100 dataset_size=6400
0.2  *  phase phase=train
0.2  *  train from=1 to=50000 rate=40 buckets=1
FEED
start_feed 120 40 "" -n 2 --log-dir "$TMP/logs" -- --script "$TMP/f.feed"
wait_for 10 hasE " RUNNING .*step [1-9]" || dies "not training"
keys f
wait_for 5 has "inject a fault" || dies "f did not open the menu"
has "kill rank 0 now" || dies "menu does not name the selected rank"
keys Escape
wait_for 5 bash -c "! tmux -L '$TS' capture-pane -p -t '$TS' | grep -q 'inject a fault'" || dies "Esc did not close"
has "fault requested" && dies "Esc injected a fault"
keys Down
keys f
wait_for 5 has "kill rank 1 now" || dies "menu is not on rank 1 after Down"
keys k
wait_for 5 has "fault requested (f, 1 rank): rank 1 kills itself at its next step" || dies "no fault event"
wait_for 5 grep -q "cmd fault id 1 " "$TMP/logs/rank-1.log" || die "rank 1 never got the fault"
grep -q "cmd fault" "$TMP/logs/rank-0.log" && die "rank 0 got rank 1's fault"
keys f u
wait_for 5 has "fault requested (f, 1 rank): unsafe stop - rank 1 stops alone at its next step" ||
    dies "no unsafe-stop event for the selected rank"
wait_for 5 grep -q "cmd fault id 2 " "$TMP/logs/rank-1.log" || die "rank 1 never got the unsafe stop"
grep -q "cmd fault id 2 " "$TMP/logs/rank-0.log" && die "rank 0 got rank 1's unsafe stop"
keys q y
left_with 0
