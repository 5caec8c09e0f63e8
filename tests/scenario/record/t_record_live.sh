#!/usr/bin/env bash
# t_record_live.sh — `ddptop run --record FILE --publish ENDPOINT` on a live
# headless job: examples/subscriber.py receives every rank's steps and byes;
# the recording exports to a CSV whose final losses match the job's summary,
# a trace with a step span per step per rank, one JSON line per recorded
# message; ddptop killed with SIGKILL leaves a recording that reads up to
# the last second and says it ends early; bad --record/--publish values are
# one line.
. tests/lib.sh
"$DDPTOP" --help 2>/dev/null | grep -q -- '--record' || skip "skip: this ddptop has no --record yet"
"$PY" -c 'import zmq, msgpack, json, csv' 2>/dev/null || skip "skip: $PY cannot import zmq and msgpack"
JOB=(--dataset synthetic --model mlp:20,16,3 --batch-size 16)

# --- a clean job, recorded and published ---
timeout 90 "$PY" examples/subscriber.py "ipc://$TMP/pub" --timeout 60 >"$TMP/sub.out" 2>&1 &
sub=$!
CLEANUPS+=("kill $sub")
wait_for 10 grep -q listening "$TMP/sub.out" || die "subscriber did not start"
timeout 120 "$DDPTOP" run -n 2 --headless --record "$TMP/job.rec" --publish "ipc://$TMP/pub" -- "${JOB[@]}" --steps 40 \
    >"$TMP/run.out" 2>&1 || die "job failed: $(tail -5 "$TMP/run.out")"
wait $sub || die "subscriber exited $?: $(tail -5 "$TMP/sub.out")"
for r in 0 1; do
    grep -q "^rank $r  epoch [0-9]*  step 40  loss " "$TMP/sub.out" || die "subscriber missed rank $r step 40: $(tail "$TMP/sub.out")"
    grep -q "^rank $r bye (status 0) after step 40" "$TMP/sub.out" || die "subscriber missed rank $r bye"
done
tail -1 "$TMP/sub.out" | grep -q "all 2 ranks said bye" || die "subscriber did not finish on the byes"
nrec=$(sed -n 's/.*recorded \([0-9]*\) records.*/\1/p' "$TMP/run.out")
[ -n "$nrec" ] || die "no 'recorded N records' line: $(tail -3 "$TMP/run.out")"

"$DDPTOP" export "$TMP/job.rec" --chrome-trace "$TMP/t.json" --jsonl "$TMP/j.jsonl" --csv "$TMP/s.csv" 2>"$TMP/err" \
    || die "export exited $?: $(cat "$TMP/err")"
[ -s "$TMP/err" ] && die "export warned about a clean recording: $(cat "$TMP/err")"
"$PY" - "$TMP" "$nrec" <<'PYEOF' || exit 1
import csv, json, re, sys
d, nrec = sys.argv[1], int(sys.argv[2])
lines = [json.loads(l) for l in open(d + "/j.jsonl")]
# every record (a burst's messages share theirs), ddptop's own (start, exit, sent cmds) included
assert len({o["_rec"] for o in lines}) == nrec, (len({o["_rec"] for o in lines}), nrec)
# the workers sent bursts: several messages a record
assert sum(o["_src"] == "tel" for o in lines) > len({o["_rec"] for o in lines if o["_src"] == "tel"}), "no bursts"

assert sorted(o["r"] for o in lines if o["_src"] == "exit") == [0, 1]
rows = list(csv.DictReader(open(d + "/s.csv")))
for r in (0, 1):
    mine = [x for x in rows if x["rank"] == str(r)]
    assert [int(x["step"]) for x in mine] == list(range(1, 41)), f"rank {r} csv steps"
    summary = open(d + "/run.out").read()
    m = re.search(rf"rank {r}: exit 0, step 40, loss ([0-9.]+)", summary)
    assert m and abs(float(mine[-1]["loss"]) - float(m.group(1))) < 1e-4, (mine[-1], m and m.group(0))
t = json.load(open(d + "/t.json"))
for r in (0, 1):
    steps = [e for e in t["traceEvents"] if e["ph"] == "X" and e["pid"] == r and e["name"].startswith("step ")]
    assert len(steps) == 40, f"rank {r}: {len(steps)} step spans"
    assert any(e["ph"] == "X" and e["pid"] == r and e["name"].startswith("allreduce") for e in t["traceEvents"])
print("live: subscriber, csv, trace and jsonl agree with the job")
PYEOF

# --- ddptop killed: the recording reads up to the last second ---
"$DDPTOP" run -n 2 --headless --record "$TMP/crash.rec" -- "${JOB[@]}" --epochs 100000 --steps 100000000 >"$TMP/crash.out" 2>&1 &
dp=$!
CLEANUPS+=("kill -9 $dp")
wait_for 30 grep -q "step [1-9]" "$TMP/crash.out" || die "crash job did not start training: $(tail -3 "$TMP/crash.out")"
sleep 2
t_kill=$(date +%s%N)
kill -9 $dp
wait $dp 2>/dev/null
wait_for 10 no_workers || die "workers outlived a killed ddptop"
"$DDPTOP" export "$TMP/crash.rec" --jsonl "$TMP/c.jsonl" 2>"$TMP/err" || die "export of a crashed recording exited $?"
grep -q "recording ends early at byte [0-9]* (record [0-9]*, t=[0-9.]* s): truncated" "$TMP/err" \
    || die "no 'ends early' warning: $(cat "$TMP/err")"
"$PY" - "$TMP/c.jsonl" "$t_kill" <<'PYEOF' || exit 1
import json, sys
objs = [json.loads(l) for l in open(sys.argv[1])]
last_wall = max(o["_wall_ns"] for o in objs)
lost = (int(sys.argv[2]) - last_wall) / 1e9
assert sum(o.get("k") == "step" for o in objs) > 0 and lost < 1.0, f"lost {lost:.2f} s of messages"
print(f"crash: {len(objs)} records kept, the last {lost:.2f} s before the kill lost")
PYEOF

# --- bad values: one line, before anything is launched ---
"$DDPTOP" run --headless --publish tcp://0.0.0.0:5555 -- "${JOB[@]}" --steps 1 >"$TMP/o" 2>"$TMP/e"; rc=$?
[ $rc = 2 ] && [ "$(wc -l <"$TMP/e")" = 1 ] && grep -q CURVE "$TMP/e" || die "--publish 0.0.0.0: exit $rc $(cat "$TMP/e")"
"$DDPTOP" run --headless --record "$TMP/no/dir/x.rec" -- "${JOB[@]}" --steps 1 >"$TMP/o" 2>"$TMP/e"; rc=$?
[ $rc != 0 ] && grep -q "no/dir/x.rec: No such file" "$TMP/e" || die "--record in a missing dir: exit $rc $(cat "$TMP/e")"
echo "record/publish live: ok"
