# In a CUDA build, jobs on CPUs run the CPU-only twin of the worker
# (build/cpu/ddptop-worker: no cudart/cuBLAS/NCCL to load), still named
# ddptop-worker; --device cuda goes to the full worker (whose error on a
# machine without a GPU names CUDA, not the CPU-only build).
. tests/lib.sh
case $BUILD in /*) B=$BUILD;; *) B=$PWD/$BUILD;; esac
[ -x "$B/cpu/ddptop-worker" ] || skip "SKIP: no CPU-only worker (a build without nvcc has only one)"
ldd "$B/cpu/ddptop-worker" | grep -qiE "cudart|cublas|nccl" && die "the CPU-only worker links CUDA libraries"
"$DDPTOP" run -n 2 --headless --device cpu -- --dataset synthetic --model mlp:20,16,3 --epochs 100000 \
    --no-final-ckpt >"$TMP/out" 2>&1 &
pd=$!
CLEANUPS+=("kill -9 $pd")
some_worker() { [ -n "$(our_workers)" ]; }
wait_for 10 some_worker || die "no worker started"
wait_for 10 grep -q "broadcast -> train" "$TMP/out" || { cat "$TMP/out"; die "the job did not train"; }
n=0
for p in $(our_workers); do
    exe=$(readlink /proc/$p/exe)
    [ "$exe" = "$B/cpu/ddptop-worker" ] || die "rank process $p runs $exe, not the CPU-only worker"
    n=$((n + 1))
done
[ $n = 2 ] || die "$n workers of this job found, want 2"
kill -INT $pd
wait $pd; rc=$?
[ $rc = 130 ] || die "the CPU job did not stop cleanly after Ctrl-C (exit $rc, want 130)"
if ! "$B/ddptop-worker" --version | grep -q "^cuda: cuda runtime"; then skip "SKIP (CPU part passed): the full worker has no CUDA"; fi
"$DDPTOP" run -n 1 --headless --device cuda -- --dataset synthetic --steps 1 >"$TMP/cuda" 2>&1
rc=$?
cat "$TMP/cuda"
[ $rc = 2 ] || die "--device cuda without a GPU: exit $rc"
grep -q "CPU-only" "$TMP/cuda" && die "--device cuda was checked by the CPU-only worker"
wait_for 5 no_workers || die "workers left running: $(our_workers)"
echo "PASS: CPU jobs on the CPU-only worker; --device cuda on the full one"
