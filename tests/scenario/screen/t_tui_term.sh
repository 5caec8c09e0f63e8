# Terminals the screen cannot use: TERM=dumb (no cursor addressing), TERM
# unset, a TERM with no terminfo entry, and no terminal at all. `ddptop run`,
# `replay` and `attach` without --headless refuse each with one line naming
# it and "use --headless", exit 2, before any rank starts, and leave the
# terminal's modes as they were (stty -g before and after).
. tests/lib.sh
. tests/lib_tui.sh
cat >"$TMP/t.feed" <<'FEED'
set beat=0.5
0    *  hello max_steps=100 dataset_size=64
0.1  *  phase phase=train
0.1  *  train from=1 to=100 rate=50
FEED
"$BUILD/tests/tool_rec" write "$TMP/job.rec" --ranks 2 --steps 5 >/dev/null || die "tool_rec write failed"
# refused ENV WANT ARGS...: ddptop ARGS in a tmux pane with ENV.
refused() {
    local env=$1 want=$2
    shift 2
    rm -f "$TMP/exit" "$TMP/after.txt" "$TMP/stty0" "$TMP/stty1"
    tmux new-session -d -s "$TS" -x 100 -y 30 "cd '$PWD' && stty -g >'$TMP/stty0'; env $env DDPTOP_TEST_TAG='$DDPTOP_TEST_TAG' DDPTOP_WORKER='$FEED' LANG=C.UTF-8 '$DDPTOP' $* >'$TMP/after.txt' 2>&1; echo \$? >'$TMP/exit'; stty -g >'$TMP/stty1'; sleep 60"
    wait_for 20 test -s "$TMP/stty1" || { screen; die "[$env $1] did not leave"; }
    [ "$(cat "$TMP/exit")" = 2 ] || die "[$env $1] exit $(cat "$TMP/exit"), want 2: $(cat "$TMP/after.txt")"
    [ "$(wc -l <"$TMP/after.txt")" = 1 ] && grep -q -- "$want (use --headless)" "$TMP/after.txt" \
        || die "[$env $1] not one line saying \"$want\": $(cat "$TMP/after.txt")"
    cmp -s "$TMP/stty0" "$TMP/stty1" || die "[$env $1] terminal modes changed: $(cat "$TMP/stty0") -> $(cat "$TMP/stty1")"
    echo "ok: [$env] $1 -> $(cat "$TMP/after.txt")"
    tmux kill-session -t "$TS" 2>/dev/null
}
refused TERM=dumb "terminal type 'dumb' cannot place the cursor" run -n 2 -- --script "$TMP/t.feed"
refused TERM=dumb "terminal type 'dumb' cannot place the cursor" replay "$TMP/job.rec"
refused TERM= "TERM is not set" run -n 2 -- --script "$TMP/t.feed"
refused TERM=no-such-terminal "unknown terminal type 'no-such-terminal'" replay "$TMP/job.rec"
wait_for 10 no_feeders || die "feeders left running: $(our_feeders)"

# No terminal at all (no controlling tty, stdin and stdout not one).
setsid "$DDPTOP" replay "$TMP/job.rec" </dev/null >"$TMP/o" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "not a terminal (use --headless)" "$TMP/o" || die "replay without a terminal: exit $rc: $(cat "$TMP/o")"
sed 's/to=100 /to=100000 /' "$TMP/t.feed" >"$TMP/long.feed"
DDPTOP_WORKER=$FEED "$DDPTOP" run --headless -n 2 -- --script "$TMP/long.feed" >"$TMP/job.out" 2>&1 &
job=$!
CLEANUPS+=("kill -9 $job")
wait_for 20 grep -q 'ddptop attach: ddptop attach ipc://' "$TMP/job.out" || die "no attach endpoint: $(cat "$TMP/job.out")"
ep=$(sed -n 's/.*ddptop attach: ddptop attach \(ipc:[^ ]*\).*/\1/p' "$TMP/job.out" | head -1)
setsid "$DDPTOP" attach "$ep" </dev/null >"$TMP/o" 2>&1; rc=$?
[ $rc = 2 ] && [ "$(wc -l <"$TMP/o")" = 1 ] && grep -q "not a terminal (use --headless)" "$TMP/o" \
    || die "attach without a terminal: exit $rc: $(cat "$TMP/o")"
echo "ok: no terminal: replay and attach exit 2"
kill -INT $job
wait_for 30 sh -c "! kill -0 $job 2>/dev/null" || die "the job did not stop after Ctrl-C"
wait $job; rc=$?
[ $rc = 130 ] || die "the job attached to: exit $rc after Ctrl-C, want 130: $(tail -3 "$TMP/job.out")"
no_feeders || die "feeders left running: $(our_feeders)"
