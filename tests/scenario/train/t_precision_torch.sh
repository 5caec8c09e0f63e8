# --precision against PyTorch (issue 18's proof on the CPU): MLP
# 784-256-256-10 on Fashion-MNIST, 20 steps from the same weights and
# batches: ddptop bf16 vs torch.autocast("cpu", dtype=torch.bfloat16), tf32
# vs a torch emulation with TF32-rounded GEMM inputs, fp32 vs torch FP32;
# the loss of every step and the final weights within the tolerances of
# tests/tools/prec_torch.py (docs/TRAINING.md, "Precision"), and bf16/tf32
# clearly apart from FP32, so a reduced mode that computed in FP32 fails.
. tests/lib.sh
"$PY" -c 'import torch, safetensors' 2>/dev/null || skip "no torch and safetensors for $PY"
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || skip "no Fashion-MNIST (dataset-fashion-mnist)"
"$PY" tests/tools/prec_torch.py --ddptop "$DDPTOP" --check >"$TMP/out" 2>&1 || { cat "$TMP/out"; die "ddptop's precisions differ from torch's"; }
cat "$TMP/out"
no_workers || die "workers left running"
