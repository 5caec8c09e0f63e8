# Checkpoints stay FP32 safetensors with PyTorch's names in every
# --precision and record the one they were trained in; --resume into another
# precision goes on from them and says so in one line: bf16 -> fp32 and
# fp32 -> bf16 (and tf32 -> bf16), each checkpoint opened by torch's own
# safetensors reader.
. tests/lib.sh
"$PY" -c 'import torch, safetensors' 2>/dev/null || skip "no torch and safetensors for $PY"
common="--dataset synthetic --synthetic-size 512 --model mlp:20,32,32,4 --batch-size 16 --seed 5 --lr 0.05 --eval-every 0"
run() { # name args...
    local name=$1; shift
    "$DDPTOP" run -n 2 --headless -- $common --ckpt-dir "$TMP/$name" "$@" >"$TMP/$name.out" 2>&1 \
        || { cat "$TMP/$name.out"; die "run $name failed"; }
}
run B --precision bf16 --steps 10
run BF --precision fp32 --steps 20 --resume "$TMP/B/latest"
grep -q "resuming a bf16 checkpoint (step 10) in fp32" "$TMP/BF.out" || { cat "$TMP/BF.out"; die "no note resuming bf16 in fp32"; }
run F --steps 10
run FB --precision bf16 --steps 20 --resume "$TMP/F/latest"
grep -q "resuming an fp32 checkpoint (step 10) in bf16" "$TMP/FB.out" || { cat "$TMP/FB.out"; die "no note resuming fp32 in bf16"; }
run T --precision tf32 --steps 10
run TB --precision bf16 --steps 20 --resume "$TMP/T/latest"
grep -q "resuming a tf32 checkpoint (step 10) in bf16" "$TMP/TB.out" || { cat "$TMP/TB.out"; die "no note resuming tf32 in bf16"; }
# the same precision needs no note
run BB --precision bf16 --steps 20 --resume "$TMP/B/latest"
! grep -q "resuming a .* checkpoint (step" "$TMP/BB.out" || { cat "$TMP/BB.out"; die "a note resuming bf16 in bf16"; }
"$PY" - "$TMP" <<'PYEOF' || die "checkpoints are not FP32 safetensors recording their precision"
import sys, torch
from safetensors.torch import load_file
from safetensors import safe_open
d = sys.argv[1]
want = {"B": "bf16", "BF": "fp32", "F": "fp32", "FB": "bf16", "T": "tf32", "TB": "bf16"}
names = ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]
for run, prec in want.items():
    w = load_file(f"{d}/{run}/latest/model.safetensors")
    assert sorted(w) == sorted(names), (run, sorted(w))
    assert all(v.dtype == torch.float32 for v in w.values()), (run, {k: v.dtype for k, v in w.items()})
    net = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                              torch.nn.Linear(32, 4))
    net.load_state_dict(w)    # strict: PyTorch's names and shapes
    with safe_open(f"{d}/{run}/latest/trainer.safetensors", "pt") as f:
        m = f.metadata()
    assert m.get("precision") == prec, (run, m.get("precision"), prec)
    # bf16 training still leaves FP32 master weights (not all bf16 values)
    if prec == "bf16":
        v = w["2.weight"]
        assert not torch.equal(v, v.bfloat16().float()), f"{run}: the saved weights are bf16 values"
    print(f"{run}: FP32 safetensors, torch's names, precision {m['precision']} at step {m['step']}")
# resumed runs went on from the checkpoint: they moved the weights
a, b = load_file(f"{d}/B/latest/model.safetensors"), load_file(f"{d}/BF/latest/model.safetensors")
assert max(float((a[k] - b[k]).abs().max()) for k in a) > 1e-4, "resumed steps did not train"
PYEOF
no_workers || die "workers left running"
