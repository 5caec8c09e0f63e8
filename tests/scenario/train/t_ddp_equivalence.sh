# The property DDP exists for: 2 ranks x batch 32 end with the same weights
# as 1 rank x batch 64 (same seed, same data, 20 steps, SGD with momentum and
# weight decay), within 1e-4 relative.
. tests/lib.sh
common="--dataset synthetic --synthetic-size 2048 --model mlp:32,64,64,5 --steps 20 --seed 7 --lr 0.05 --momentum 0.9 --weight-decay 0.001"
"$DDPTOP" run -n 2 --headless -- $common --batch-size 32 --ckpt-dir "$TMP/w2" >"$TMP/o2" 2>&1 || { cat "$TMP/o2"; die "2-rank run failed"; }
"$DDPTOP" run -n 1 --headless -- $common --batch-size 64 --ckpt-dir "$TMP/w1" >"$TMP/o1" 2>&1 || { cat "$TMP/o1"; die "1-rank run failed"; }
"$DDPTOP" run -n 1 --headless -- $common --batch-size 64 --steps 1 --lr 0 --ckpt-dir "$TMP/w0" >"$TMP/o0" 2>&1 || { cat "$TMP/o0"; die "init run failed"; }
"$PY" - "$TMP" <<'PYEOF' || die "weights differ"
import sys, numpy as np
from safetensors.numpy import load_file
d = sys.argv[1]
a = load_file(f"{d}/w2/latest/model.safetensors")
b = load_file(f"{d}/w1/latest/model.safetensors")
init = load_file(f"{d}/w0/latest/model.safetensors")
worst = 0.0
moved = 0.0
for k in a:
    rel = np.max(np.abs(a[k] - b[k])) / max(np.max(np.abs(b[k])), 1e-12)
    worst = max(worst, rel)
    moved = max(moved, np.max(np.abs(b[k] - init[k])) / max(np.max(np.abs(init[k])), 1e-12))
print(f"max relative difference 2x32 vs 1x64: {worst:.3g}; training moved weights by {moved:.3g}")
assert moved > 1e-2, "training did not change the weights: the comparison would prove nothing"
assert worst < 1e-4, worst
PYEOF
