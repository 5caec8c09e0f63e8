# Full words at 80x24 (issue 30): a hang's verdict is longer than the
# screen is wide; the events panel wraps it under its time, so every word
# can be read, the rank and the collective on its first row; after the
# ladder the final verdict (the status line cuts it) is kept whole in the
# events panel too, the culprit's stall and line first.
. tests/lib.sh
. tests/lib_tui.sh
cat >"$TMP/h.feed" <<'FEED'
set beat=0.3 sync=1
0    *    hello max_steps=9000
0.1  *    phase phase=train
0.1  *    train from=1 to=9000 rate=20 buckets=1
1.0  1    stall
1.0  0,2,3 block
FEED
start_feed 80 24 "" -n 4 --hang-after 2 --stop-grace 1 -- --script "$TMP/h.feed"
# the events panel zoomed (6): the hang's verdict wraps under its first row
keys 6
wait_for 20 has "ddptop hang: rank 1 " || dies "no hang line naming rank 1 first"
joined() { screen | tr -s ' \n' ' '; }
whole() { joined | grep -Eq "ddptop hang: rank 1 (stopped stepping|has been silent|is) .*; ranks 0,2,3 wait in all-reduce #[0-9]+ \((bucket 0, )?[0-9.]+ s\) for it"; }
wait_for 5 whole || dies "the hang's verdict is cut"
[ "$(screen | grep -A3 'ddptop hang: ' | grep -c '^                [^ ]')" -ge 1 ] || dies "the verdict is not wrapped"
keys d
wait_for 30 has "job failed" || dies "no failure verdict"
# the status line's one row cuts it; the events panel, zoomed, has it whole
wait_for 5 sh -c "command tmux -L $TS capture-pane -p -t $TS | tr -s ' \n' ' ' | grep -q 'ddptop job failed: rank 1 stalled at step [0-9]* (ranks 0,2,3 waited for it in all-reduce #[0-9]*); ranks 0,2,3 were stopped by ddptop (SIGTERM)'" ||
    dies "the final verdict is not whole in the events panel"
keys q
left_with 1
echo "PASS: at 80x24 the hang's and the job's verdicts are shown whole, wrapped"
