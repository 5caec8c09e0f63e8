#!/usr/bin/env bash
# tests/bench_frame.sh — `make bench-frame`: what one frame of the screen
# costs, in instructions (callgrind: the same count on every run, unlike
# wall-clock time on a shared machine), at RANKS ranks (tests/tools/
# bench_frame.c: a job fed tool_load's messages, drawn on a 200x60 pty,
# TERM=xterm-256color, C.UTF-8). One row per size: instructions per frame in
# all; building the canvas (draw_screen); ncurses (its refresh, wnoutrefresh
# and the calls that hand it changed cells); ddptop's own terminal writer
# (tty_frame_*); the rest of the view's frame (blanking, the row diff); then
# the bytes written to the terminal and their hash (two builds that write
# frames the same way and draw the same screens write the same bytes;
# tests/bench_frame_screens.py compares screens when the bytes differ).
# Without valgrind only the native line (CPU time, noisy) is printed.
# Env: BUILD (build), RANKS ("64 256 1024"), FRAMES (50), BIN (the tool;
# default $BUILD/tests/bench_frame), OUT (a directory that keeps the
# callgrind files).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RANKS=${RANKS:-64 256 1024}
FRAMES=${FRAMES:-50}
BIN=${BIN:-$BUILD/tests/bench_frame}
[ -x "$BIN" ] || { echo "bench-frame: no $BIN (make all)"; exit 2; }
TMP=$(mktemp -d /tmp/ddptop-bench-frame.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
OUT=${OUT:-$TMP}
mkdir -p "$OUT"

if ! command -v valgrind >/dev/null || ! command -v callgrind_annotate >/dev/null; then
    echo "bench-frame: no valgrind: CPU time only (noisy on a shared machine)"
    for n in $RANKS; do "$BIN" --ranks "$n" --frames "$FRAMES" || exit 1; done
    exit 0
fi

# inclusive instructions of a function in a callgrind file (0 when absent)
incl() {
    callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
        awk -v f="$2" '{ gsub(",", "", $1) } $0 ~ (":" f " ") { print $1; found = 1; exit } END { if (!found) print 0 }'
}

printf '%-6s %7s %11s %11s %11s %11s %11s %10s  %s\n' ranks frames "Ir/frame" canvas ncurses tty_frame "view rest" "tty bytes" "tty fnv1a"
for n in $RANKS; do
    f=$OUT/callgrind.$n
    line=$(valgrind --tool=callgrind --toggle-collect=bench_frame_draw --callgrind-out-file="$f.%p" \
        "$BIN" --ranks "$n" --frames "$FRAMES" 2>/dev/null) || { echo "bench-frame: $BIN --ranks $n failed"; exit 1; }
    # the run's own file: the pty reader is a child with its own (empty) one
    main=$(ls -S "$f".* | head -1)
    mv "$main" "$f.out" && rm -f "$f".[0-9]*
    total=$(incl "$f.out" bench_frame_draw)
    canvas=$(incl "$f.out" draw_screen)
    nc=0
    for fn in wrefresh wnoutrefresh waddnwstr wmove; do nc=$((nc + $(incl "$f.out" $fn))); done
    own=0
    for fn in tty_frame_begin tty_frame_cells tty_frame_end; do own=$((own + $(incl "$f.out" $fn))); done
    bytes=$(sed -n 's/.*terminal \([0-9]*\) bytes.*/\1/p' <<<"$line")
    hash=$(sed -n 's/.*fnv1a \([0-9a-f]*\).*/\1/p' <<<"$line")
    awk -v n="$n" -v k="$FRAMES" -v t="$total" -v c="$canvas" -v r="$nc" -v o="$own" -v b="$bytes" -v h="$hash" 'BEGIN {
        printf "%-6s %7d %11.0f %11.0f %11.0f %11.0f %11.0f %10s  %s\n", n, k, t / k, c / k, r / k, o / k, (t - c - r - o) / k, b, h }'
done
