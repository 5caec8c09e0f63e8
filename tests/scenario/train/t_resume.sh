# Resume is exact: a run stopped at step S and resumed (same world size,
# same --steps) ends with the same weights and optimizer state, bit for bit,
# as the run that never stopped — mid-epoch, with gradient accumulation, the
# cosine schedule and AdamW; and with SGD momentum from a run that stopped.
. tests/lib.sh
common="--dataset synthetic --synthetic-size 1010 --model mlp:20,32,32,4 --batch-size 16 --seed 3 --eval-every 1 --epochs 100"
run() { # name args...
    local name=$1; shift
    "$DDPTOP" run -n 2 --headless -- $common --ckpt-dir "$TMP/$name" "$@" >"$TMP/$name.out" 2>&1 \
        || { cat "$TMP/$name.out"; die "run $name failed"; }
}
# 1. AdamW + cosine with warm-up + 3 micro-batches per step: 11 steps per
# epoch (the last one with 2 micro-batches, one of them short). The
# uninterrupted run checkpoints at 25 (epoch 2, mid-epoch); the second
# starts from that checkpoint.
adam="--optimizer adamw --lr 0.01 --lr-schedule cosine --warmup-steps 5 --grad-accum 3 --steps 40"
run A $adam --ckpt-every 25
[ -d "$TMP/A/step-00000025" ] || die "no checkpoint at step 25: $(ls "$TMP/A")"
run B $adam --resume "$TMP/A/step-00000025"
grep -q "resuming from .*step-00000025 at step 25" "$TMP/B.out" || { cat "$TMP/B.out"; die "B did not say where it resumed"; }
# 2. SGD with Nesterov momentum, shuffled: stop at 30 (the final checkpoint),
# resume from CKPT_DIR/latest to 60, against 60 straight.
sgd="--lr 0.05 --momentum 0.9 --nesterov --weight-decay 0.001"
run C $sgd --steps 60
run D1 $sgd --steps 30
run D2 $sgd --steps 60 --resume "$TMP/D1/latest"
"$PY" - "$TMP" <<'PYEOF' || die "resumed runs differ from uninterrupted ones"
import sys, numpy as np
from safetensors.numpy import load_file
from safetensors import safe_open
d = sys.argv[1]
def same(a, b):
    for f in ("model.safetensors", "trainer.safetensors"):
        x, y = load_file(f"{d}/{a}/latest/{f}"), load_file(f"{d}/{b}/latest/{f}")
        assert sorted(x) == sorted(y), (f, sorted(x), sorted(y))
        for k in x:
            if not np.array_equal(x[k], y[k]):
                diff = np.max(np.abs(x[k].astype(np.float64) - y[k]))
                raise SystemExit(f"{a} vs {b}: {f} {k} differs (max abs {diff:.3g})")
    with safe_open(f"{d}/{a}/latest/trainer.safetensors", "np") as f:
        ma = f.metadata()
    with safe_open(f"{d}/{b}/latest/trainer.safetensors", "np") as f:
        mb = f.metadata()
    for k in ("step", "epoch", "sampler_pos", "samples", "optimizer_steps", "last_lr"):
        assert ma[k] == mb[k], (k, ma[k], mb[k])
    print(f"{a} == {b}: bit for bit at step {ma['step']} (epoch {ma['epoch']}, sample {ma['sampler_pos']})")
same("A", "B")
same("C", "D2")
# the comparison proves something only if training moved the weights and the
# stop really was mid-run
a, i = load_file(f"{d}/A/latest/model.safetensors"), load_file(f"{d}/A/step-00000025/model.safetensors")
assert max(np.max(np.abs(a[k] - i[k])) for k in a) > 1e-3, "steps 26..40 did not move the weights"
PYEOF
no_workers || die "workers left running"
