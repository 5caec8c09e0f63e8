# A headless 2-rank run trains, checkpoints at the end, exits 0 and leaves no
# process; its checkpoint opens in Python's safetensors with torch's names.
. tests/lib.sh
out=$TMP/out.txt
"$DDPTOP" run -n 2 --headless -- --dataset synthetic --model mlp:20,16,3 --steps 40 \
    --batch-size 16 --ckpt-dir "$TMP/ck" >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || die "ddptop exited $rc"
grep -q "rank 0: exit 0" "$out" || die "no clean exit line for rank 0"
grep -q "rank 1: exit 0" "$out" || die "no clean exit line for rank 1"
grep -qi "job done" "$out" || die "no final verdict"
grep -q "collectives: gloo; all-reduce through shared memory (every rank on this host)" "$out" \
    || die "two ranks on this host did not say they sum through shared memory"
wait_for 3 no_workers || die "workers left running: $(our_workers)"
[ -L "$TMP/ck/latest" ] || die "no latest symlink"
[ "$(readlink "$TMP/ck/latest")" = "step-00000040" ] || die "latest -> $(readlink "$TMP/ck/latest")"
"$PY" - "$TMP/ck/latest/model.safetensors" <<'PYEOF' || die "python could not read the checkpoint"
import sys
from safetensors import safe_open
from safetensors.numpy import load_file
t = load_file(sys.argv[1])
want = {"0.weight": (16, 20), "0.bias": (16,), "2.weight": (3, 16), "2.bias": (3,)}
assert {k: v.shape for k, v in t.items()} == want, {k: v.shape for k, v in t.items()}
with safe_open(sys.argv[1], "np") as f:
    assert f.metadata() == {"format": "pt"}, f.metadata()
print("checkpoint ok:", sorted(t))
PYEOF
