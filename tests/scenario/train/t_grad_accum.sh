# --grad-accum K is K micro-batches of --batch-size per optimizer step,
# gradients averaged: 2 ranks x 16 x 4 micro-batches end with the weights of
# 2 ranks x 64 (same seed and data, 24 steps of SGD with momentum) within
# 1e-5 relative, and far from 2 ranks x 16 without accumulation.
. tests/lib.sh
common="--dataset synthetic --synthetic-size 4096 --model mlp:32,64,64,5 --steps 24 --seed 11 --lr 0.05 --momentum 0.9 --eval-every 0 --epochs 10"
"$DDPTOP" run -n 2 --headless -- $common --batch-size 16 --grad-accum 4 --ckpt-dir "$TMP/acc" >"$TMP/o1" 2>&1 || { cat "$TMP/o1"; die "accumulating run failed"; }
"$DDPTOP" run -n 2 --headless -- $common --batch-size 64 --ckpt-dir "$TMP/big" >"$TMP/o2" 2>&1 || { cat "$TMP/o2"; die "large-batch run failed"; }
"$DDPTOP" run -n 2 --headless -- $common --batch-size 16 --ckpt-dir "$TMP/small" >"$TMP/o3" 2>&1 || { cat "$TMP/o3"; die "small-batch run failed"; }
"$PY" - "$TMP" <<'PYEOF' || die "accumulated gradients do not match the large batch"
import sys, numpy as np
from safetensors.numpy import load_file
d = sys.argv[1]
a, b, c = (load_file(f"{d}/{x}/latest/model.safetensors") for x in ("acc", "big", "small"))
rel = lambda x, y: max(np.max(np.abs(x[k] - y[k])) / max(np.max(np.abs(y[k])), 1e-12) for k in x)
print(f"accumulate 4x16 vs 64: {rel(a, b):.3g}; 16 without accumulation vs 64: {rel(c, b):.3g}")
assert rel(c, b) > 1e-2, "the batch size made no difference: the test would prove nothing"
assert rel(a, b) < 1e-5, rel(a, b)
PYEOF
