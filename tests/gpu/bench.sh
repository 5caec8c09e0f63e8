#!/usr/bin/env bash
# tests/gpu/bench.sh — `make bench-gpu`: ddptop's GPU step in every
# precision against PyTorch on the same GPU, in one run: same MLP, batch
# and optimizer, world size 1, NCCL.
#
#   bash tests/gpu/bench.sh BENCH_GPU_BINARY [--model mlp:...] [--batch B]
#        [--steps S] [--warmup W] [--optimizer sgd|adamw]
#
# ddptop: fp32, fp32 without fusion, tf32, bf16 (fused; graph off and on);
# PyTorch: eager fp32 (plain and DDP), eager DDP under autocast(bf16), and
# torch.compile'd DDP under autocast(bf16); the floor: the step's own
# products in bf16 through cuBLASLt. The table and issue 18's targets come
# from bench_table.py. Env: TORCH_PY (python3 with PyTorch; default
# python3). Exit 0 also when there is no GPU (it says SKIP).
set -u
bin=${1:?usage: bench.sh BENCH_GPU_BINARY [options]}
shift
TORCH_PY=${TORCH_PY:-python3}
here=$(cd "$(dirname "$0")" && pwd)
opts=("--model" "mlp:784,4096,4096,10" "--batch" "512" "--steps" "200" "--warmup" "20" "$@")
out=$(mktemp /tmp/bench-gpu.XXXXXX)
trap 'rm -f "$out" "$out.err"' EXIT

"$bin" "${opts[@]}" --json >"$out" 2>&1 || { echo "bench-gpu: $bin failed:"; cat "$out"; exit 1; }
if grep -q '^SKIP' "$out"; then cat "$out"; exit 0; fi
for mode in "--fuse off" "--precision tf32" "--precision bf16" "--precision bf16 --graph" "--floor"; do
    # shellcheck disable=SC2086 # the mode is words
    "$bin" "${opts[@]}" $mode --json >>"$out" 2>"$out.err" ||
        { echo "bench-gpu: $bin $mode failed:"; cat "$out.err"; }
done
PYTHONUNBUFFERED=1 "$TORCH_PY" "$here/bench_torch.py" "${opts[@]}" >>"$out" 2>"$out.err" ||
    { echo "bench-gpu: bench_torch.py failed:"; tail -20 "$out.err"; }
"$TORCH_PY" "$here/bench_table.py" "$out"
