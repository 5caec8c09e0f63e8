#!/usr/bin/env bash
# tests/gpu/bench.sh — `make bench-gpu`: ddptop's GPU step against PyTorch
# eager on the same GPU, same MLP, batch and optimizer, world size 1.
#
#   bash tests/gpu/bench.sh BENCH_GPU_BINARY [--model mlp:...] [--batch B]
#        [--steps S] [--warmup W] [--optimizer sgd|adamw]
#
# Env: TORCH_PY (python3 with PyTorch; default python3). Prints a table and
# the raw JSON lines (for docs/BENCHMARKS.md). Exit 0 also when there is no
# GPU (it says SKIP).
set -u
bin=${1:?usage: bench.sh BENCH_GPU_BINARY [options]}
shift
TORCH_PY=${TORCH_PY:-python3}
here=$(cd "$(dirname "$0")" && pwd)
opts=("--model" "mlp:784,4096,4096,10" "--batch" "512" "--steps" "200" "--warmup" "20" "$@")
out=$(mktemp /tmp/bench-gpu.XXXXXX)
trap 'rm -f "$out"' EXIT

"$bin" "${opts[@]}" --json >"$out" 2>&1 || { echo "bench-gpu: $bin failed:"; cat "$out"; exit 1; }
if grep -q '^SKIP' "$out"; then cat "$out"; exit 0; fi
PYTHONUNBUFFERED=1 "$TORCH_PY" "$here/bench_torch.py" "${opts[@]}" >>"$out" 2>"$out.err" ||
    { echo "bench-gpu: bench_torch.py failed:"; tail -20 "$out.err"; }
rm -f "$out.err"

"$TORCH_PY" - "$out" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{"):
        r = json.loads(line)
        rows[r["who"]] = r
d = rows.get("ddptop")
e, p = rows.get("pytorch-eager"), rows.get("pytorch-ddp")
head = d or p or e
if not head:
    print("bench-gpu: no results"); sys.exit(1)
gpu = (p or e or {}).get("gpu", "?")
print("bench-gpu: MLP %s, batch %d, %s, world size 1, %d steps after warm-up, %s" % (
    head["model"].split(":", 1)[1].replace(",", "-"), head["batch"], head["optimizer"],
    head["steps"], gpu))
print("%-34s %9s %9s %9s %13s %9s" % ("", "steps/s", "step ms", "compute", "exposed comm",
                                     "overhead"))
def line(name, r, compute, exposed):
    over = r["step_ms"] - compute - exposed
    print("%-34s %9.1f %9.3f %9.3f %13.3f %9.3f" % (name, r["steps_per_s"], r["step_ms"],
                                                   compute, exposed, over))
if d:
    line("ddptop (cuda_mlp + NCCL, %d bkt)" % d["buckets"], d, d["compute_ms"],
         d["exposed_comm_ms"])
if p:
    x = p.get("exposed_comm_ms", 0.0)
    line("PyTorch eager + DDP (NCCL)", p, p["compute_ms"] - x, x)
if e:
    line("PyTorch eager, no DDP", e, e["compute_ms"], 0.0)
if d and p:
    print("ddptop / PyTorch DDP: %.2fx steps/s%s" % (d["steps_per_s"] / p["steps_per_s"],
          "  (target: faster)" if d["steps_per_s"] <= p["steps_per_s"] else ""))
print("raw:")
for r in rows.values():
    print("  " + json.dumps(r))
PY
