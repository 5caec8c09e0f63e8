# The mouse, through the real frontend in tmux: the events are the bytes a
# terminal sends in xterm's mouse mode (ESC [ M, button, column, row, each
# plus 32), typed into the pane, as tmux passes a click on to an
# application that asked for mouse reports. A click selects a rank, the
# wheel scrolls the ranks panel, a double click opens the rank's detail, a
# click in a panel focuses it (h then hides that panel), and m stops the
# mouse reports so that the terminal selects text again.
. tests/lib.sh
. tests/lib_tui.sh
cat >"$TMP/m.feed" <<'FEED'
set beat=0.5 sync=10
0    *  hello max_steps=5000 steps_per_epoch=100 dataset_size=6400
0    *  phase phase=train
0.5  *  train from=1 to=5000 rate=40 buckets=1
FEED
start_feed 120 40 "" -n 24 -- --script "$TMP/m.feed"
wait_for 10 hasE "step [1-9][0-9]*/5000" || dies "no steps"
# ev BUTTON X Y: one mouse report (0 press, 3 release, 64/65 wheel up/down;
# X and Y from 0)
ev() { printf "\033[M%b%b%b" "\\x$(printf %x $((32 + $1)))" "\\x$(printf %x $((32 + $2 + 1)))" \
    "\\x$(printf %x $((32 + $3 + 1)))"; }
click() { keys -l "$(ev 0 "$1" "$2")$(ev 3 "$1" "$2")"; }
mouse_reports() { tmux display -p -t "$TS" '#{mouse_any_flag}'; }
[ "$(mouse_reports)" = 1 ] || dies "ddptop did not ask the terminal for mouse reports"
# the screen row (from 0) of rank R's line in the ranks panel
row_of() { screen | grep -n -E "^[▶ ] +$1 feed-host" | head -1 | cut -d: -f1 | awk '{print $1 - 1}'; }
y=$(row_of 2)
[ -n "$y" ] || dies "rank 2 is not on the screen"
click 10 "$y"
wait_for 5 hasE "^▶ +2 feed-host" || dies "a click on rank 2's line did not select it"
# the wheel over the ranks panel: 24 ranks, 10 lines
has "1-10 of 24" || dies "the ranks panel does not show ranks 1-10 of 24"
keys -l "$(ev 65 20 "$y")"
wait_for 5 has "4-13 of 24" || dies "the wheel did not scroll the ranks panel down"
keys -l "$(ev 64 20 "$y")"
wait_for 5 has "1-10 of 24" || dies "the wheel did not scroll the ranks panel back up"
# double click: rank 3's detail; Esc closes it
y=$(row_of 3)
keys -l "$(ev 0 10 "$y")$(ev 3 10 "$y")$(ev 0 10 "$y")$(ev 3 10 "$y")"
wait_for 5 has "─ rank 3  Esc closes" || dies "a double click on rank 3 did not open its detail"
keys Escape
wait_for 5 has "─ 2 ranks" || dies "Esc did not close the detail"
# a click inside the loss chart focuses it: h hides the focused panel
l=$(screen | grep -n "─ 3 loss" | head -1 | cut -d: -f1)
[ -n "$l" ] || dies "no loss chart"
click 30 $((l + 1))
sleep 0.5     # curses holds a click for its double-click interval; a key sooner races it
keys h
wait_for 5 has "panel 3 loss hidden" || dies "after a click in the loss chart, h did not hide it"
keys H
wait_for 5 has "─ 3 loss" || dies "H did not bring the loss chart back"
# m: no more mouse reports, the terminal selects text; m again: back
keys m
wait_for 5 has "mouse off" || dies "m did not say the mouse is off"
wait_for 5 bash -c "[ \"\$(command tmux -L $TS display -p -t $TS '#{mouse_any_flag}')\" = 0 ]" ||
    dies "the terminal still sends mouse reports after m"
keys m
wait_for 5 bash -c "[ \"\$(command tmux -L $TS display -p -t $TS '#{mouse_any_flag}')\" = 1 ]" ||
    dies "m again did not ask for mouse reports"
keys q y
wait_for 20 test -s "$TMP/exit" || dies "ddptop did not quit"
echo "PASS: click selects, wheel scrolls, double click opens the detail, click focuses a panel, m toggles reports"
