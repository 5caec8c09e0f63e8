#!/usr/bin/env bash
# t_export.sh — ddptop export: Chrome trace, JSON lines and CSV from a
# recording, checked by parsing them in Python.
#
# The recording comes from tests/tool_rec (a synthetic 3-rank job written
# through record.c; its values are listed at the top of tests/tools/tool_rec.c).
# The exporter is `ddptop export` once main.c has the subcommand, else
# tool_rec's copy of export_main (the same code).
# Checks: the trace is valid JSON with a process per rank named "rank N",
# phase/compute/comm threads, one span per step with forward/backward/
# optimizer inside it ending at the step's time, one span per bucket
# all-reduce with bytes/algbw/busbw/bucket/seq, the checkpoint, phase spans
# in order, a loss counter per rank (the NaN loss left out); every JSONL
# line parses, one per record, with escaping, U+FFFD, null for NaN, unknown
# kinds and a malformed frame; the CSV's header and rows; a truncated
# recording exports up to the damage with a warning; bad input exits 2 with
# one line.
. tests/lib.sh
TOOL=$BUILD/tests/tool_rec
[ -x "$TOOL" ] || die "$TOOL is not built"
"$PY" -c 'import json, csv' 2>/dev/null || skip "skip: $PY has no json module"

if "$DDPTOP" export --help >/dev/null 2>&1; then EXPORT=("$DDPTOP" export); else EXPORT=("$TOOL" export); fi
echo "exporter: ${EXPORT[*]}"

