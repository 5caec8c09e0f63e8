#!/usr/bin/env bash
# t_replay.sh — `ddptop replay --headless`: a recorded live job replays to
# the same summary (ranks' exits, steps, losses, verdict); a truncated
# recording replays up to the damage and says where it ends; bad input is
# one line and exit 2; the example recordings replay and export.
. tests/lib.sh
"$DDPTOP" --help 2>/dev/null | grep -q 'ddptop replay' || skip "skip: this ddptop has no replay yet"
JOB=(--dataset synthetic --model mlp:20,16,3 --batch-size 16)
summary() { grep -E '^(rank [0-9]+: |job (done|failed))' "$1"; }

# --- record -> replay: the same final table ---
timeout 120 "$DDPTOP" run -n 3 --headless --record "$TMP/job.rec" -- "${JOB[@]}" --steps 30 >"$TMP/live.out" 2>&1 \
    || die "live job failed: $(tail -5 "$TMP/live.out")"
"$DDPTOP" replay --headless "$TMP/job.rec" >"$TMP/rep.out" 2>"$TMP/rep.err" || die "replay exited $?: $(cat "$TMP/rep.err")"
[ -s "$TMP/rep.err" ] && die "replay of a complete recording warned: $(cat "$TMP/rep.err")"
summary "$TMP/live.out" >"$TMP/a"; summary "$TMP/rep.out" >"$TMP/b"
[ "$(wc -l <"$TMP/a")" = 4 ] || die "live summary: $(cat "$TMP/a")"
diff "$TMP/a" "$TMP/b" >"$TMP/d" || die "replay summary differs from the live one: $(cat "$TMP/d")"
grep -q "end of recording" "$TMP/rep.out" || die "no 'end of recording' line"
grep -q "epoch [0-9]* step [0-9]*/30  loss" "$TMP/rep.out" || die "no progress line: $(head -5 "$TMP/rep.out")"
# the JSON form too, and a paced replay (--speed) ends the same
"$DDPTOP" replay --headless --json "$TMP/job.rec" >"$TMP/rep.json" || die "replay --json exited $?"
"$PY" -c "import json,sys; o=[json.loads(l) for l in open(sys.argv[1])]; s=o[-1]; assert s['k']=='summary' and s['ok'] and s['step']==30, s" \
    "$TMP/rep.json" || die "replay --json summary"
timeout 20 "$DDPTOP" replay --headless --speed 64 "$TMP/job.rec" >"$TMP/rep64.out" || die "paced replay exited $?"
summary "$TMP/rep64.out" | diff "$TMP/a" - >/dev/null || die "paced replay summary differs"

# --- a truncated recording: played up to the damage, with the message ---
size=$(stat -c %s "$TMP/job.rec")
head -c $((size * 6 / 10)) "$TMP/job.rec" >"$TMP/cut.rec"
"$DDPTOP" replay --headless "$TMP/cut.rec" >"$TMP/cut.out" 2>"$TMP/cut.err" || die "truncated replay exited $?"
grep -q "^ddptop replay: recording ends early at byte [0-9]* (record [0-9]*, t=[0-9.]* s): truncated" "$TMP/cut.err" \
    || die "no 'ends early' line: $(cat "$TMP/cut.err")"
grep -q "recording ends early at byte" "$TMP/cut.out" || die "the replay's events do not say where it ends"
grep -q "^rank 0: " "$TMP/cut.out" || die "no summary for a truncated recording: $(tail -5 "$TMP/cut.out")"

# --- bad input: one line, exit 2 ---
bad() {
    "$DDPTOP" replay "$@" >"$TMP/o" 2>"$TMP/e"; local rc=$?
    [ $rc = 2 ] && [ "$(wc -l <"$TMP/e")" = 1 ] || die "replay $*: exit $rc, stderr: $(cat "$TMP/e")"
}
bad --headless "$TMP/missing.rec"; grep -q "missing.rec" "$TMP/e" || die "missing file not named: $(cat "$TMP/e")"
echo "not a recording" >"$TMP/text.rec"
bad --headless "$TMP/text.rec"
bad --headless --bogus "$TMP/job.rec"; grep -q 'unknown option "--bogus"' "$TMP/e" || die "unknown option: $(cat "$TMP/e")"
bad --headless --speed 1000 "$TMP/job.rec"
bad --headless
bad --json "$TMP/job.rec"

# --- the example recordings: replay and export ---
for f in examples/recordings/clean-4rank.rec examples/recordings/shutdown-hang.rec; do
    [ -f "$f" ] || die "missing $f"
    "$DDPTOP" replay --headless "$f" >"$TMP/ex.out" 2>"$TMP/ex.err" || die "replay $f exited $?: $(cat "$TMP/ex.err")"
    [ "$(grep -c '^rank [0-3]: ' "$TMP/ex.out")" = 4 ] || die "$f: no 4-rank summary: $(tail -6 "$TMP/ex.out")"
    "$DDPTOP" export "$f" --chrome-trace "$TMP/ex.json" --csv "$TMP/ex.csv" 2>"$TMP/ex.err" || die "export $f exited $?"
    "$PY" -c "import json,sys; t=json.load(open(sys.argv[1])); assert {e['pid'] for e in t['traceEvents'] if e['ph']=='X'} == {0,1,2,3}" \
        "$TMP/ex.json" || die "$f: trace without spans for every rank"
done
grep -q "job done: all 4 ranks ended cleanly" <("$DDPTOP" replay --headless examples/recordings/clean-4rank.rec) \
    || die "clean-4rank.rec does not end cleanly"
"$DDPTOP" replay --headless examples/recordings/shutdown-hang.rec >"$TMP/hang.out"
grep -q "^rank 1: SIGKILL by ddptop" "$TMP/hang.out" || die "shutdown-hang.rec: rank 1 not killed by the ladder: $(tail -6 "$TMP/hang.out")"
grep -q "asked every rank to stop" "$TMP/hang.out" || die "shutdown-hang.rec: the stop request is not shown"
echo "replay headless ok"
