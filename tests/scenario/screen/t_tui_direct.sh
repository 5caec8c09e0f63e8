# Frames that ddptop writes itself (tui/screen/tty_frame.c: the cells that
# changed since the last frame, not through ncurses's refresh) leave on the
# terminal what a full repaint of the same frame draws: 40 ranks training
# change the rank rows, the map, the loss chart and the collectives every
# frame, the pane is resized once on the way (a full frame through ncurses,
# whose own copy of the screen is then out of date); once the job is done
# and the screen still, it is captured with attributes and colours, Ctrl-L
# repaints every cell through ncurses, and the two captures are the same
# (the title's elapsed clock aside). A stale cell, a cell put at the wrong
# place or in the wrong style would show as a difference. Then Ctrl-Z and
# fg (SIGTSTP, SIGCONT): ncurses leaves the screen and repaints it from its
# own copy, which the direct frames kept current; the same comparison.
. tests/lib.sh
. tests/lib_tui.sh
cat >"$TMP/d.feed" <<'FEED'
set beat=0.5
0    *  hello host=node{r} max_steps=9000 dataset_size=4000
0.1  *  phase phase=train
0.1  *  train from=1 to=9000 rate=40
FEED
start_feed 150 45 "" -n 40 -- --script "$TMP/d.feed"
wait_for 30 has " 40/40 ranks" || dies "not every rank said hello"
wait_for 10 hasE "step [0-9]{3,}" || dies "no progress"
sleep 1
resize 140 42
wait_for 10 sh -c "[ \"\$(command tmux -L '$TS' display -p -t '$TS' '#{window_width}')\" = 140 ]" || dies "no resize"
sleep 2
keys d
wait_for 20 has "job done" || dies "d did not end the job"
sleep 1.5
# what each cell shows (tests/tools/sgr_cells.py: tmux's capture keeps a
# written blank apart from an erased one), the title line aside
body() { screen_e | python3 tests/tools/sgr_cells.py | tail -n +2; }
before=$(body)
keys C-l
sleep 1.5
after=$(body)
[ -n "$before" ] || dies "empty capture"
if [ "$before" != "$after" ]; then
    diff <(echo "$before") <(echo "$after") | head -20
    dies "the screen written frame by frame differs from its full repaint"
fi
pane=$(tmux display -p -t "$TS" '#{pane_pid}')
pid=$(pgrep -P "$pane" -x ddptop) || dies "no ddptop process"
# ncurses catches SIGTSTP (leaves the screen, stops, repaints on SIGCONT);
# in the pane's orphaned process group the stop itself is discarded, the
# leaving and the repaint are not
caught=$(awk '/^SigCgt/ {print $2}' "/proc/$pid/status")
(( (16#$caught >> 19) & 1 )) || dies "ncurses does not catch SIGTSTP here (SigCgt $caught)"
kill -TSTP "$pid"
sleep 0.5
kill -CONT "$pid"
sleep 1.5
resumed=$(body)
keys C-l
sleep 1.5
after=$(body)
if [ "$resumed" != "$after" ]; then
    diff <(echo "$resumed") <(echo "$after") | head -20
    dies "the screen repainted after SIGCONT differs from a full repaint"
fi
keys q
left_with 0
