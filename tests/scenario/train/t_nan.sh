# A loss that becomes NaN or inf stops every rank at that step, with one
# verdict ("loss became nan at step S on rank R"), exit 1, and `latest`
# never gets non-finite weights: a learning rate that diverges, and an
# --init-from of all-NaN weights. --allow-nan trains on to the end.
. tests/lib.sh
common="--dataset synthetic --model mlp:20,32,4 --batch-size 8 --eval-every 0"
# 1. Divergence, with a checkpoint every step: latest stays the last finite one.
"$DDPTOP" run -n 2 --headless -- $common --lr 1e5 --epochs 5 --ckpt-every 1 --ckpt-dir "$TMP/ck" >"$TMP/o1" 2>&1 &&
    { cat "$TMP/o1"; die "a diverged run ended cleanly"; }
v=$(grep -o "job failed: .*" "$TMP/o1")
echo "$v" | grep -Eq "loss became (nan|inf) at step [0-9]+ on (rank [01]|2 ranks)" || { cat "$TMP/o1"; die "no NaN verdict: $v"; }
S=$(echo "$v" | sed -E 's/.*loss became (nan|inf) at step ([0-9]+).*/\2/')
# both ranks stop at that step
for r in 0 1; do
    grep -q "rank $r: exit 1, step $S," "$TMP/o1" || { cat "$TMP/o1"; die "rank $r did not stop at step $S"; }
done
saved=$(readlink "$TMP/ck/latest"); saved=${saved##*step-}; saved=$((10#$saved))
[ "$saved" -lt "$S" ] || die "latest is step $saved, not before the NaN step $S"
"$PY" - "$TMP/ck/latest/model.safetensors" <<'PYEOF' || die "latest holds non-finite weights"
import sys, numpy as np
from safetensors.numpy import load_file
t = load_file(sys.argv[1])
assert t and all(np.isfinite(v).all() for v in t.values()), "non-finite"
PYEOF
echo "ok: diverged at step $S, latest is step $saved, finite"
# 2. All-NaN initial weights: step 1 is the NaN step, nothing is written.
"$PY" - "$TMP/nan.safetensors" <<'PYEOF' || skip "skip: cannot write safetensors with $PY"
import sys, numpy as np
from safetensors.numpy import save_file
dims = [20, 32, 4]
t = {}
for i in range(2):
    t[f"{2*i}.weight"] = np.full((dims[i+1], dims[i]), np.nan, np.float32)
    t[f"{2*i}.bias"] = np.full((dims[i+1],), np.nan, np.float32)
save_file(t, sys.argv[1], metadata={"format": "pt"})
PYEOF
"$DDPTOP" run -n 1 --headless -- $common --init-from "$TMP/nan.safetensors" --ckpt-dir "$TMP/ck2" >"$TMP/o2" 2>&1 &&
    die "an all-NaN start ended cleanly"
grep -q "job failed: .*loss became nan at step 1 on rank 0" "$TMP/o2" || { cat "$TMP/o2"; die "no step-1 verdict"; }
[ ! -e "$TMP/ck2/latest" ] || die "an all-NaN run wrote a checkpoint"
echo "ok: all-NaN start stops at step 1, no checkpoint"
# 3. --allow-nan: on to --steps, exit 0, said once.
"$DDPTOP" run -n 2 --headless -- $common --lr 1e5 --steps 300 --allow-nan --no-final-ckpt >"$TMP/o3" 2>&1 ||
    { tail -20 "$TMP/o3"; die "--allow-nan run failed"; }
grep -q "job done: all 2 ranks ended cleanly" "$TMP/o3" || { tail "$TMP/o3"; die "--allow-nan: not a clean end"; }
grep -q "training on (--allow-nan)" "$TMP/o3" || { tail "$TMP/o3"; die "--allow-nan: the NaN was not said"; }
grep -q "rank 0: exit 0, step 300," "$TMP/o3" || die "--allow-nan: did not reach step 300"
echo "ok: --allow-nan trains on"
