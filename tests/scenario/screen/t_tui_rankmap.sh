# A job of 1024 ranks where one is stalled, as a user sees it: a recording
# of 1024 simulated ranks (tests/tools/rec_ranks.py, real msgpack) played
# with `ddptop replay` in tmux — the same job model and screen as a live
# run. Rank 300 stops after step 10 while the 1023 others wait for it in
# all-reduce #11. The rank map shows one `!` cell among `w` cells, at rank
# 300's place, the legend and the outliers line name r300, its row leads
# the list with the "+N more" line under it, Home/End still move through
# all 1024 ranks, and at 80x24 (a cell for several ranks) and 200x60 (a
# cell a rank) r300 is still named.
. tests/lib.sh
command -v tmux >/dev/null || skip "tmux not installed"
"$PY" -c 'import msgpack' 2>/dev/null || skip "skip: $PY cannot import msgpack"
S=ddptop-rankmap-$$-$RANDOM
tmux() { command tmux -L "$S" "$@"; }
CLEANUPS+=("command tmux -L $S kill-server")
screen() { tmux capture-pane -p -t "$S"; }
has() { screen | grep -q -- "$1"; }
hasE() { screen | grep -Eq -- "$1"; }
dies() { screen; die "$*"; }
keys() { tmux send-keys -t "$S" "$@"; }

"$PY" tests/tools/rec_ranks.py "$TMP/big.rec" --ranks 1024 --stall 300 --steps 10 --secs 3.5 ||
    die "rec_ranks.py could not write the recording"
tmux new-session -d -s "$S" -x 120 -y 40 \
  "cd '$PWD' && LANG=C.UTF-8 '$DDPTOP' replay '$TMP/big.rec' --speed 4 >'$TMP/after.txt' 2>&1; echo \$? >'$TMP/exit'; sleep 120"
wait_for 120 has "replay: end of recording" || dies "the replay did not reach its end"
screen >"$TMP/s"
cat "$TMP/s"
g() { grep -Eq -- "$1" "$TMP/s" || die "$2"; }
g '^1024 ranks: ! stalled 1: r300  w waiting 1023 *$' "the map's legend does not name the stalled rank 300"
# the map: the lines of cells under the legend, 120 a row; one `!`, at rank 300
awk '/^1024 ranks: /{on=1; next} on && /^[w!·]+ *$/{print; next} on{exit}' "$TMP/s" >"$TMP/map"
[ "$(wc -l <"$TMP/map")" = 9 ] || die "the map is not 9 rows of 120 cells: $(wc -l <"$TMP/map") rows"
[ "$(grep -o '!' "$TMP/map" | wc -l)" = 1 ] || die "not exactly one stalled cell in the map"
pos=$(awk '{ i = index($0, "!"); if (i) { print (NR - 1) * 120 + i - 1; exit } }' "$TMP/map")
[ "$pos" = 300 ] || die "the stalled cell is at rank $pos, not 300"
g '^outliers: r300 stalled: 1023 ranks wait for it in allreduce #11 for [0-9]+s' "outliers line does not name r300 first"
g 'sorted by rank ▲, odd ones first' "the rule does not say the odd ranks lead"
# the list: rank 300 first, then a line for everybody else
grep -E '^. +[0-9]+ node' "$TMP/s" | head -1 | grep -Eq '^! +300 node37 .*stalled, 1023 wait for it' ||
    die "rank 300 does not lead the list"
g '^  \+[0-9]+ more ranks: [0-9]+ waiting *$' "no '+N more ranks' line"
g '1023/1024 in, waiting [0-9.]+s for r300' "the all-reduce panel does not say everybody waits for r300"
g 'last in r[0-9]+ \+[0-9.]+ ms' "the all-reduce panel does not name the last-in rank of a finished collective"
# selection and scrolling still reach every rank (every row here is marked
# `!`, so Enter's detail page tells which rank is selected)
keys Home
sleep 0.3
keys Enter
wait_for 5 has "─ rank 300 " || dies "Home did not select the stalled rank at the top"
keys Escape
wait_for 5 hasE '^  \+[0-9]+ more ranks' || dies "Esc did not close the detail"
keys End
wait_for 5 hasE '^! +1023 node127 ' || dies "End did not list rank 1023"
has " of 1024 " || dies "no list position after End"
hasE '^  \+[0-9]+ more' && dies "a '+N more' line at the end of the list"
keys Enter
wait_for 5 has "─ rank 1023 " || dies "End did not select rank 1023"
keys Escape
sleep 0.3
keys Home
wait_for 5 hasE '^  \+[0-9]+ more ranks' || dies "Home did not bring the '+N more' line back"
# 80x24: a cell holds several ranks, r300 is still named
tmux resize-window -t "$S" -x 80 -y 24
wait_for 5 hasE '^1024 ranks, a cell = [0-9]+ ranks \(the worst shown\): ! stalled 1: r300' ||
    dies "80x24: the legend does not name r300"
hasE '^outliers: r300 stalled' || dies "80x24: the outliers line does not name r300"
# 200x60: a cell a rank again
tmux resize-window -t "$S" -x 200 -y 60
wait_for 5 hasE '^1024 ranks: ! stalled 1: r300' || dies "200x60: the legend does not name r300"
keys q
wait_for 10 test -s "$TMP/exit" || dies "replay did not leave after q"
[ "$(cat "$TMP/exit")" = 0 ] || { cat "$TMP/after.txt"; die "replay exited $(cat "$TMP/exit")"; }
echo "rank map ok"
