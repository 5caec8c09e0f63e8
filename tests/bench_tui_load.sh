#!/usr/bin/env bash
# tests/bench_tui_load.sh — `make bench-tui` at scale: N simulated ranks from
# a few processes (tests/tools/tool_load.c, PROCS of them, not N) send RATE
# steps/s each (a coll per bucket and a step per step, a beat a second) to a
# real `ddptop listen ipc://DIR/ctl` drawing in a 200x60 tmux pane; ddptop
# measures itself (tui/run/bench.h): CPU over the window, per message, RSS,
# steps lost (gaps) and dropped, arrival->screen latency. One row per ranks
# x wire: "burst" (one frame per rank every 50 ms, today's worker) and
# "single" (one frame per message: the wire before bursts), side by side in
# one run; BEFORE=PATH adds a row per size and wire in BEFORE_WIRES
# ("single": a build without bursts) for another ddptop build. A wire may
# end in "+spread": the ranks' flushes spread over the 50 ms (ranks out of
# step, clocks apart) instead of the wall clock's 50 ms marks the worker
# flushes on (tool_load --flush). A wire may also end in "+zmq": telemetry
# over ZeroMQ's tel PUSH instead of ddptop's telemetry stream (tool_load
# --tel zmq; the worker before the stream), e.g. "burst+zmq", "burst+spread+zmq".
# Env: BUILD, ROWS ("64 256 1024"), WIRES ("burst+zmq burst"), RATE (100),
# BUCKETS (1), SECS (20), WARMUP (6), PROCS (2), BEFORE, BEFORE_WIRES,
# OUT (a directory that keeps each row's JSON).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ROWS=${ROWS:-64 256 1024}
WIRES=${WIRES:-burst+zmq burst}
RATE=${RATE:-100}
BUCKETS=${BUCKETS:-1}
SECS=${SECS:-20}
WARMUP=${WARMUP:-6}
PROCS=${PROCS:-2}
BEFORE=${BEFORE:-}
BEFORE_WIRES=${BEFORE_WIRES:-single}
case $BUILD in /*) B=$BUILD;; *) B=$PWD/$BUILD;; esac
LOAD=$B/tests/tool_load
for f in "$B/ddptop" "$LOAD" ${BEFORE:+"$BEFORE"}; do [ -x "$f" ] || { echo "bench-tui: no $f (make all)"; exit 2; }; done
command -v tmux >/dev/null || { echo "bench-tui: tmux is needed"; exit 2; }
TMP=$(mktemp -d /tmp/ddptop-bench.XXXXXX)
TS0=ddptop-load-$$
rows=0
gens=()
trap 'for p in "${gens[@]+"${gens[@]}"}"; do kill "$p" 2>/dev/null; done; for i in $(seq $rows); do tmux -L "$TS0.$i" kill-server 2>/dev/null; done; rm -rf "$TMP"' EXIT
HZ=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }

# one row: BINARY LABEL RANKS WIRE
row() {
    local bin=$1 label=$2 n=$3 wire=${4%+zmq} flush=grid tel=stream d
    [ "$wire" != "$4" ] && tel=zmq
    local w2=${wire%+spread}
    [ "$w2" != "$wire" ] && flush=spread
    wire=$w2
    d=$(mktemp -d "$TMP/r.XXXXXX") && chmod 700 "$d"
    rows=$((rows + 1))
    local TS=$TS0.$rows
    tmux -L "$TS" new-session -d -s b -x 200 -y 60 \
      "ulimit -n 65536 2>/dev/null || ulimit -n 20000; DDPTOP_BENCH_OUT=$d/bench.json DDPTOP_BENCH_WARMUP=$WARMUP DDPTOP_BENCH_SECS=$SECS LANG=C.UTF-8 $bin listen ipc://$d/ctl >$d/after.txt 2>&1; echo \$? >$d/exit; sleep 60"
    for _ in $(seq 100); do [ -S "$d/ctl" ] && break; sleep 0.1; done
    [ -S "$d/ctl" ] || { echo "bench-tui: ddptop listen did not bind $d/ctl"; tmux -L "$TS" capture-pane -p -t b; return 1; }
    local pane pid
    pane=$(tmux -L "$TS" display -p -t b '#{pane_pid}')
    pid=$(pgrep -P "$pane" | head -1)
    gens=()
    local per=$(( (n + PROCS - 1) / PROCS )) first=0 start=$(( $(date +%s) + 2 ))
    while [ $first -lt "$n" ]; do
        local cnt=$(( n - first < per ? n - first : per ))
        "$LOAD" "ipc://$d/ctl" --ranks "$n" --first $first --count $cnt --rate "$RATE" --buckets "$BUCKETS" \
            --start $start --wire "$wire" --flush $flush --tel $tel --secs $((WARMUP + SECS + 30)) >"$d/gen.$first" 2>&1 &
        gens+=($!)
        first=$((first + cnt))
    done
    sleep "$WARMUP"
    local a_g=0 p
    for p in "${gens[@]}"; do a_g=$((a_g + $(ticks "$p"))); done
    local t0 rss1
    t0=$(date +%s.%N)
    rss1=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null)
    for _ in $(seq $((SECS * 10 + 300))); do [ -s "$d/bench.json" ] && break; sleep 0.1; done
    local b_g=0 t1 rss2
    for p in "${gens[@]}"; do b_g=$((b_g + $(ticks "$p"))); done
    t1=$(date +%s.%N)
    rss2=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null)
    [ -s "$d/bench.json" ] || { echo "bench-tui: no result from ddptop ($label, $n ranks)"; tmux -L "$TS" capture-pane -p -t b | tail -5; }
    tmux -L "$TS" capture-pane -p -t b >"$d/screen.txt"
    for p in "${gens[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${gens[@]}"; do wait "$p" 2>/dev/null; done
    gens=()
    local gen_pct
    gen_pct=$(awk -v a="$a_g" -v b="$b_g" -v hz="$HZ" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.1f", 100 * (b - a) / hz / (t1 - t0) }')
    tmux -L "$TS" send-keys -t b q
    sleep 0.5
    tmux -L "$TS" send-keys -t b y
    for _ in $(seq 50); do [ -s "$d/exit" ] && break; sleep 0.1; done
    tmux -L "$TS" kill-server 2>/dev/null
    [ -n "${OUT:-}" ] && cp "$d/bench.json" "$OUT/bench-tui-$n-$label.json" 2>/dev/null
    [ -s "$d/bench.json" ] && python3 - "$d/bench.json" "$label" "$n" "$RATE" "$BUCKETS" "$gen_pct" "${rss1:-0}" "${rss2:-0}" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
label, n, rate, buckets, gen, rss1, rss2 = (sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
                                            sys.argv[6], int(sys.argv[7]), int(sys.argv[8]))
want = n * rate
a = r["arrival_to_screen_ms"]
print("| %d x %d | %s | %.0f | %.2f | %.2f | %d / %d | %.0f of %d | %.1f / %.1f / %.1f | %.1f -> %.1f | %s |" % (
    n, rate, label, r["msgs"] / r["window_s"], r["cpu_pct_of_one_core"], 1e6 * r["cpu_s"] / max(r["msgs"], 1),
    r["step_gaps"], r["worker_drops"], r["steps_per_s"], want, a["p50"], a["p99"], a["max"], rss1 / 1024,
    r.get("rss_kb", rss2) / 1024, gen))
PY
}

echo "bench-tui (load generator): ranks x $RATE steps/s, $BUCKETS all-reduce/step, ${SECS}s window after ${WARMUP}s, $PROCS tool_load processes, 200x60 tmux pane"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -sr), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| ranks x steps/s | wire (ddptop) | msgs/s | ddptop % of one core | µs CPU / msg | gaps / drops | steps/s | arrival→screen ms p50 / p99 / max | RSS MB (window start -> end) | load generators % |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for n in $ROWS; do
    if [ -n "$BEFORE" ]; then for w in $BEFORE_WIRES; do row "$BEFORE" "$w (before)" "$n" "$w"; done; fi
    for w in $WIRES; do row "$B/ddptop" "$w" "$n" "$w"; done
done
