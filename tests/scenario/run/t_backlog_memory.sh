#!/usr/bin/env bash
# t_backlog_memory.sh — a frontend that falls behind gives the memory back
# once it has caught up. 256 ranks x 100 steps/s from two load generators
# (tests/tools/tool_load.c, bursts) against `ddptop listen --headless --json`:
# ranks 0-127 send over ZeroMQ's tel, 128-255 over the telemetry stream
# (net/tstream.h). DDPTOP_BENCH_STALL makes ddptop's loop sleep 8 s (as on a
# machine that did not run it) while ZeroMQ's I/O thread goes on receiving
# the first half (~20,000 frames pile up in ddptop) and the second half's
# frames wait in the kernel and in the generator. Afterwards ddptop must
# catch up (the step on time again, nothing dropped by any rank on either
# path, no bad frame) and its RSS must come back near what it was before
# the stall (ZeroMQ's frames once pinned 8 KB read buffers each, the
# freed memory stayed resident in the allocator's arenas, and each stream
# connection's 64 KB read buffer, read full in the catch-up, stayed
# resident: 8 MB for these 128 connections).
. tests/lib.sh
LOAD=$BUILD/tests/tool_load
[ -x "$LOAD" ] || die "$LOAD is not built"
ulimit -n 4096 2>/dev/null || skip "skip: cannot open 4096 files (ulimit -n)"
D=$TMP/sock
mkdir -m 700 "$D" "$TMP/bad"
# a malformed knob is a usage error: one line, exit 2
DDPTOP_BENCH_OUT=$TMP/bad/b.json DDPTOP_BENCH_STALL=8 "$DDPTOP" listen "ipc://$TMP/bad/ctl" --headless \
    >"$TMP/bad/out" 2>&1 &
pb=$!
CLEANUPS+=("kill -9 $pb")
wait_for 10 test -S "$TMP/bad/ctl" || die "ddptop listen did not bind: $(tail -3 "$TMP/bad/out")"
"$LOAD" "ipc://$TMP/bad/ctl" --ranks 1 --secs 2 >/dev/null 2>&1 &
wait $pb
rc=$?
[ $rc = 2 ] && grep -q 'DDPTOP_BENCH_STALL="8": expected AT_SECONDS:SECONDS' "$TMP/bad/out" ||
    die "DDPTOP_BENCH_STALL=8: exit $rc, $(tail -2 "$TMP/bad/out")"
out=$TMP/listen.json
DDPTOP_BENCH_OUT=$TMP/bench.json DDPTOP_BENCH_STALL=8:8 \
    "$DDPTOP" listen "ipc://$D/ctl" --headless --json >"$out" 2>&1 &
pl=$!
CLEANUPS+=("kill -9 $pl")
wait_for 10 test -S "$D/ctl" || die "ddptop listen did not bind: $(tail -3 "$out")"
t0=$(date +%s)
start=$((t0 + 2))
gens=()
for first in 0 128; do
    tel=stream
    [ $first = 0 ] && tel=zmq
    "$LOAD" "ipc://$D/ctl" --ranks 256 --first $first --count 128 --start $start --secs 90 --tel $tel \
        >"$TMP/gen.$first" 2>&1 &
    gens+=($!)
    CLEANUPS+=("kill $!")
done
rss() { awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$pl/status" 2>/dev/null || echo 0; }
# the RSS before the stall (which begins 8 s after the first hello, after t0)
while [ $(($(date +%s) - t0)) -lt 7 ]; do sleep 0.5; done
before=$(rss)
# the second half on the stream, the first on ZeroMQ
streams=$(ss -x 2>/dev/null | grep -c "$D/tel.stream")
[ "$streams" -ge 128 ] || die "$streams connections on the telemetry stream, want the 128 of ranks 128-255"
# the peak while the frames pile up, until ddptop is on time again: the
# job's step (progress lines, once a second) within 1 s of the schedule
peak=$before
caught=0
end=$((t0 + 75))
while [ "$(date +%s)" -le $end ]; do
    r=$(rss)
    [ "$r" -gt "$peak" ] && peak=$r
    now=$(date +%s)
    step=$(grep '"k":"progress"' "$out" | tail -1 | sed -n 's/.*"step":\([0-9]*\).*/\1/p')
    if [ $((now - t0)) -ge 18 ] && [ -n "$step" ] && [ "$step" -ge $(((now - start - 1) * 100)) ]; then
        caught=1
        break
    fi
    sleep 0.5
done
[ $caught = 1 ] || die "ddptop did not catch up within 75 s (step ${step:-none}, rss $before -> $peak MB)"
sleep 3
after=$(rss)
echo "rss: $before MB before the stall, $peak MB at the peak, $after MB after catching up"
# ~12,800 frames queued (100 a ZeroMQ peer) hold 15-20 MB
[ $((peak - before)) -ge 10 ] || die "no backlog formed in the stall (rss $before -> $peak MB): the test did not test"
[ "$after" -le $((before + 10)) ] || die "the backlog's memory stayed: $after MB after catching up, $before MB before"
# nothing lost on the way: no rank dropped telemetry (the job's count and
# the generators' own), no bad frame
"$PY" - "$out" <<'PYEOF' || exit 1
import json, sys
prog = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"k":"progress"')]
if not prog or prog[-1]["drops"] or prog[-1]["bad_frames"]:
    print("FAIL: " + (f"drops {prog[-1]['drops']}, bad frames {prog[-1]['bad_frames']}" if prog else "no progress line"))
    sys.exit(1)
PYEOF
kill -INT "${gens[@]}" 2>/dev/null # they say what they sent and dropped, and leave
wait_for 20 grep -q '^load:' "$TMP/gen.0" || die "generator 0 did not report: $(tail -2 "$TMP/gen.0")"
wait_for 20 grep -q '^load:' "$TMP/gen.128" || die "generator 128 did not report: $(tail -2 "$TMP/gen.128")"
grep -h '^load:' "$TMP/gen.0" "$TMP/gen.128"
grep -q ' 0 dropped$' "$TMP/gen.0" && grep -q ' 0 dropped$' "$TMP/gen.128" || die "a generator dropped telemetry"
echo "PASS: an 8 s stall at 256 ranks (half on ZeroMQ, half on the stream): caught up, nothing lost, the memory given back"
