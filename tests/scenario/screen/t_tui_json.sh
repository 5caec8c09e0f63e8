# ddptop run --headless --json: one JSON object a line for scripts and CI,
# from a scripted stream: events (a log line, a checkpoint), the eval with
# its accuracy, progress lines, the final summary.
. tests/lib.sh
case $BUILD in /*) FEED=$BUILD/tests/tool_feed;; *) FEED=$PWD/$BUILD/tests/tool_feed;; esac
[ -x "$FEED" ] || skip "no $FEED (run make all)"
cat >"$TMP/j.feed" <<'FEED'
set beat=0.5
0    *  hello max_steps=60
0.1  *  phase phase=train
0.1  *  train from=1 to=60 rate=40
0.5  1  log level=warn text="rank 1 \"quoted\" warning"
1.0  0  ckpt step=40 path=/tmp/ck/step-40 bytes=2500000 ms=41
1.2  *  eval epoch=0 step=48 accuracy=0.8125 loss=0.5 total=1000
2.2  *  exit
FEED
DDPTOP_WORKER=$FEED "$DDPTOP" run -n 2 --headless --json -- --script "$TMP/j.feed" >"$TMP/out.jsonl" 2>"$TMP/err"
rc=$?
cat "$TMP/out.jsonl" "$TMP/err"
[ $rc -eq 0 ] || die "ddptop exited $rc"
"$PY" - "$TMP/out.jsonl" <<'PYEOF' || die "JSON lines wrong"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]      # every line one object
kinds = {r["k"] for r in rows}
assert {"event", "progress", "eval", "summary"} <= kinds, kinds
ev = [r for r in rows if r["k"] == "event"]
assert any(r["r"] == 1 and r["level"] == "warn" and r["text"] == 'rank 1 "quoted" warning' for r in ev), ev
assert any("checkpoint step 40 written by rank 0 in 41 ms (2.5 MB) -> /tmp/ck/step-40" in r["text"] for r in ev)
e = [r for r in rows if r["k"] == "eval"]
assert len(e) == 1 and e[0]["accuracy"] == 0.8125 and e[0]["correct"] == 813 and e[0]["step"] == 48, e
s = rows[-1]
assert s["k"] == "summary" and s["ok"] is True and [x["state"] for x in s["ranks"]] == ["exited", "exited"], s
print("json ok:", len(rows), "lines")
PYEOF
