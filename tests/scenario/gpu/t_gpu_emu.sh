# `ddptop run --device cuda` end to end on this machine, with the worker
# linked against the CPU stand-in of the GPU modules (tests/gpu/emu_cuda.c:
# same trainer path, same comm.c staging; no GPU needed). Checks what the GPU
# path adds on the wire and on screen: every step message carries the
# device memory (dev_mem, dev_mem_total), Gloo stages "device" buffers at 2
# ranks and ends with the CPU run's losses, NCCL runs at world size 1, and a
# GPU checkpoint resumes on the CPU. The real GPU runs: tests/gpu/device_checks.sh.
. tests/lib.sh
case $BUILD in /*) EMU=$BUILD/tests/gpu/ddptop-worker-emu;; *) EMU=$PWD/$BUILD/tests/gpu/ddptop-worker-emu;; esac
[ -x "$EMU" ] || skip "SKIP: $EMU not built"
TRAIN="--dataset synthetic --model mlp:20,16,3 --steps 30 --batch-size 8"
DDPTOP_WORKER=$EMU "$DDPTOP" run -n 2 --device cuda --backend gloo --headless --record "$TMP/g.rec" -- $TRAIN \
    --ckpt-dir "$TMP/ck" >"$TMP/g.out" 2>&1 || { cat "$TMP/g.out"; die "cuda (emulated) run failed"; }
"$DDPTOP" run -n 2 --device cpu --headless -- $TRAIN --no-final-ckpt >"$TMP/c.out" 2>&1 || die "cpu run failed"
grep -q "rank 0 ready: cuda:0" "$TMP/g.out" || die "the ranks did not run on the (emulated) device"
"$DDPTOP" export "$TMP/g.rec" --jsonl "$TMP/g.jsonl" || die "export"
"$PY" - "$TMP/g.jsonl" <<'PYEOF' || die "step messages lack the device memory"
import json, sys
steps = [m for m in map(json.loads, open(sys.argv[1])) if m.get("k") == "step"]
assert len(steps) == 60, len(steps)
for s in steps:   # emu_cuda.c reports 1 MiB in use of 1 GiB
    assert s["dev_mem"] == 1 << 20 and s["dev_mem_total"] == 1 << 30, s
print("dev_mem in all", len(steps), "step messages")
PYEOF
g=$(grep "^rank 1:" "$TMP/g.out" | sed 's/.*loss \([0-9.]*\).*/\1/') c=$(grep "^rank 1:" "$TMP/c.out" | sed 's/.*loss \([0-9.]*\).*/\1/')
[ -n "$g" ] && [ "$g" = "$c" ] || die "cuda (emulated) loss $g, cpu loss $c"
DDPTOP_WORKER=$EMU "$DDPTOP" run -n 1 --device cuda --backend nccl --headless -- $TRAIN --no-final-ckpt \
    >"$TMP/n.out" 2>&1 || { cat "$TMP/n.out"; die "nccl world size 1 (emulated) failed"; }
"$DDPTOP" run -n 2 --device cpu --headless -- --dataset synthetic --model mlp:20,16,3 --steps 40 --batch-size 8 \
    --resume "$TMP/ck/latest" --ckpt-dir "$TMP/rk" >"$TMP/r.out" 2>&1 || { cat "$TMP/r.out"; die "cpu resume of a cuda checkpoint"; }
grep -q "rank 0: exit 0, step 40" "$TMP/r.out" || die "the resumed cpu run did not reach step 40"
grep -q "resuming from .*step-00000030 at step 30" "$TMP/r.out" || die "the cpu run did not resume at step 30"
# ends where an uninterrupted cpu run does, by the comparer device_checks.sh uses on the GPU
"$DDPTOP" run -n 2 --device cpu --headless -- --dataset synthetic --model mlp:20,16,3 --steps 40 --batch-size 8 \
    --ckpt-dir "$TMP/uk" >"$TMP/u.out" 2>&1 || die "uninterrupted cpu run failed"
"$PY" tests/gpu/ckpt_compare.py "$TMP/rk/step-00000040/model.safetensors" "$TMP/uk/step-00000040/model.safetensors" 1e-6 \
    || die "the resumed run's step-40 weights differ from the uninterrupted run's"
! "$PY" tests/gpu/ckpt_compare.py "$TMP/ck/step-00000030/model.safetensors" "$TMP/uk/step-00000040/model.safetensors" 1e-6 \
    >"$TMP/cmp.out" || die "ckpt_compare.py passed step 30 against step 40"
grep -q "largest relative difference" "$TMP/cmp.out" || die "ckpt_compare.py: $(cat "$TMP/cmp.out")"
# without -n: one rank per GPU (torchrun's --nproc-per-node gpu); on the CPU the default stays
DDPTOP_WORKER=$EMU DDPTOP_EMU_GPUS=3 "$DDPTOP" run --backend gloo --headless -- $TRAIN --no-final-ckpt \
    >"$TMP/d.out" 2>&1 || { cat "$TMP/d.out"; die "default -n on 3 (emulated) GPUs failed"; }
grep -q "^rank 2: exit 0" "$TMP/d.out" && ! grep -q "^rank 3:" "$TMP/d.out" || die "-n did not default to the 3 GPUs"
DDPTOP_WORKER=$EMU DDPTOP_EMU_GPUS=3 "$DDPTOP" run --device cpu --headless -- $TRAIN --no-final-ckpt \
    >"$TMP/e.out" 2>&1 || die "cpu run beside 3 GPUs failed"
grep -q "^rank 1: exit 0" "$TMP/e.out" && ! grep -q "^rank 2:" "$TMP/e.out" || die "--device cpu did not keep the default -n"
wait_for 5 no_workers || die "workers left running: $(our_workers)"
echo "PASS: --device cuda end to end over the stand-in: dev_mem on the wire, cpu losses, nccl x1, resume on cpu, -n = GPUs"
