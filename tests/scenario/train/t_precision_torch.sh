# --precision against PyTorch (issue 18's proof on the CPU, issue 28's on
# any CPU): MLP 784-256-256-10 on Fashion-MNIST from the same weights and
# batches, ddptop bf16 vs torch.autocast("cpu", dtype=torch.bfloat16), tf32
# vs a torch emulation with TF32-rounded GEMM inputs, fp32 vs torch FP32.
# Every bound comes from torch in the same run (tests/tools/prec_torch.py;
# docs/TRAINING.md, "Precision"): step 1 term by term (every tensor's
# update) within 4x the spread between torch's reference and its other
# implementations of the same rules (exact sums, split sums), or one rounding
# of the mode, and (bf16, tf32) in at most 10% of the elements (or 4x the
# spread's share) and within a fifth of torch's own distance from FP32 in L2;
# the 20-step losses and final weights within 4x torch's spread over the
# same steps; and bf16/tf32 at least 0.3x torch's distance from FP32 away
# from FP32, so a reduced mode computed in FP32 (or rounded another way, or
# missing a rounding) fails on any CPU and kernel.
. tests/lib.sh
"$PY" -c 'import torch, safetensors' 2>/dev/null || skip "no torch and safetensors for $PY"
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || skip "no Fashion-MNIST (dataset-fashion-mnist)"
"$PY" tests/tools/prec_torch.py --ddptop "$DDPTOP" --check >"$TMP/out" 2>&1 || { cat "$TMP/out"; die "ddptop's precisions differ from torch's"; }
cat "$TMP/out"
no_workers || die "workers left running"
