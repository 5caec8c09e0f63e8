# A shape desync, as people write it: all_reduce of [10] on rank 0 and
# [20] on rank 1. Gloo aborts rank 0 inside the call (signal 6) before any
# queued telemetry leaves, so each rank says what it passes as the call
# begins (a beat with the count and dtype): ddptop names the desync live
# ("allreduce #2: rank 0 has 10 float32, rank 1 has 20"), and the recording's
# coll messages carry each completed collective's count and dtype. A dtype
# desync that completes silently (float32 against int32, garbage sums) is
# named from the completed collectives' coll messages alone.
. tests/lib.sh
. tests/lib_py.sh
cat >"$TMP/shape.py" <<'PYEOF'
import sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
r = dist.get_rank()
t = torch.ones(4)
dist.all_reduce(t)
if sys.argv[1] == "size":
    t = torch.ones(10 if r == 0 else 20)
else:
    t = torch.ones(10, dtype=torch.float32 if r == 0 else torch.int32)
dist.all_reduce(t)
dist.destroy_process_group()
PYEOF
py_run -n 2 --headless --timeout 20 --record "$TMP/size.rec" -- "$TMP/shape.py" size >"$TMP/size.out" 2>&1
grep -q 'desync: allreduce #2: rank 0 has 10 float32, rank 1 has 20:' "$TMP/size.out" ||
    { cat "$TMP/size.out"; die "the size desync was not named"; }
"$DDPTOP" export "$TMP/size.rec" --jsonl "$TMP/size.jsonl" || die "export failed"
"$PY" - "$TMP/size.jsonl" <<'PYEOF' || die "the recording does not carry the counts"
import json, sys
msgs = [json.loads(l) for l in open(sys.argv[1])]
colls = {(m["r"], m["seq"]): m for m in msgs if m.get("k") == "coll"}
beats = {(m["r"], m["seq"]): m for m in msgs if m.get("k") == "beat" and m["seq"] >= 0}
for r in (0, 1):
    c = colls.get((r, 1))
    assert c and c["count"] == 4 and c["dtype"] == "float32" and c["bytes"] == 16, (r, c)
    b = beats.get((r, 2))
    assert b and b["count"] == (10, 20)[r] and b["dtype"] == "float32" and b["op"] == "allreduce", (r, b)
assert (0, 2) not in colls, "rank 0 completed the desynced all-reduce?"
print("recording: coll #1 of 4 float32 on both ranks; #2 entered with 10 and 20")
PYEOF
py_run -n 2 --headless --timeout 20 --record "$TMP/dtype.rec" -- "$TMP/shape.py" dtype >"$TMP/dtype.out" 2>&1 ||
    { tail -20 "$TMP/dtype.out"; die "the dtype desync run failed (Gloo completes it)"; }
grep -q 'desync: allreduce #2: rank 0 has 10 float32, rank 1 has 10 int32:' "$TMP/dtype.out" ||
    { tail -20 "$TMP/dtype.out"; die "the dtype desync was not named"; }
"$DDPTOP" export "$TMP/dtype.rec" --jsonl "$TMP/dtype.jsonl" || die "export failed"
"$PY" - "$TMP/dtype.jsonl" <<'PYEOF' || die "the recording does not carry the dtypes"
import json, sys
colls = {(m["r"], m["seq"]): m for m in map(json.loads, open(sys.argv[1])) if m.get("k") == "coll"}
assert colls[(0, 2)]["dtype"] == "float32" and colls[(1, 2)]["dtype"] == "int32", colls
assert colls[(0, 2)]["count"] == colls[(1, 2)]["count"] == 10, colls
PYEOF
echo "ok: a size desync named live though rank 0 aborts inside it; a silent dtype desync named from its colls"
wait_for 10 no_ranks || die "ranks left running"
