# Without colours and without UTF-8 the screen still says everything:
# NO_COLOR=1 LANG=C gives plain ASCII and no colour escape; a monochrome
# terminal (TERM=vt100) gives no colour but keeps UTF-8; the default run
# has both (so the checks above can fail). Lines stay apart by their digits.
. tests/lib.sh
. tests/lib_tui.sh
cat >"$TMP/m.feed" <<'FEED'
set beat=0.5
0    *  hello max_steps=9000 dataset_size=300
0.1  *  phase phase=train
0.1  *  shard epoch=0 size=300
0.1  *  train from=1 to=9000 rate=50
0.6  *  eval epoch=0 step=20 accuracy=0.5
FEED
# colour escapes in a capture: SGR 30-37, 40-47, 90-97, 38;5;n, 48;5;n
ESC=$(printf '\033')
colours() { screen_e | grep -Eq "$ESC\\[([0-9;]*;)?(3[0-7]|4[0-7]|9[0-7]|38;5;[0-9]+|48;5;[0-9]+)(;[0-9;]*)?m"; }
non_ascii() { screen | LC_ALL=C grep -q '[^ -~]'; }
run_one() {     # env, then what must hold
    start_feed 120 40 "$1" -n 2 -- --script "$TMP/m.feed"
    wait_for 10 has "50.0%" || dies "[$1] no eval mark"
    wait_for 5 hasE "^. +1 feed-host +[0-9]+ +train" || dies "[$1] no row for rank 1"
    sleep 0.3
}
stop_one() {
    keys d
    wait_for 10 has "job done" || dies "d did not end the job"
    keys q
    left_with 0
    tmux kill-server 2>/dev/null
    rm -f "$TMP/exit"
}
# 1. NO_COLOR, LANG=C: ASCII only, no colour; the chart draws ranks as digits
run_one "NO_COLOR=1 LANG=C LC_ALL=C"
non_ascii && { screen | LC_ALL=C grep -n '[^ -~]' | head -5; die "non-ASCII characters with LANG=C"; }
colours && die "colour escapes with NO_COLOR"
has "- 3 loss  linear 0=r0 1=r1 " || dies "no ASCII legend for the loss chart"
hasE '^ +[0-9.]+ \|.*[01]' || dies "no digit-drawn loss lines"
hasE '^ +[0-9.]+ \|.*v50\.0%' || dies "no ASCII eval mark"
hasE '^[01.]{100,}' || dies "no ASCII sampler strip"
stop_one
# 2. a terminal without colours: UTF-8 stays, no colour escape
run_one "TERM=vt100"
colours && die "colour escapes on a vt100"
has "─ 2 ranks" || dies "no UTF-8 rules on a vt100"
stop_one
# 3. the default: colours and braille
run_one ""
colours || die "no colour escapes by default"
non_ascii || dies "no UTF-8 glyphs by default"
screen | grep -qP '[\x{2801}-\x{28ff}]' || dies "no braille chart by default"
stop_one
echo "mono ok"
