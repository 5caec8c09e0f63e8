# tests/scenario/python/lib_py.sh — the python tests' launch and process
# helpers (tests/lib_py.sh) plus the screen in a private tmux server.
. tests/lib_py.sh
# ---- the screen, in a private tmux server (the TUI tests) ----
# py_tui_start 'ENV=... ' DDPTOP-RUN-ARGS...: the script's job in a 120x40
# pane, recorded to $TMP/rec, rank logs in $TMP/logs; ddptop's output goes
# to $TMP/after.txt and its exit status to $TMP/exit.
py_tui_start() {
    command -v tmux >/dev/null || skip "tmux not installed"
    local env=$1
    shift
    S=ddptop-py-$$-$RANDOM
    CLEANUPS+=("command tmux -L $S kill-server" "for p in \$(our_ranks); do kill -9 \$p; done")
    tmux new-session -d -s "$S" -x 120 -y 40 \
      "cd '$PWD' && DDPTOP_TEST_TAG='$DDPTOP_TEST_TAG' LANG=C.UTF-8 $env $(py_run_line --record "$TMP/rec" --log-dir "$TMP/logs" "$@") >'$TMP/after.txt' 2>&1; echo \$? >'$TMP/exit'; sleep 120"
}
tmux() { command tmux -L "$S" "$@"; }
screen() { tmux capture-pane -p -t "$S"; }
has() { screen | grep -q -- "$1"; }
hasE() { screen | grep -Eq -- "$1"; }
dies() { screen; tail -5 "$TMP"/logs/rank-*.log 2>/dev/null; die "$*"; }
# d ends the job: every rank stops, the screen says done, q leaves with 0;
# then the recording is exported to $TMP/rec.jsonl.
py_tui_destroy() {
    tmux send-keys -t "$S" d
    wait_for 60 no_ranks || dies "ranks still running after d: $(our_ranks)"
    wait_for 10 has "job done" || dies "the screen does not say the job is done"
    tmux send-keys -t "$S" q
    wait_for 15 test -s "$TMP/exit" || dies "ddptop did not leave after q"
    [ "$(cat "$TMP/exit")" = 0 ] || { cat "$TMP/after.txt"; die "ddptop exited $(cat "$TMP/exit")"; }
    "$DDPTOP" export "$TMP/rec" --jsonl "$TMP/rec.jsonl" || die "export failed"
}
