# A frame reaches the terminal in one write, not a write(2) per cursor move
# (ncurses 6.4 flushes after every move until the screen has once been
# suspended and resumed; tui/screen/view_tui.c's open does that once): 16
# ranks training fast change many rows every frame, and ddptop's main
# thread makes a few writes a frame at most (90 a frame before the fix, 1.7
# after, here).
# Counted from /proc (the main thread's syscw), frames from DDPTOP_BENCH_OUT.
. tests/lib.sh
. tests/lib_tui.sh
cat >"$TMP/w.feed" <<'FEED'
set beat=1
0    *   hello host=node{r} max_steps=90000 steps_per_epoch=100 dataset_size=25600
0.2  *   phase phase=train
0.3  *   train from=1 to=90000 rate=40
FEED
start_feed 160 50 "DDPTOP_BENCH_OUT='$TMP/bench.json' DDPTOP_BENCH_WARMUP=3 DDPTOP_BENCH_SECS=4" -n 16 -- --script "$TMP/w.feed"
wait_for 40 has " 16/16 ranks" || dies "not every rank said hello"
pane=$(tmux display -p -t "$TS" '#{pane_pid}')
pid=$(pgrep -P "$pane" -x ddptop) || dies "no ddptop process"
syscw() { awk '/^syscw/ {print $2}' "/proc/$pid/task/$pid/io"; }
[ -r "/proc/$pid/task/$pid/io" ] || skip "no /proc/PID/task/TID/io here"
# the counters over the bench window: from 3 s after start to 7 s
wait_for 20 bash -c "[ \$(( \$(date +%s) - \$(stat -c %Y /proc/$pid) )) -ge 3 ]" || dies "ddptop did not run 3 s"
w0=$(syscw)
wait_for 30 test -s "$TMP/bench.json" || dies "no bench result"
w1=$(syscw)
frames=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['frames'])" "$TMP/bench.json")
[ "$frames" -ge 20 ] || dies "only $frames frames in 4 s"
per=$(awk -v a="$w0" -v b="$w1" -v f="$frames" 'BEGIN { printf "%.1f", (b - a) / f }')
echo "main thread: $((w1 - w0)) writes, $frames frames: $per a frame"
awk -v p="$per" 'BEGIN { exit !(p < 6) }' || dies "$per writes a frame (want a few at most: one per frame, and ZeroMQ's)"
keys q
keys y
left_with 0
echo "one write ok"
