#!/usr/bin/env bash
# tests/bench_tui.sh — `make bench-tui`: can the frontend keep up? RANKS
# scripted ranks (tests/tools/tool_feed.c) send RATE steps/s each (a step and a
# bucket all-reduce per step, like the worker) to the real ddptop drawing
# on a real terminal (tmux, 200x60); ddptop measures itself (tui/run/bench.h):
# CPU over the window, frames, arrival->screen and send->screen latency,
# steps lost (gaps) and dropped. /proc gives the CPU of ddptop, of the
# feeders and of tmux over the same window, for context.
# Env: BUILD, RANKS (64), RATE (100), BUCKETS (1: all-reduces per step),
# SECS (20), WARMUP (5), OUT (keep bench-tui.json there).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RANKS=${RANKS:-64}
RATE=${RATE:-100}
SECS=${SECS:-20}
WARMUP=${WARMUP:-5}
BUCKETS=${BUCKETS:-1}
case $BUILD in /*) B=$BUILD;; *) B=$PWD/$BUILD;; esac
DDPTOP=$B/ddptop
FEED=$B/tests/tool_feed
for f in "$DDPTOP" "$FEED"; do [ -x "$f" ] || { echo "bench-tui: no $f (make all)"; exit 2; }; done
command -v tmux >/dev/null || { echo "bench-tui: tmux is needed"; exit 2; }
TMP=$(mktemp -d /tmp/ddptop-bench.XXXXXX)
OUT=${OUT:-$TMP}
TS=ddptop-bench-$$
export DDPTOP_TEST_TAG=bench-$$
pid=
# ddptop by its pid if it is still there (its feeders die with it)
trap 'tmux -L "$TS" kill-server 2>/dev/null; [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$TMP"' EXIT
cat >"$TMP/b.feed" <<FEED
set beat=1 sync=10
0    *  hello host=bench max_steps=100000000 steps_per_epoch=1000 dataset_size=64000
0.1  *  phase phase=train
0.1  *  shard epoch=0 size=64000
0.2  *  train from=1 to=100000000 rate=$RATE buckets=$BUCKETS step_ms=9 comm_ms=2
FEED
tmux -L "$TS" new-session -d -s b -x 200 -y 60 \
  "DDPTOP_TEST_TAG=$DDPTOP_TEST_TAG DDPTOP_WORKER=$FEED DDPTOP_BENCH_OUT=$TMP/bench.json DDPTOP_BENCH_WARMUP=$WARMUP DDPTOP_BENCH_SECS=$SECS LANG=C.UTF-8 $DDPTOP run -n $RANKS --stop-grace 10 -- --script $TMP/b.feed >$TMP/after.txt 2>&1; echo \$? >$TMP/exit; sleep 60"
# ddptop's pid: the pane's child
pane=$(tmux -L "$TS" display -p -t b '#{pane_pid}')
for _ in $(seq 50); do pid=$(pgrep -P "$pane" -x ddptop); [ -n "$pid" ] && break; sleep 0.1; done
[ -n "${pid:-}" ] || { echo "bench-tui: ddptop did not start"; exit 1; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
feeders_ticks() { local t=0 p; for p in $(pgrep -P "$pid" -x tool_feed); do t=$((t + $(ticks "$p"))); done; echo $t; }
tmux_pid=$(tmux -L "$TS" display -p '#{pid}')
HZ=$(getconf CLK_TCK)
sleep "$WARMUP"
a_d=$(ticks "$pid"); a_f=$(feeders_ticks); a_t=$(ticks "$tmux_pid"); t0=$(date +%s.%N)
for _ in $(seq $((SECS * 10 + 100))); do [ -s "$TMP/bench.json" ] && break; sleep 0.1; done
b_d=$(ticks "$pid"); b_f=$(feeders_ticks); b_t=$(ticks "$tmux_pid"); t1=$(date +%s.%N)
[ -s "$TMP/bench.json" ] || { echo "bench-tui: no result from ddptop"; tmux -L "$TS" capture-pane -p -t b; exit 1; }
tmux -L "$TS" capture-pane -p -t b >"$TMP/screen.txt"
tmux -L "$TS" send-keys -t b d
for _ in $(seq 300); do grep -q "job done\|job failed" "$TMP/screen.txt" && break; sleep 0.1; tmux -L "$TS" capture-pane -p -t b >"$TMP/screen.txt"; done
tmux -L "$TS" send-keys -t b q
for _ in $(seq 100); do [ -s "$TMP/exit" ] && break; sleep 0.1; done
el=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
pct() { awk -v a="$1" -v b="$2" -v hz="$HZ" -v el="$el" 'BEGIN { printf "%.1f", 100 * (b - a) / hz / el }'; }
[ "$OUT" = "$TMP" ] || cp "$TMP/bench.json" "$OUT/bench-tui.json"
echo "bench-tui: $RANKS ranks x $RATE steps/s ($BUCKETS all-reduce/step), ${SECS}s window after ${WARMUP}s warm-up, 200x60 tmux pane"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -sr)"
echo "ddptop (its own rusage):  $(cat "$TMP/bench.json")"
echo "from /proc over ${el}s: ddptop $(pct "$a_d" "$b_d")% of one core, $RANKS feeders $(pct "$a_f" "$b_f")%, tmux $(pct "$a_t" "$b_t")%"
echo "exit status of ddptop after d, q: $(cat "$TMP/exit" 2>/dev/null || echo '?')"
[ "$(cat "$TMP/exit" 2>/dev/null)" = 0 ] || { grep -v ': exit 0, ' "$TMP/after.txt" | head -5; tail -8 "$TMP/screen.txt"; }
# the verdict against the targets (docs/BENCHMARKS.md)
python3 - "$TMP/bench.json" "$RANKS" "$RATE" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); ranks, rate = int(sys.argv[2]), int(sys.argv[3])
want = ranks * rate
checks = [
    ("CPU < 10% of one core", r["cpu_pct_of_one_core"] < 10, "%.1f%%" % r["cpu_pct_of_one_core"]),
    ("drops nothing", r["step_gaps"] == 0 and r["worker_drops"] == 0, "gaps %d, worker drops %d" % (r["step_gaps"], r["worker_drops"])),
    ("keeps the pace", r["steps_per_s"] >= 0.95 * want, "%.0f of %d steps/s" % (r["steps_per_s"], want)),
    ("step on screen < 100 ms after arrival (p99)", r["arrival_to_screen_ms"]["p99"] < 100, "p50 %.1f, p99 %.1f, max %.1f ms" % tuple(r["arrival_to_screen_ms"][k] for k in ("p50", "p99", "max"))),
]
for name, ok, detail in checks:
    print("  %s %s: %s" % ("PASS" if ok else "MISS", name, detail))
PY
