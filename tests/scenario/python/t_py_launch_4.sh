# The lesson script (examples/ddp_basics.py) on 4 ranks, headless --json,
# launched as a user would: `ddptop run -n 4 SCRIPT ARGS`. Every message
# kind arrives from every rank, each step's loss ddptop received is the one
# the script printed, every rank ends clean and none is left running.
. tests/lib.sh
"$PY" -c 'import torch' 2>/dev/null || skip "no torch for $PY"
out=$TMP/out.jsonl
timeout 280 "$DDPTOP" run -n 4 --python "$PY" --headless --json --record "$TMP/rec" --log-dir "$TMP/logs" \
    examples/ddp_basics.py --data synthetic --limit 1024 --epochs 2 --out "$TMP/model.pt" >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$out" "$TMP"/logs/*; die "ddptop run -n 4 exited $rc"; }
grep -q '"verdict":"job done: all 4 ranks ended cleanly"' "$out" || { cat "$out"; die "no clean verdict"; }
"$DDPTOP" export "$TMP/rec" --jsonl "$TMP/rec.jsonl" || die "export failed"
"$PY" - "$TMP" <<'PYEOF' || die "what ddptop received is not what the script did"
import json, re, sys
tmp = sys.argv[1]
msgs = [json.loads(l) for l in open(f"{tmp}/rec.jsonl")]
kinds = {"hello", "phase", "step", "coll", "shard", "log", "beat", "bye"}
for r in range(4):
    mine = [m for m in msgs if m.get("r") == r]
    assert kinds <= {m.get("k") for m in mine}, (r, kinds - {m.get("k") for m in mine})
    printed = re.findall(r"^rank %d epoch (\d+) step (\d+) loss (\S+)$" % r, open(f"{tmp}/logs/rank-{r}.log").read(), re.M)
    want = [(int(e), int(s), float(l)) for e, s, l in printed]
    got = [(m["epoch"], m["step"], m["loss"]) for m in mine if m.get("k") == "step"]
    assert got == want and len(got) == 8, (r, got[:3], want[:3], len(got))
    assert [m["status"] for m in mine if m.get("k") == "bye"] == [0], r
    assert [m["world"] for m in mine if m.get("k") == "hello"] == [4], r
ck = [m for m in msgs if m.get("k") == "ckpt"]
assert len(ck) == 1 and ck[0]["r"] == 0 and ck[0]["ok"] and ck[0]["path"].endswith("model.pt"), ck
print("PASS: 4 ranks: kinds, losses, byes")
PYEOF
wait_for 5 no_workers || die "workers left running"
echo "PASS: ddptop run -n 4 of the lesson script"