REC=$TMP/job.rec
out=$("$TOOL" write "$REC" --ranks 3 --steps 10) || die "tool_rec write failed"
NREC=${out#records=}

"${EXPORT[@]}" "$REC" --chrome-trace "$TMP/trace.json" --jsonl "$TMP/job.jsonl" --csv "$TMP/steps.csv" \
    2>"$TMP/err" || die "export exited $?: $(cat "$TMP/err")"
[ -s "$TMP/err" ] && die "export of a complete recording printed: $(cat "$TMP/err")"

"$PY" - "$TMP" "$NREC" <<'PYEOF' || exit 1
import csv, json, math, sys
d, nrec = sys.argv[1], int(sys.argv[2])
RANKS, STEPS, BUCKETS = 3, 10, 2
B, MS = 1700000000000000000, 1000000
fails = []
def check(c, what):
    if not c: fails.append(what)

# ---- Chrome trace ----
tr = json.load(open(d + "/trace.json"))
ev = tr["traceEvents"]
t0 = tr["otherData"]["time0_wall_ns"]
check(tr["otherData"]["complete"] is True, "otherData.complete")
def us(ns): return (ns - t0) / 1000.0
def close(a, b): return abs(a - b) < 0.0015
for e in ev:
    check(e["ph"] in "XMCi", f"unexpected ph {e['ph']}")
    if "ts" in e: check(e["ts"] >= 0, f"negative ts {e}")
    if e["ph"] == "X": check(e["dur"] >= 0, f"negative dur {e}")
for r in range(RANKS):
    meta = {(e["name"], e.get("tid")): e["args"] for e in ev if e["ph"] == "M" and e["pid"] == r}
    check(meta.get(("process_name", None)) == {"name": f"rank {r}"}, f"rank {r} process_name {meta.get(('process_name', None))}")
    names = {meta.get(("thread_name", t), {}).get("name") for t in (1, 2, 3)}
    check(names == {"phase", "compute", "comm"}, f"rank {r} threads {names}")
    X = [e for e in ev if e["ph"] == "X" and e["pid"] == r]
    steps = [e for e in X if e["name"].startswith("step ")]
    check(len(steps) == STEPS, f"rank {r}: {len(steps)} step spans")
    for s in steps:
        n = s["args"]["step"]
        end = B + 1000 * MS + n * 20 * MS + r * MS
        step_ms = 10 + r / 2 + (n % 3) / 4
        check(close(s["ts"] + s["dur"], us(end)) and close(s["dur"], step_ms * 1000),
              f"rank {r} step {n}: ts {s['ts']} dur {s['dur']}")
        check(s["tid"] == 2 and s["cat"] == "compute", f"rank {r} step {n} thread")
        kids = [e for e in X if e["tid"] == 2 and e["name"] in ("forward", "backward", "optimizer")
                and s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"] + 1e-9]
        got = sorted((k["name"], k["ts"], k["dur"]) for k in kids)
        # forward from the step's start, backward after it, the optimizer ending with the step
        want = sorted([("forward", s["ts"], 3000.0), ("backward", round(s["ts"] + 3000, 3), 4000.0),
                       ("optimizer", round(s["ts"] + s["dur"] - 1000, 3), 1000.0)])
        check(got == want, f"rank {r} step {n} children {got} != {want}")
        want_loss = None if (r == 1 and n == 7) else (r + 1) / (n + 1)
        check(s["args"]["loss"] == want_loss, f"rank {r} step {n} loss {s['args']['loss']}")
    ar = [e for e in X if e["tid"] == 3 and e["name"].startswith("allreduce bucket")]
    check(len(ar) == STEPS * BUCKETS, f"rank {r}: {len(ar)} all-reduce spans")
    for a in ar:
        g = a["args"]
        for k in ("bytes", "algbw_GBps", "busbw_GBps", "bucket", "seq", "step", "count", "dtype"):
            check(k in g, f"all-reduce args miss {k}")
        check(g["count"] * 4 == g["bytes"] and g["dtype"] == "float32", f"payload {g}")
        b, n = g["bucket"], g["step"]
        start = B + 1000 * MS + n * 20 * MS + r * MS - 8 * MS + b * 2 * MS
        check(a["name"] == f"allreduce bucket {b}" and g["bytes"] == 65536 * (b + 1), f"bucket {a}")
        check(close(a["ts"], us(start)) and close(a["dur"], 1500), f"bucket timing {a['ts']} {a['dur']}")
    bc = [e for e in X if e["tid"] == 3 and e["name"] == "broadcast"]
    check(len(bc) == 1, f"rank {r}: {len(bc)} broadcasts")
    phases = [e["name"] for e in sorted((e for e in X if e["tid"] == 1), key=lambda e: e["ts"])]
    want = ["init", "rendezvous", "broadcast", "train"] + (["checkpoint", "train"] if r == 0 else []) + \
           ["stopping", "destroying", "destroyed"]
    check(phases == want, f"rank {r} phases {phases}")
    counters = [e for e in ev if e["ph"] == "C" and e["pid"] == r and e["name"] == "loss"]
    check(len(counters) == (STEPS - 1 if r == 1 else STEPS), f"rank {r}: {len(counters)} loss counter points")
    check(all(math.isfinite(c["args"]["loss"]) for c in counters), "finite counter values")
ck = [e for e in ev if e["ph"] == "X" and e["name"].startswith("checkpoint step")]
check(len(ck) == 1 and ck[0]["pid"] == 0 and close(ck[0]["dur"], 12500) and ck[0]["args"]["ok"] is True,
      f"checkpoint spans {ck}")
check(not [e for e in ev if e.get("pid", 0) >= RANKS], "a process beyond the ranks")
evals = [e for e in ev if e["ph"] == "C" and e["name"] == "eval"]
check(len(evals) == 1 and evals[0]["pid"] == 0 and evals[0]["args"] == {"loss": 0.75, "accuracy": 0.5}, f"eval counter {evals}")

# ---- JSON lines ----
lines = open(d + "/job.jsonl", encoding="utf-8").read().splitlines()
check(len(lines) == nrec, f"{len(lines)} JSONL lines for {nrec} records")
objs = []
for i, l in enumerate(lines):
    try:
        objs.append(json.loads(l))
    except ValueError as e:
        check(False, f"JSONL line {i + 1} does not parse: {e}: {l[:120]}")
for o in objs:
    check(isinstance(o.get("_t_ns"), int) and isinstance(o.get("_wall_ns"), int) and "_src" in o, f"arrival keys in {o}")
check(all(objs[i]["_t_ns"] <= objs[i + 1]["_t_ns"] for i in range(len(objs) - 1)), "JSONL in arrival order")
st = [o for o in objs if o.get("k") == "step"]
check(len(st) == RANKS * STEPS, f"{len(st)} step objects")
keys = ["_src", "_rec", "_t_ns", "_wall_ns", "v", "k", "r", "t", "epoch", "step", "loss", "lr", "samples", "step_ms",
        "fwd_ms", "bwd_ms", "opt_ms", "comm_ms", "exposed_ms", "drops", "dev_mem", "dev_mem_total"]
check(all(list(o) == keys for o in st), f"step keys {list(st[0]) if st else None}")
nan = [o for o in st if o["r"] == 1 and o["step"] == 7]
check(len(nan) == 1 and nan[0]["loss"] is None, f"NaN loss as null: {nan}")
check(all(isinstance(o["loss"], float) for o in st if o["loss"] is not None), "losses are floats")
logs = [o["text"] for o in objs if o.get("k") == "log"]
check("stopping after step 10: \"done\"\ttab \\ \u2713" in logs, f"escaped log text: {logs}")
check("bad \ufffd byte \"q\"" in logs, f"ill-formed UTF-8 as U+FFFD: {logs}")
g = [o for o in objs if o.get("k") == "gossip"]
check(len(g) == 1 and g[0]["payload"] == [-3, 2.0, None, {"7": True}] and g[0]["f"] == 1.5, f"unknown kind {g}")
bad = [o for o in objs if "_error" in o]
check(len(bad) == 1 and "0xc1" in bad[0]["_error"] and bad[0]["_bytes"] == 8, f"malformed frame {bad}")
sets = [o for o in objs if o.get("k") == "set"]
check(len(sets) == 1 and sets[0]["val"] == "dead0001" and sets[0]["_src"] == "ctl", f"store set {sets}")
check([o["_src"] for o in objs if o.get("k") == "cmd"] == ["sent"], "sent cmd")
ex = [o for o in objs if o["_src"] == "exit"]
check(len(ex) == RANKS and all(o["status"] == "exit 0" for o in ex), f"exit records {ex}")
check(len([o for o in objs if o["_src"] == "start"]) == RANKS, "start records")
check([o["text"] for o in objs if o["_src"] == "note"] == ["checkpoint requested"], "note record")

# ---- CSV ----
rows = list(csv.reader(open(d + "/steps.csv")))
check(rows and rows[0] == ["rank", "epoch", "step", "loss", "step_ms", "comm_ms"], f"CSV header {rows[:1]}")
body = rows[1:]
check(len(body) == RANKS * STEPS, f"{len(body)} CSV rows")
check([int(x[0]) for x in body] == sorted(int(x[0]) for x in body), "CSV rows grouped by rank")
for x in body:
    r, ep, n = int(x[0]), int(x[1]), int(x[2])
    loss = float(x[3])
    want = (r + 1) / (n + 1)
    if r == 1 and n == 7:
        check(math.isnan(loss), "CSV NaN loss")
    else:
        check(loss == want, f"CSV rank {r} step {n} loss {loss} != {want}")
    check(ep == (n - 1) // 5 and float(x[4]) == 10 + r / 2 + (n % 3) / 4 and float(x[5]) == 2.5, f"CSV row {x}")

if fails:
    for f in fails[:30]: print("FAIL:", f)
    sys.exit(1)
print(f"trace: {len(ev)} events; jsonl: {len(objs)} lines; csv: {len(body)} rows")
PYEOF

# stdout as an output, alone.
"${EXPORT[@]}" "$REC" --csv - >"$TMP/stdout.csv" || die "--csv - exited $?"
cmp -s "$TMP/stdout.csv" "$TMP/steps.csv" || die "--csv - differs from --csv FILE"

# A recording cut short (a crash): exported up to the damage, one warning line.
"$TOOL" write "$TMP/cut.rec" --ranks 3 --steps 10 --cut-tail 100 >/dev/null || die "tool_rec write --cut-tail"
"${EXPORT[@]}" "$TMP/cut.rec" --chrome-trace "$TMP/cut.json" --jsonl "$TMP/cut.jsonl" 2>"$TMP/err" \
    || die "export of a truncated recording exited $?: $(cat "$TMP/err")"
[ "$(wc -l <"$TMP/err")" = 1 ] && grep -q "warning: .*cut.rec: recording ends early at byte [0-9]* (record [0-9]*, t=[0-9.]* s): truncated" "$TMP/err" \
    || die "truncated recording warning: $(cat "$TMP/err")"
"$PY" -c '
import json, sys
t = json.load(open(sys.argv[1]))
assert t["otherData"]["complete"] is False and "ends early" in t["otherData"]["ends_early"]
n = sum(1 for l in open(sys.argv[2]) if json.loads(l))
# every record before the damage ("record K" is the first bad one), and some lost
assert n == int(sys.argv[4]) - 1 and 0 < n < int(sys.argv[3]), (n, sys.argv[3:])
' "$TMP/cut.json" "$TMP/cut.jsonl" "$NREC" "$(sed 's/.*(record \([0-9]*\),.*/\1/' "$TMP/err")" \
    || die "truncated recording: trace or jsonl wrong"

# Bad input: one line on stderr, exit 2, nothing written.
bad() {
    local want=$1; shift
    "${EXPORT[@]}" "$@" >"$TMP/o" 2>"$TMP/e"; local rc=$?
    [ $rc = 2 ] || die "export $*: exit $rc, want 2 ($(cat "$TMP/e"))"
    [ "$(wc -l <"$TMP/e")" = 1 ] || die "export $*: stderr is not one line: $(cat "$TMP/e")"
    grep -q -- "$want" "$TMP/e" || die "export $*: stderr lacks \"$want\": $(cat "$TMP/e")"
}
bad "which recording" --csv "$TMP/x.csv"
bad "nothing to do" "$REC"
bad "unknown option" "$REC" --svg "$TMP/x.svg"
bad "missing output" "$REC" --csv
bad "No such file" "$TMP/none.rec" --csv "$TMP/x.csv"
bad "overwrite the recording" "$REC" --jsonl "$REC"
bad "only one output can be -" "$REC" --csv - --jsonl -
printf 'not a recording at all' >"$TMP/junk.rec"
bad "not a ddptop recording (bad magic)" "$TMP/junk.rec" --csv "$TMP/x.csv"
bad "No such file or directory" "$REC" --csv "$TMP/no/dir/x.csv"
# A write that fails (disk full): exit 1, one line, the device left alone.
if [ -w /dev/full ]; then
    "${EXPORT[@]}" "$REC" --jsonl /dev/full 2>"$TMP/e"; rc=$?
    [ $rc = 1 ] && [ "$(wc -l <"$TMP/e")" = 1 ] && grep -q "No space left" "$TMP/e" \
        || die "export to /dev/full: exit $rc: $(cat "$TMP/e")"
    [ -c /dev/full ] || die "/dev/full is gone"
fi
[ ! -e "$TMP/x.csv" ] || die "a refused export left $TMP/x.csv"
# Two spellings of one output: refused, not written over each other.
bad "same output file twice" "$REC" --csv "$TMP/x.csv" --jsonl "$TMP/./x.csv"
( cd "$TMP" && "${EXPORT[@]}" "$REC" --csv x.csv --jsonl "$TMP/x.csv" >/dev/null 2>&1 ); [ $? = 2 ] || die "x.csv and \$TMP/x.csv: not refused"
[ ! -e "$TMP/x.csv" ] || die "a refused export left $TMP/x.csv"
# A file already there keeps what it held when the export fails, here on a
# later output that cannot be opened; when it succeeds it is replaced whole,
# with its mode, and nothing is left beside it.
printf 'precious\n' >"$TMP/old.jsonl"; chmod 640 "$TMP/old.jsonl"
bad "No such file or directory" "$REC" --jsonl "$TMP/old.jsonl" --csv "$TMP/no/dir/x.csv"
[ "$(cat "$TMP/old.jsonl")" = precious ] || die "a failed export damaged the file it would have replaced: $(head -c 80 "$TMP/old.jsonl")"
"${EXPORT[@]}" "$REC" --jsonl "$TMP/old.jsonl" 2>"$TMP/e" || die "export over a file: exit $?: $(cat "$TMP/e")"
cmp -s "$TMP/old.jsonl" "$TMP/job.jsonl" || die "export over a file: not the export"
[ "$(stat -c %a "$TMP/old.jsonl")" = 640 ] || die "export over a file: mode $(stat -c %a "$TMP/old.jsonl")"
ls -A "$TMP" | grep -q '^\.old\.jsonl\.' && die "a temporary left beside the output: $(ls -A "$TMP")"
cmp -s "$REC" "$REC" && [ -s "$REC" ] || die "the recording was damaged"
echo "export: trace, jsonl, csv, truncated and bad input all as expected"
