# ? shows every key of the key table at 80x24 (the commonest terminal: the
# live help once lost its last rows, m and Ctrl-L, under the screen's
# edge), at 200x60, and at 60x15, where it cannot all show at once: there
# a "more" mark on the box's border says so, PgDn and Up scroll, Esc
# closes. The rows looked for come from the table itself (tool_keys), so
# a key added later is looked for too; help_box.py reads the drawn box,
# page by page, and finds every row's keys and whole line in it.
. tests/lib.sh
. tests/lib_tui.sh
case $BUILD in /*) TK=$BUILD/tests/tool_keys;; *) TK=$PWD/$BUILD/tests/tool_keys;; esac
[ -x "$TK" ] || skip "no $TK (run make all)"
"$TK" live >"$TMP/rows" || die "tool_keys failed"
[ "$(wc -l <"$TMP/rows")" -ge 20 ] || die "too few rows from the key table: $(cat "$TMP/rows")"
cat >"$TMP/h.feed" <<'FEED'
set beat=0.5 sync=10
0    *  hello max_steps=9000
0.1  *  phase phase=train
0.1  *  train from=1 to=9000 rate=20 buckets=1
FEED
start_feed 80 24 "" -n 2 -- --script "$TMP/h.feed"
wait_for 15 hasE " RUNNING .*step [1-9]" || dies "not training"

# the first line shown: the N of "▲ N more" on the box's top border, 0 without one
help_top() {
    local n
    n=$(screen | grep ' ddptop keys ' | grep -o '▲ [0-9]* more' | grep -o '[0-9][0-9]*')
    echo "${n:-0}"
}
top_moved() { [ "$(help_top)" != "$1" ]; }
# pages SIZE: ? opened at this size; every scroll position's screen into
# $TMP/SIZE.N, PgDn until no "▼ N more" is left on the bottom border
pages() {
    rm -f "$TMP/$1".*
    keys '?'
    wait_for 10 has ' ddptop keys ' || dies "no help at $1"
    local i=0 top=0 next
    while :; do
        screen >"$TMP/$1.$i"
        grep -q '▼ [0-9]* more (Down, PgDn)' "$TMP/$1.$i" || break
        [ $i -lt 30 ] || dies "the help never ends at $1"
        keys PgDn
        wait_for 10 top_moved "$top" || dies "PgDn did not scroll the help at $1"
        next=$(help_top)
        [ "$next" -gt "$top" ] || dies "PgDn went from line $top to $next at $1"
        top=$next
        i=$((i + 1))
    done
    echo $((i + 1)) >"$TMP/$1.count"
}
all_rows() { "$PY" tests/tools/help_box.py "ddptop keys" "$TMP/rows" "$TMP/$1".[0-9]* || dies "the help at $1 lacks a key"; }
closes() {
    keys Escape
    wait_for 10 sh -c "! command tmux -L '$TS' capture-pane -p -t '$TS' | grep -q ' ddptop keys '" || dies "Esc did not close the help at $1"
}

# 80x24: every row on one page while the table's rows fit the 22 rows
# inside the box (a key added later may make it scroll, never cut it)
pages 80x24
[ "$(wc -l <"$TMP/rows")" -gt 22 ] || [ "$(cat "$TMP/80x24.count")" = 1 ] || dies "the help scrolls at 80x24"
all_rows 80x24
grep -q '▲\|▼' "$TMP/80x24.0" && dies "a more mark with nothing more at 80x24"
closes 80x24

# 200x60: the same, with room to spare
resize 200 60
wait_for 10 sh -c "[ \"\$(command tmux -L '$TS' capture-pane -p -t '$TS' | wc -l)\" = 60 ]" || dies "not 60 rows"
pages 200x60
[ "$(cat "$TMP/200x60.count")" = 1 ] || dies "the help scrolls at 200x60"
all_rows 200x60
closes 200x60

# 60x15: too short for it all: a mark below, PgDn pages to the end, where
# the mark above says how many went by; Up scrolls back; any other key closes
resize 60 15
wait_for 10 sh -c "[ \"\$(command tmux -L '$TS' capture-pane -p -t '$TS' | wc -l)\" = 15 ]" || dies "not 15 rows"
pages 60x15
[ "$(cat "$TMP/60x15.count")" -ge 2 ] || dies "the help did not scroll at 60x15"
all_rows 60x15
last=$(help_top)
keys Up
wait_for 10 sh -c "command tmux -L '$TS' capture-pane -p -t '$TS' | grep -q '▼ 1 more (Down, PgDn)'" || dies "Up did not scroll back one line"
closes 60x15
keys q
wait_for 10 has "Quit now?" || dies "no quit question"
keys y
left_with 0
echo "PASS: ? shows every key of the table at 80x24 and 200x60, and scrolls through all of them at 60x15"
