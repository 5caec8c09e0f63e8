# The CUDA step's modes as far as a CPU can check them: --cuda-graph's
# refusals (one line, exit 2, before anything runs), --gpu-fuse's values,
# and a --cuda-graph run over the stand-in of the GPU modules
# (tests/gpu/emu_cuda.c, NCCL at world size 1): the mode in the rank's
# ready line, the CPU run's losses, a timed coll message for every bucket
# of every step though the hooks come after the (emulated) replay. The
# numerics of tf32/bf16/fused/graphs on a real GPU: tests/gpu/device_checks.sh.
. tests/lib.sh
case $BUILD in /*) EMU=$BUILD/tests/gpu/ddptop-worker-emu;; *) EMU=$PWD/$BUILD/tests/gpu/ddptop-worker-emu;; esac
[ -x "$EMU" ] || skip "SKIP: $EMU not built"
TRAIN="--dataset synthetic --model mlp:20,16,3 --steps 30 --batch-size 8 --no-final-ckpt"

# refused: one line naming the problem, exit 2, no rank started
refused() { # expected-text, then ddptop's arguments
    want=$1; shift
    "$@" >"$TMP/r.out" 2>&1; rc=$?
    [ "$rc" = 2 ] || { cat "$TMP/r.out"; die "exit $rc, not 2, for: $*"; }
    [ "$(wc -l <"$TMP/r.out")" = 1 ] || { cat "$TMP/r.out"; die "more than one line for: $*"; }
    grep -qF -- "$want" "$TMP/r.out" || die "\"$want\" not said for: $* (said: $(cat "$TMP/r.out"))"
    ! grep -q "rank 0" "$TMP/r.out" || die "a rank ran for: $*"
}
refused "--cuda-graph needs --device cuda" "$DDPTOP" run -n 1 --device cpu --headless -- $TRAIN --cuda-graph
DDPTOP_WORKER=$EMU refused "--cuda-graph needs --backend nccl" \
    "$DDPTOP" run -n 2 --device cuda --backend gloo --headless -- $TRAIN --cuda-graph
DDPTOP_WORKER=$EMU refused "--cuda-graph supports --grad-accum 1 only" \
    "$DDPTOP" run -n 1 --device cuda --backend nccl --headless -- $TRAIN --cuda-graph --grad-accum 2
refused '--gpu-fuse: expected on or off, got "maybe"' "$DDPTOP" run -n 1 --device cpu --headless -- $TRAIN --gpu-fuse maybe
refused '--precision: unknown precision "fp16"' "$DDPTOP" run -n 1 --device cpu --headless -- $TRAIN --precision fp16

# a graph run over the stand-in: the mode on its ready line, the CPU's losses, every bucket timed
DDPTOP_WORKER=$EMU "$DDPTOP" run -n 1 --device cuda --backend nccl --headless --record "$TMP/g.rec" -- $TRAIN \
    --cuda-graph --gpu-fuse off >"$TMP/g.out" 2>&1 || { cat "$TMP/g.out"; die "--cuda-graph (emulated) failed"; }
grep -q "rank 0 ready: cuda:0 .*, nccl, fp32, no fused epilogues, CUDA Graphs" "$TMP/g.out" \
    || die "the ready line does not name the mode: $(grep 'ready:' "$TMP/g.out")"
"$DDPTOP" run -n 1 --device cpu --headless -- $TRAIN >"$TMP/c.out" 2>&1 || die "cpu run failed"
g=$(grep "^rank 0:" "$TMP/g.out" | sed 's/.*loss \([0-9.]*\).*/\1/') c=$(grep "^rank 0:" "$TMP/c.out" | sed 's/.*loss \([0-9.]*\).*/\1/')
[ -n "$g" ] && [ "$g" = "$c" ] || die "--cuda-graph (emulated) loss $g, cpu loss $c"
"$DDPTOP" export "$TMP/g.rec" --jsonl "$TMP/g.jsonl" || die "export"
# device_checks.sh's step-by-step comparer: equal bits pass, another learning rate does not
"$DDPTOP" run -n 1 --device cpu --headless --record "$TMP/c.rec" -- $TRAIN >/dev/null 2>&1 || die "cpu run failed"
"$DDPTOP" run -n 1 --device cpu --headless --record "$TMP/l.rec" -- $TRAIN --lr 0.02 >/dev/null 2>&1 || die "cpu run failed"
"$DDPTOP" export "$TMP/c.rec" --jsonl "$TMP/c.jsonl" && "$DDPTOP" export "$TMP/l.rec" --jsonl "$TMP/l.jsonl" || die "export"
"$PY" tests/gpu/loss_compare.py "$TMP/c.jsonl" "$TMP/g.jsonl" 0 --steps 30 >"$TMP/cmp.out" \
    || die "loss_compare.py: graph (emulated) against cpu: $(cat "$TMP/cmp.out")"
grep -q "^30 steps, max relative difference 0 at step" "$TMP/cmp.out" || die "loss_compare.py said: $(cat "$TMP/cmp.out")"
! "$PY" tests/gpu/loss_compare.py "$TMP/c.jsonl" "$TMP/l.jsonl" 1e-3 >"$TMP/cmp.out" \
    || die "loss_compare.py passed another learning rate: $(cat "$TMP/cmp.out")"
"$PY" - "$TMP/g.jsonl" <<'PYEOF' || die "coll messages of the graph run"
import json, sys
msgs = list(map(json.loads, open(sys.argv[1])))
buckets = {b for m in msgs if m.get("k") == "coll" and m.get("bucket", -1) >= 0 for b in [m["bucket"]]}
colls = [m for m in msgs if m.get("k") == "coll" and m.get("bucket", -1) >= 0]
assert buckets and len(colls) == 30 * len(buckets), (len(colls), buckets)
print(len(colls), "bucket coll messages over", len(buckets), "bucket(s)")
PYEOF
# precision and fusion reach the device side (described; the stand-in computes in model.c's FP32)
DDPTOP_WORKER=$EMU "$DDPTOP" run -n 1 --device cuda --backend nccl --headless -- $TRAIN --precision bf16 --gpu-fuse on \
    >"$TMP/b.out" 2>&1 || { cat "$TMP/b.out"; die "--precision bf16 (emulated) failed"; }
grep -q "rank 0 ready: cuda:0 .*, nccl, bf16, cuBLASLt epilogues.*, grads fp32" "$TMP/b.out" \
    || die "the ready line does not say bf16: $(grep 'ready:' "$TMP/b.out")"
wait_for 5 no_workers || die "workers left running: $(our_workers)"
echo "PASS: --cuda-graph refusals, --gpu-fuse values, a graph run (emulated) with the cpu losses and every bucket timed"
