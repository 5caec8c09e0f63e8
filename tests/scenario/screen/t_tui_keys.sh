# The keys, through the real frontend with scripted ranks: p pauses every
# rank (also one whose hello comes after the key) and p resumes, each with
# its outcome in the events; c's checkpoint outcome; ? help; s/S sort; l
# log scale; Tab + h hides a panel, H shows it; 3 zooms, Esc returns; m
# mouse off; q asks while training, n keeps training, q y quits cleanly.
. tests/lib.sh
. tests/lib_tui.sh
cat >"$TMP/k.feed" <<'FEED'
set beat=0.5 sync=10
0    0  hello max_steps=5000 steps_per_epoch=100 dataset_size=6400
0    0  phase phase=rendezvous
1.5  1  hello max_steps=5000 steps_per_epoch=100 dataset_size=6400
1.5  1  phase phase=rendezvous
2.0  *  phase phase=train
2.0  *  train from=1 to=5000 rate=40 buckets=1
FEED
start_feed 120 40 "" -n 2 --log-dir "$TMP/logs" -- --script "$TMP/k.feed"
# p while rank 1 has not said hello: it gets the pause when it does
wait_for 10 has " 1/2 ranks" || dies "rank 0 never said hello"
keys p
wait_for 5 has "pause requested (p)" || dies "no pause event"
wait_for 10 has "paused: all 2 ranks at step 0" || dies "ranks did not both pause"
has " PAUSED " || dies "title does not say PAUSED"
grep -q "cmd pause id 1" "$TMP/logs/rank-1.log" || die "late rank 1 never got the pause: $(cat "$TMP/logs/rank-1.log")"
sleep 0.6     # the scripted train phase and steps would start now: paused ranks hold
has "step 0/5000" || dies "a rank trained while paused"
keys p
wait_for 5 has "resumed at step 0" || dies "no resumed event"
wait_for 5 hasE " RUNNING .*step [1-9][0-9]*/5000" || dies "not training after resume"
grep -q "cmd resume id 1" "$TMP/logs/rank-0.log" || die "rank 0 never got the resume"
# c: the outcome, from rank 0
keys c
wait_for 5 has "checkpoint requested" || dies "no checkpoint request event"
wait_for 5 hasE "checkpoint step [0-9]+ written by rank 0 in 4 ms \(38\.6 kB\) -> /tmp/ddptop-feed/step-" ||
    dies "no checkpoint outcome"
# ? help; x (any key but the scroll keys) closes it
keys '?'
wait_for 5 has "ddptop keys" || dies "no help"
has "zoom a panel" || dies "help lacks the zoom keys"
keys x
wait_for 5 bash -c "! tmux -L '$TS' capture-pane -p -t '$TS' | grep -q 'ddptop keys'" || dies "help did not close"
# s: next sort key; S: reverse
keys s
# the arrow is the order's direction, the same in every column: the step
# sorts the furthest behind (smallest) first, ascending
wait_for 5 has "sorted by step ▲" || dies "s did not sort by step"
keys S
wait_for 5 has "sorted by step ▼" || dies "S did not reverse"
# l: log scale
keys l
wait_for 5 has "3 loss  log" || dies "l did not switch to log scale"
# Tab to the loss chart, h hides it, H shows every panel
keys Tab h
wait_for 5 has "panel 3 loss hidden" || dies "h did not hide the loss chart"
has "─ 3 loss" && dies "loss chart still shown"
keys H
wait_for 5 has "─ 3 loss" || dies "H did not show the loss chart"
# 3: the loss chart full-screen; Esc: all panels
keys 3
wait_for 5 has "panel 3 loss full-screen" || dies "3 did not zoom"
has "─ 2 ranks" && dies "ranks still shown while the loss chart is zoomed"
keys Escape
wait_for 5 has "─ 2 ranks" || dies "Esc did not bring the panels back"
keys m
wait_for 5 has "mouse off" || dies "m did not turn the mouse off"
# q asks while training; n keeps training
keys q
wait_for 5 has "Quit now?" || dies "q did not ask"
keys n
wait_for 5 has "quit cancelled" || dies "n did not cancel"
has " RUNNING " || dies "not running after n"
keys q
wait_for 5 has "Quit now?" || dies "q did not ask again"
keys y
left_with 0
grep -q "rank 0: exit 0" "$TMP/after.txt" && grep -q "rank 1: exit 0" "$TMP/after.txt" ||
    { cat "$TMP/after.txt"; die "no clean summary"; }
echo "keys ok"
