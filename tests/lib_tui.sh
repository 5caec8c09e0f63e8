# tests/lib_tui.sh — the screen as a user sees it, in a private tmux server
# (tmux -L: no interference with anyone's sessions), with the scripted
# feeder (tests/tools/tool_feed.c) in place of the workers, so every panel is
# tested reproducibly through the real frontend. Sourced after tests/lib.sh.
command -v tmux >/dev/null || skip "tmux not installed"
case $BUILD in /*) FEED=$BUILD/tests/tool_feed;; *) FEED=$PWD/$BUILD/tests/tool_feed;; esac
[ -x "$FEED" ] || skip "no $FEED (run make all)"
TS=ddptop-tui-$$-$RANDOM
tmux() { command tmux -L "$TS" "$@"; }
CLEANUPS+=("command tmux -L $TS kill-server")
# start_feed W H 'ENV=... ' DDPTOP-RUN-ARGS...: ddptop run with the feeder
# as every rank, in a WxH pane; its stdout/stderr go to $TMP/after.txt and
# its exit status to $TMP/exit. The pane stays after ddptop leaves.
start_feed() {
    local w=$1 h=$2 env=$3
    shift 3
    # a test that killed this server to start afresh: a new session sent to
    # a server still on its way out dies with it ("server exited
    # unexpectedly"), so wait until it is gone, and try once more if not
    wait_for 10 sh -c "! command tmux -L '$TS' ls >/dev/null 2>&1"
    local cmd="cd '$PWD' && DDPTOP_TEST_TAG='$DDPTOP_TEST_TAG' DDPTOP_WORKER='$FEED' LANG=C.UTF-8 $env '$DDPTOP' run $* >'$TMP/after.txt' 2>&1; echo \$? >'$TMP/exit'; sleep 120"
    tmux new-session -d -s "$TS" -x "$w" -y "$h" "$cmd" 2>/dev/null || {
        sleep 0.5
        tmux new-session -d -s "$TS" -x "$w" -y "$h" "$cmd"
    }
    # ddptop's pid, so a test that fails while it hangs does not leave it
    # (and its feeders, which die with it) behind
    local pane p
    pane=$(tmux display -p -t "$TS" '#{pane_pid}')
    for _ in $(seq 50); do p=$(pgrep -P "$pane" -x ddptop) && break; sleep 0.05; done
    [ -n "$p" ] && CLEANUPS+=("kill -9 $p")
}
screen() { tmux capture-pane -p -t "$TS"; }
screen_e() { tmux capture-pane -p -e -t "$TS"; }
has() { screen | grep -q -- "$1"; }
hasE() { screen | grep -Eq -- "$1"; }
keys() { tmux send-keys -t "$TS" "$@"; }
resize() { tmux resize-window -t "$TS" -x "$1" -y "$2"; }
# fail with the screen attached
dies() { screen; die "$*"; }
# Feeders of this run (they inherit DDPTOP_TEST_TAG, like workers).
our_feeders() {
    local p
    for p in $(pgrep -x tool_feed); do
        tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx "DDPTOP_TEST_TAG=$DDPTOP_TEST_TAG" && echo "$p"
    done
}
no_feeders() { [ -z "$(our_feeders)" ]; }
# ddptop left with status $1 and no feeder is left behind.
left_with() {
    wait_for 15 test -s "$TMP/exit" || dies "ddptop did not leave"
    [ "$(cat "$TMP/exit")" = "$1" ] || { cat "$TMP/after.txt"; die "ddptop exited $(cat "$TMP/exit"), want $1"; }
    wait_for 5 no_feeders || die "feeders left running: $(our_feeders)"
}
