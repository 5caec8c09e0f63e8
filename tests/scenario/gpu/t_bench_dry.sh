# make bench-gpu's parts that run without a GPU: bench_torch.py's four
# PyTorch runs as a CPU dry run (eager, DDP, DDP under autocast(bf16),
# torch.compile'd DDP: a skip on torch 1.x), bench_table.py's table and
# issue 18's targets from those lines and canned ddptop/floor lines, and
# bench.sh / bench_gpu without a GPU (SKIP, exit 0; bad options exit 2).
. tests/lib.sh
"$PY" -c 'import torch' 2>/dev/null || skip "SKIP: $PY has no torch"
BENCH=$BUILD/tests/gpu/bench_gpu
[ -x "$BENCH" ] || skip "SKIP: $BENCH not built"
"$PY" tests/gpu/bench_torch.py --device cpu --model mlp:20,16,3 --batch 8 --steps 3 --warmup 1 \
    >"$TMP/t.jsonl" 2>"$TMP/t.err" || { cat "$TMP/t.err"; die "bench_torch.py --device cpu failed"; }
"$PY" - "$TMP/t.jsonl" <<'PYEOF' || die "bench_torch.py's runs"
import json, sys
rows = {r["who"]: r for r in map(json.loads, open(sys.argv[1]))}
for w in ("pytorch-eager", "pytorch-ddp", "pytorch-ddp-autocast", "pytorch-ddp-compile"):
    assert w in rows, (w, sorted(rows))
a = rows["pytorch-ddp-autocast"]
assert a["precision"] == "autocast-bf16" and a["steps_per_s"] > 0 and a["final_loss"] > 0, a
c = rows["pytorch-ddp-compile"]
assert "skip" in c or c["steps_per_s"] > 0, c
print("runs:", ", ".join(sorted(rows)))
PYEOF
# canned ddptop lines: bf16 with the graph 3x autocast's steps/s, 1.2x the floor's time
"$PY" - "$TMP/t.jsonl" >"$TMP/all.jsonl" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
a = next(r for r in rows if r["who"] == "pytorch-ddp-autocast")
def dd(who, sps):
    ms = 1e3 / sps
    return {"who": who, "model": a["model"], "batch": a["batch"], "steps": 3, "optimizer": "sgd",
            "steps_per_s": sps, "step_ms": ms, "compute_ms": ms * 0.9, "exposed_comm_ms": 0.0}
sps = a["steps_per_s"] * 3
for r in rows + [dd("ddptop-fp32", sps / 3), dd("ddptop-bf16", sps / 2), dd("ddptop-bf16-graph", sps),
                 {"who": "floor", "model": a["model"], "batch": a["batch"], "steps": 3,
                  "floor_ms": 1e3 / sps / 1.2, "bf16_tflops": 1.0}]:
    print(json.dumps(r))
PYEOF
"$PY" tests/gpu/bench_table.py "$TMP/all.jsonl" >"$TMP/table.out" || { cat "$TMP/table.out"; die "bench_table.py"; }
cat "$TMP/table.out"
grep -q "targets (ddptop bf16: ddptop bf16 (fused, graph))" "$TMP/table.out" || die "the bf16 figure is not the fastest row"
grep -q ">= 2x PyTorch eager DDP autocast(bf16) *target met *3.00x" "$TMP/table.out" || die "the 2x target line"
grep -q "within 1.5x of the floor *target met *1.20x the floor" "$TMP/table.out" || die "the floor target line"
grep -Eq "faster than torch.compile DDP *(not measured|target)" "$TMP/table.out" || die "the torch.compile target line"
grep -q "PyTorch eager DDP autocast(bf16)" "$TMP/table.out" || die "no autocast row"
# without a GPU: SKIP and exit 0; a bad option: exit 2
out=$(TORCH_PY=$PY bash tests/gpu/bench.sh "$BENCH" --steps 2) || die "bench.sh without a GPU: exit $?"
case $out in SKIP*) ;; *) die "bench.sh without a GPU said: $out";; esac
"$BENCH" --precision fp16 >/dev/null 2>&1; [ $? = 2 ] || die "bench_gpu --precision fp16 not refused with exit 2"
echo "PASS: bench_torch.py dry run (4 runs), bench_table.py's targets, bench.sh/bench_gpu without a GPU"
