#!/usr/bin/env bash
# tests/gpu/device_checks.sh — every check that needs a GPU, as one run on
# the GPU machine, ending with a short table.
#
#   . .devlibs/env.sh && bash tests/gpu/device_checks.sh [BUILD]
#
# From the repository root, BUILD (default build) holding ddptop,
# ddptop-worker, tests/test_gpu and tests/gpu/bench_gpu built on the CPU
# machine (`make gpu-bins`), .devlibs from shared/tools/device-bundle.sh.
# If a binary built there does not start here, the .cu parts are rebuilt
# here with this machine's nvcc and relinked from BUILD's objects (carry
# BUILD/libworkers.a, BUILD/libtransport.a, BUILD/workers/main.o and
# BUILD/tests/gpu/*.o for that).
#
# Steps: the machine; the binaries start; make test-gpu (CUDA against the
# CPU, NCCL world size 1, the refusals, the modes against each other); make
# bench-gpu (fp32/tf32/bf16 against PyTorch eager, autocast and
# torch.compile, and the floor, with issue 18's targets); issue 18's rows
# (CUDA bf16 against the CPU bf16 reference, tf32, fused, graphs, bf16
# gradients on NCCL); end to end through ddptop (NCCL world size 1, Gloo on CUDA with 2
# and 4 ranks on the one GPU, NCCL with 2 ranks on one GPU refused with
# the gloo hint, one rank per GPU without -n, GPU memory in step
# messages, nothing left running; a torch DDP script through the adapter,
# NCCL). Logs go to $OUT/device_checks.log when OUT is set.
# Exit 0 when nothing failed (skipped steps are not failures).
set -u
B=${1:-build}
LOG=${OUT:-/tmp}/device_checks.log
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1
export LANG=C.UTF-8 OPENBLAS_NUM_THREADS=1
RESULTS=()
FAILED=0
row() { RESULTS+=("$1|$2"); case $2 in FAIL*) FAILED=1;; esac; }
say() { printf '\n== %s\n' "$*"; }
t_start=$(date +%s)

say "machine"
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)
echo "nvidia-smi: $gpu"
echo "nvcc: $(nvcc --version 2>/dev/null | tail -1 || echo none)"
echo "python3: $(python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1)"
row "GPU" "${gpu:-none}"

# ---- the binaries start, or are rebuilt here ----------------------------
starts() {
    "$B/ddptop-worker" --version >/tmp/dc-version.txt 2>&1 || return 1
    grep -q '^nccl: nccl' /tmp/dc-version.txt || return 1
    for b in "$B/tests/test_gpu" "$B/tests/gpu/bench_gpu"; do
        [ -x "$b" ] || return 1
        ldd "$b" 2>&1 | grep -q 'not found' && return 1
    done
    return 0
}

find_first() { for p in "$@"; do [ -e "$p" ] && { echo "$p"; return 0; }; done; return 1; }

rebuild() {
    local nv inc_nccl lib_nccl lib_cuda r=/tmp/ddptop-rebuild
    nv=$(command -v nvcc || find_first /usr/local/cuda/bin/nvcc) || { echo "no nvcc here"; return 1; }
    inc_nccl=$(dirname "$(find_first /usr/local/cuda/include/nccl.h /usr/include/nccl.h \
        /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/include/nccl.h)") || { echo "no nccl.h here"; return 1; }
    lib_nccl=$(find_first /usr/local/cuda/lib64/libnccl.so.2 /usr/lib/x86_64-linux-gnu/libnccl.so.2 \
        /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2) || { echo "no libnccl here"; return 1; }
    lib_cuda=$(dirname "$(find_first /usr/local/cuda/lib64/libcudart.so.13 /usr/local/cuda/lib64/libcudart.so \
        /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib/libcudart.so.13 \
        /opt/torch/.venv/lib/python3*/site-packages/nvidia/cuda_runtime/lib/libcudart.so.13)")
    rm -rf "$r" && mkdir -p "$r"
    local objs=()
    for f in cuda/gpu cuda/cuda_mlp cuda/cuda_step cuda/cuda_gemm cuda/cuda_kernels comm/comm_nccl; do
        echo "nvcc workers/$f.cu"
        "$nv" -std=c++17 -O2 -gencode arch=compute_90,code=sm_90 -Iworkers -Itransport -I"$inc_nccl" \
            -c "workers/$f.cu" -o "$r/${f#*/}.o" || return 1
        objs+=("$r/${f#*/}.o")
    done
    cp "$B/libworkers.a" "$r/libworkers.a" && ar r "$r/libworkers.a" "${objs[@]}" || return 1
    local libs=(.devlibs/*.so* -L"$lib_cuda" -Wl,-rpath,"$lib_cuda" -l:libcudart.so.13 -l:libcublas.so.13
                -l:libcublasLt.so.13 "$lib_nccl" -lstdc++ -lpthread -lm -ldl -Wl,-rpath-link,.devlibs)
    gcc -o "$B/tests/test_gpu" "$B/tests/gpu/test_gpu.o" "$r/libworkers.a" "$B/libtransport.a" "${libs[@]}" &&
    gcc -o "$B/tests/gpu/bench_gpu" "$B/tests/gpu/bench_gpu.o" "$r/libworkers.a" "$B/libtransport.a" "${libs[@]}" &&
    gcc -o "$B/ddptop-worker" "$B/workers/main.o" "$r/libworkers.a" "$B/libtransport.a" "${libs[@]}"
}

say "binaries"
if starts; then
    row "binaries from the CPU machine" "start"
else
    cat /tmp/dc-version.txt; ldd "$B/tests/test_gpu" | grep 'not found'
    echo "rebuilding the .cu parts here"
    if rebuild && starts; then row "binaries" "rebuilt here, start"; else row "binaries" "FAIL: do not start"; fi
fi
cat /tmp/dc-version.txt

# ---- make test-gpu ----------------------------------------------------------
say "test-gpu"
timeout 600 "$B/tests/test_gpu" >/tmp/dc-test.txt 2>&1
rc=$?
cat /tmp/dc-test.txt
pass=$(grep -c '^PASS:' /tmp/dc-test.txt)
fail=$(grep -c '^FAIL:' /tmp/dc-test.txt)
if grep -q '^SKIP' /tmp/dc-test.txt; then
    row "test-gpu" "FAIL: skipped: $(grep -m1 '^SKIP' /tmp/dc-test.txt | cut -c1-90)"
elif [ "$fail" -gt 0 ] || [ $rc -ne 0 ]; then
    row "test-gpu" "FAIL: $pass passed, $fail failed (exit $rc): $(grep '^FAIL:' /tmp/dc-test.txt | sed 's/.*://' | tr '\n' ' ' | cut -c1-120)"
else
    row "test-gpu" "$pass passed, 0 failed"
fi
for name in train_20_steps_sgd_momentum_matches_cpu train_20_steps_adamw_matches_cpu \
            nccl_world1_allreduce_broadcast_barrier_destroy nccl_two_ranks_one_gpu_refused \
            gloo_cuda_4_ranks_one_gpu fp32_fused_matches_plain fp32_graph_equals_eager tf32_near_fp32 \
            bf16_near_fp32 bf16_fused_near_plain bf16_graph_equals_eager bf16_grad_buckets_near_fp32 \
            bf16_grad_buckets_round_trip; do
    v=$(grep -m1 -E "^(PASS|FAIL):.*:$name\$" /tmp/dc-test.txt | cut -d: -f1)
    # the figure: the case's own "N steps: worst loss difference ..." line, when it has one
    f=$(grep -B1 -E "^(PASS|FAIL):.*:$name\$" /tmp/dc-test.txt | grep -m1 'worst loss difference' | sed 's/^ *//')
    row "  $name" "${v:-FAIL: not run}${f:+: $f}"
done
grep '^  ran: ' /tmp/dc-test.txt | sort | uniq -c | sed 's/^/  /'
for name in train_20_steps_sgd_momentum_matches_cpu train_20_steps_adamw_matches_cpu; do
    w=$(grep -B1 -E "^(PASS|FAIL):.*:$name\$" /tmp/dc-test.txt | grep 'final weights' | sed 's/.*difference: //')
    [ -n "$w" ] && row "  ${name%%_matches_cpu} weights" "relative $w"
done

# ---- make bench-gpu --------------------------------------------------------
say "bench-gpu"
TORCH_PY=python3 timeout 600 bash tests/gpu/bench.sh "$B/tests/gpu/bench_gpu" >/tmp/dc-bench.txt 2>&1
rc=$?
cat /tmp/dc-bench.txt
if [ $rc -ne 0 ]; then
    row "bench-gpu" "FAIL: exit $rc"
elif grep -q '^SKIP' /tmp/dc-bench.txt; then
    row "bench-gpu" "FAIL: skipped: $(grep -m1 '^SKIP' /tmp/dc-bench.txt | cut -c1-90)"
else
    while IFS= read -r l; do
        case $l in
            "ddptop fp32 / PyTorch DDP"*) row "bench-gpu" "$l";;
            "ddptop "*|"PyTorch "*|"torch.compile "*) row "  $(echo "$l" | cut -c1-36 | sed 's/ *$//')" \
                "$(echo "$l" | awk '{n=NF; printf "%s steps/s, step %s ms (compute %s, exposed comm %s, overhead %s)", $(n-4), $(n-3), $(n-2), $(n-1), $n}')";;
            "floor "*) row "  floor (bf16 products, cuBLASLt)" "$(echo "$l" | cut -c38- | sed 's/^ *//')";;
            "  "*"target met"*) row "  target:$(echo "$l" | sed 's/ *target met.*//')" "PASS: $(echo "$l" | sed 's/.*target met *//')";;
            "  "*"target missed"*) row "  target:$(echo "$l" | sed 's/ *target missed.*//')" "FAIL: missed: $(echo "$l" | sed 's/.*target missed *//')";;
            "  "*"not measured"*) row "  target:$(echo "$l" | sed 's/ *not measured.*//')" "SKIP: not measured";;
            "skipped: "*) row "  bench-gpu $l" "SKIP";;
        esac
    done </tmp/dc-bench.txt
fi

# ---- end to end through ddptop --------------------------------------------
say "end to end"
# Workers of this script carry its tag (tests/lib_tag.sh): only those count,
# and only those are killed, by pid.
export DDPTOP_TEST_TAG="device-checks-$$"
. tests/lib_tag.sh
workers_left() { [ -n "$(our_workers)" ]; }
kill_ours() { local p; for p in $(our_workers); do kill -9 "$p"; done; }
e2e() { # name: ddptop run arguments...
    local name=$1; shift
    timeout 300 "$B/ddptop" run --headless --timeout 60 "$@" >/tmp/dc-e2e.txt 2>&1
    local rc=$?
    tail -5 /tmp/dc-e2e.txt
    if [ $rc -eq 2 ] && grep -qi 'no cuda backend yet\|no nccl backend yet\|unknown option' /tmp/dc-e2e.txt; then
        row "$name" "skipped: ddptop does not take these options yet"
    elif [ $rc -ne 0 ]; then
        row "$name" "FAIL: exit $rc: $(tail -1 /tmp/dc-e2e.txt | cut -c1-100)"
    else
        sleep 1
        if workers_left; then row "$name" "FAIL: ddptop-worker processes left"; kill_ours
        else row "$name" "ok, clean destroy, no process left"; fi
    fi
}
trainer="--dataset synthetic --model mlp:784,256,256,10 --batch-size 64 --steps 100"
e2e "e2e nccl, 1 rank" -n 1 --device cuda --backend nccl -- $trainer
e2e "e2e gloo on cuda, 2 ranks, 1 GPU" -n 2 --device cuda --backend gloo -- $trainer
e2e "e2e gloo on cuda, 4 ranks, 1 GPU" -n 4 --device cuda --backend gloo -- $trainer
timeout 120 "$B/ddptop" run --headless -n 2 --device cuda --backend nccl -- $trainer >/tmp/dc-e2e.txt 2>&1
if grep -q -- '--backend gloo' /tmp/dc-e2e.txt; then row "e2e nccl, 2 ranks, 1 GPU" "refused with the gloo hint"
elif grep -qi 'no cuda backend yet\|no nccl backend yet' /tmp/dc-e2e.txt; then row "e2e nccl, 2 ranks, 1 GPU" "skipped: ddptop does not take these options yet"
else row "e2e nccl, 2 ranks, 1 GPU" "FAIL: not refused clearly: $(tail -1 /tmp/dc-e2e.txt | cut -c1-90)"; fi
# without -n: one rank per GPU; every step message carries the GPU memory
rm -f /tmp/dc-auto.rec /tmp/dc-auto.jsonl
timeout 120 "$B/ddptop" run --headless --record /tmp/dc-auto.rec -- $trainer >/tmp/dc-e2e.txt 2>&1
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
nranks=$(grep -c '^rank [0-9]*: exit 0' /tmp/dc-e2e.txt)
if [ "$nranks" -ge 1 ] && [ "$nranks" = "$ngpu" ]; then row "e2e default -n" "$nranks rank(s) for $ngpu GPU(s)"
else row "e2e default -n" "FAIL: $nranks clean ranks for $ngpu GPU(s): $(tail -1 /tmp/dc-e2e.txt | cut -c1-80)"; fi
"$B/ddptop" export /tmp/dc-auto.rec --jsonl /tmp/dc-auto.jsonl >/dev/null 2>&1
mem=$(grep -m1 '"k":"step"' /tmp/dc-auto.jsonl | grep -o '"dev_mem":[0-9]*,"dev_mem_total":[0-9]*')
case $mem in *'"dev_mem":0,'*|"") row "e2e GPU memory in step" "FAIL: ${mem:-no step message}";; *) row "e2e GPU memory in step" "$mem";; esac
# every gradient bucket's all-reduce timed by CUDA events
python3 - /tmp/dc-auto.jsonl >/tmp/dc-coll.txt 2>&1 <<'PYEOF'
import json, sys
ms = [json.loads(l) for l in open(sys.argv[1])]
coll = [m for m in ms if m.get("k") == "coll" and m.get("op") == "allreduce" and m.get("bucket", -1) >= 0]
bad = [c for c in coll if not (c["enq"] <= c["start"] <= c["done"])]
us = sorted((c["done"] - c["start"]) / 1e3 for c in coll)
print(f"{len(coll)} bucket all-reduces in {len(set(c['bucket'] for c in coll))} bucket(s), {len(bad)} with bad times;",
      f"median {us[len(us) // 2]:.1f} us" if us else "")
sys.exit(0 if coll and not bad else 1)
PYEOF
if [ $? -eq 0 ]; then row "e2e coll per bucket" "$(cat /tmp/dc-coll.txt)"; else row "e2e coll per bucket" "FAIL: $(tail -1 /tmp/dc-coll.txt | cut -c1-100)"; fi

# ---- issue 18: precision, fused epilogues, CUDA Graphs, bf16 gradients ------
# Each row runs two short trainings from the same seed and compares rank 0's
# loss at each of 20 steps (tests/gpu/loss_compare.py: the largest relative
# difference, against the stated tolerance; 0 = equal bits).
say "precision, fusion, graphs"
# --gpu-fuse on: the trainer's default stays off until these rows have passed on a GPU
# (docs/DECISIONS.md); a later --gpu-fuse off in a row wins.
p20="--dataset synthetic --model mlp:784,256,256,10 --batch-size 64 --steps 20 --no-final-ckpt --eval-every 0 --gpu-fuse on"
prun() { # tag: ddptop run options -- trainer options (after $p20)
    local tag=$1; shift
    local opts=(); while [ "$1" != "--" ]; do opts+=("$1"); shift; done; shift
    rm -f "/tmp/dc-p-$tag.rec" "/tmp/dc-p-$tag.jsonl"
    timeout 120 "$B/ddptop" run --headless --timeout 60 --record "/tmp/dc-p-$tag.rec" "${opts[@]}" -- $p20 "$@" \
        >"/tmp/dc-p-$tag.txt" 2>&1 || { echo "run $tag failed: $(tail -1 "/tmp/dc-p-$tag.txt")"; return 1; }
    "$B/ddptop" export "/tmp/dc-p-$tag.rec" --jsonl "/tmp/dc-p-$tag.jsonl" >/dev/null 2>&1
}
# the row: both runs, then their losses within tol
pcmp() { # name tol tagA tagB
    local name=$1 tol=$2 a=$3 b=$4 why
    for t in "$a" "$b"; do
        [ -s "/tmp/dc-p-$t.jsonl" ] || { row "$name" "FAIL: run $t: $(tail -1 "/tmp/dc-p-$t.txt" 2>/dev/null | cut -c1-90)"; return; }
    done
    why=$(python3 tests/gpu/loss_compare.py "/tmp/dc-p-$a.jsonl" "/tmp/dc-p-$b.jsonl" "$tol" 2>&1)
    if [ $? -eq 0 ]; then row "$name" "PASS: $why"; else row "$name" "FAIL: $why"; fi
}
G1=(-n 1 --device cuda --backend nccl)
prun cpu-fp32  -n 1 --device cpu -- ;                           prun cpu-bf16  -n 1 --device cpu -- --precision bf16
prun cuda-fp32 "${G1[@]}" -- ;                                  prun cuda-bf16 "${G1[@]}" -- --precision bf16
prun cuda-tf32 "${G1[@]}" -- --precision tf32
prun cuda-bf16-nofuse "${G1[@]}" -- --precision bf16 --gpu-fuse off
prun gloo2-fused -n 2 --device cuda --backend gloo -- ;         prun gloo2-nofuse -n 2 --device cuda --backend gloo -- --gpu-fuse off
prun cuda-fp32-graph "${G1[@]}" -- --cuda-graph;                prun cuda-bf16-graph "${G1[@]}" -- --precision bf16 --cuda-graph
prun cpu-gbf16 -n 1 --device cpu -- --grad-dtype bf16;          prun cuda-gbf16 "${G1[@]}" -- --grad-dtype bf16
prun cuda-all "${G1[@]}" -- --precision bf16 --grad-dtype bf16; prun cuda-all-graph "${G1[@]}" -- --precision bf16 --grad-dtype bf16 --cuda-graph
pcmp "CUDA fp32 vs CPU fp32 (20 steps)" 1e-4 cpu-fp32 cuda-fp32
pcmp "CUDA bf16 vs CPU bf16 reference" 1e-2 cpu-bf16 cuda-bf16
# context for the row above: how far bf16 is from fp32 on the CPU itself
why=$(python3 tests/gpu/loss_compare.py /tmp/dc-p-cpu-fp32.jsonl /tmp/dc-p-cpu-bf16.jsonl 1 2>&1) &&
    row "  (CPU bf16 vs CPU fp32, for scale)" "PASS: $why" || row "  (CPU bf16 vs CPU fp32, for scale)" "FAIL: $why"
pcmp "CUDA tf32 vs fp32" 1e-2 cuda-fp32 cuda-tf32
pcmp "fused vs unfused, fp32 (gloo, 2 ranks)" 1e-4 gloo2-nofuse gloo2-fused
pcmp "fused vs unfused, bf16" 1e-2 cuda-bf16-nofuse cuda-bf16
pcmp "graph on vs off, fp32" 0 cuda-fp32 cuda-fp32-graph
pcmp "graph on vs off, bf16" 0 cuda-bf16 cuda-bf16-graph
pcmp "--grad-dtype bf16 on NCCL vs CPU (Gloo)" 1e-2 cpu-gbf16 cuda-gbf16
pcmp "bf16 + grads bf16: graph on vs off" 0 cuda-all cuda-all-graph
# what the graph runs say about themselves: their mode, and a CUDA-event time per bucket and step
for t in cuda-fp32-graph cuda-all-graph; do
    python3 - "/tmp/dc-p-$t.jsonl" >/tmp/dc-pc.txt 2>&1 <<'PYEOF'
import json, sys
ms = [json.loads(l) for l in open(sys.argv[1])]
h = [m for m in ms if m.get("k") == "hello"][0]
coll = [m for m in ms if m.get("k") == "coll" and m.get("bucket", -1) >= 0]
nb = len({c["bucket"] for c in coll})
bad = [c for c in coll if not (c["enq"] <= c["start"] < c["done"])]
print(f"precision {h.get('precision')}, grads {h.get('grad_dtype')}: {len(coll)} bucket all-reduces over {nb} bucket(s),",
      f"{len(bad)} without a positive CUDA-event time")
sys.exit(0 if coll and len(coll) == 20 * nb and not bad else 1)
PYEOF
    if [ $? -eq 0 ]; then row "graph run $t: coll" "PASS: $(cat /tmp/dc-pc.txt)"; else row "graph run $t: coll" "FAIL: $(tail -1 /tmp/dc-pc.txt | cut -c1-100)"; fi
    grep -m1 -o 'ready: cuda:0 ([^)]*), nccl, [^;]*' "/tmp/dc-p-$t.txt" | sed 's/^/  /'
done
# how many products took cuBLASLt's fused path, per mode (the ranks' last line says)
for t in cuda-fp32 cuda-tf32 cuda-bf16 cuda-bf16-graph; do
    f=$(grep -m1 -o 'fused [0-9]* of [0-9]* products' "/tmp/dc-p-$t.txt")
    case $f in "fused 0 of"*|"") row "  fused products, $t" "FAIL: ${f:-no count in the log}";;
               *) row "  fused products, $t" "PASS: $f";; esac
done
workers_left && { row "processes (precision rows)" "FAIL: ddptop-worker left"; kill_ours; }

# checkpoints cross devices: resume the other device's step-30 checkpoint and
# end at step 60 where the uninterrupted run did (float32 on both; the GPU's
# sums run in another order, so close, not equal)
small="--dataset synthetic --model mlp:784,256,256,10 --batch-size 64 --steps 60 --ckpt-every 30"
xdev() { # name n: first-run options -- resume options
    local name=$1 n=$2 a=/tmp/dc-xa b=/tmp/dc-xb; shift 2
    local first=() second=(); while [ "$1" != "--" ]; do first+=("$1"); shift; done; shift; second=("$@")
    rm -rf $a $b
    if ! timeout 120 "$B/ddptop" run --headless -n "$n" "${first[@]}" -- $small --ckpt-dir $a >/tmp/dc-x1.txt 2>&1; then
        row "$name" "FAIL: first run: $(tail -1 /tmp/dc-x1.txt | cut -c1-90)"; return; fi
    if ! timeout 120 "$B/ddptop" run --headless -n "$n" "${second[@]}" -- $small --ckpt-dir $b \
            --resume $a/step-00000030 >/tmp/dc-x2.txt 2>&1; then
        row "$name" "FAIL: resume: $(tail -1 /tmp/dc-x2.txt | cut -c1-90)"; return; fi
    grep -q "r0 resuming from $a/step-00000030 at step 30" /tmp/dc-x2.txt || {
        row "$name" "FAIL: the second run did not resume at step 30"; return; }
    if python3 tests/gpu/ckpt_compare.py $b/step-00000060/model.safetensors $a/step-00000060/model.safetensors 1e-4 \
            >/tmp/dc-x3.txt 2>&1; then row "$name" "step 60 weights: $(cut -c1-80 /tmp/dc-x3.txt)"
    else row "$name" "FAIL: $(tail -1 /tmp/dc-x3.txt | cut -c1-100)"; fi
}
xdev "ckpt: GPU (nccl) -> CPU resume" 1 --device cuda --backend nccl -- --device cpu --backend gloo
xdev "ckpt: CPU -> GPU (gloo, 2 ranks) resume" 2 --device cpu --backend gloo -- --device cuda --backend gloo

# end to end at the benchmark's size, through the whole product: rank 0's
# throughput line (steps/s, the time inside a step and between steps) with
# telemetry on and off, alternating, three times each (the A/B of its cost),
# then once without the per-epoch evaluation
big="--dataset synthetic --model mlp:784,4096,4096,10 --batch-size 512 --steps 3000 --epochs 1000 --no-final-ckpt"
SPS_ON=() SPS_OFF=()
for v in "telemetry on|" "telemetry off|--no-telemetry" "telemetry on|" "telemetry off|--no-telemetry" \
         "telemetry on|" "telemetry off|--no-telemetry" "no evaluation (--eval-every 0)|--eval-every 0"; do
    name=${v%%|*} extra=${v#*|}
    rm -f /tmp/dc-big.rec /tmp/dc-big.jsonl
    t0=$(date +%s.%N)
    timeout 200 "$B/ddptop" run --headless -n 1 --device cuda --backend nccl --record /tmp/dc-big.rec -- $big $extra \
        >/tmp/dc-big.txt 2>&1; rc=$?
    t1=$(date +%s.%N)
    "$B/ddptop" export /tmp/dc-big.rec --jsonl /tmp/dc-big.jsonl >/dev/null 2>&1
    tp=$(python3 tests/gpu/throughput_row.py /tmp/dc-big.jsonl 2>&1); rt=$?
    if [ $rc -eq 0 ] && [ $rt -eq 0 ]; then
        row "e2e 784-4096-4096-10 b512, $name" "$tp; $(echo "$t1 $t0" | awk '{printf "%.2f s", $1-$2}')"
        case $name in "telemetry on") SPS_ON+=("${tp%% *}");; "telemetry off") SPS_OFF+=("${tp%% *}");; esac
    else row "e2e 784-4096-4096-10 b512, $name" "FAIL: exit $rc: $(echo "$tp" | tail -1 | cut -c1-60) $(tail -1 /tmp/dc-big.txt | cut -c1-60)"; fi
done
if [ ${#SPS_ON[@]} -eq 3 ] && [ ${#SPS_OFF[@]} -eq 3 ]; then
    row "e2e telemetry A/B (medians of 3)" "$(printf '%s\n' "${SPS_ON[@]}" | sort -g | sed -n 2p) on, $(printf '%s\n' "${SPS_OFF[@]}" | sort -g | sed -n 2p) off steps/s: $(
        printf '%s %s' "$(printf '%s\n' "${SPS_ON[@]}" | sort -g | sed -n 2p)" "$(printf '%s\n' "${SPS_OFF[@]}" | sort -g | sed -n 2p)" |
        awk '{printf "%.2f%% fewer with telemetry", 100 * (1 - $1 / $2)}')"
fi
workers_left && { row "processes" "FAIL: ddptop-worker left"; kill_ours; }

# a torch DDP script, unchanged, under ddptop with the torch adapter: the
# lesson script on the GPU with NCCL (one rank per GPU), end to end: it exits
# 0, says hello as nccl on cuda, its steps carry a finite loss and the GPU's
# memory, its DDP buckets are reported, no python rank is left
py_left() {
    local p
    for p in $(pgrep '^python'); do
        { tr '\0' '\n' </proc/$p/environ; } 2>/dev/null | grep -qx "DDPTOP_TEST_TAG=$DDPTOP_TEST_TAG" && echo "$p"
    done
}
if ! python3 -c 'import torch, zmq, msgpack, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    row "e2e torch script, nccl" "skipped: python3 has no torch with CUDA (or no pyzmq/msgpack)"
else
    ngpu=$(python3 -c 'import torch; print(torch.cuda.device_count())')
    rm -rf /tmp/dc-py.rec /tmp/dc-py.jsonl /tmp/dc-py-ck
    DDPTOP_WORKER=$PWD/workers/python/ddptop-worker-py DDPTOP_PYTHON=python3 DDPTOP_CKPT_DIR=/tmp/dc-py-ck \
        timeout 300 "$B/ddptop" run --headless -n "$ngpu" --device cuda --record /tmp/dc-py.rec -- \
        examples/ddp_basics.py --device cuda --data synthetic --steps 300 --out /tmp/dc-py-model.pt >/tmp/dc-py.txt 2>&1
    rc=$?
    tail -3 /tmp/dc-py.txt
    "$B/ddptop" export /tmp/dc-py.rec --jsonl /tmp/dc-py.jsonl >/dev/null 2>&1
    python3 - /tmp/dc-py.jsonl "$ngpu" >/tmp/dc-pyrow.txt 2>&1 <<'PYEOF'
import json, math, sys
ms = [json.loads(l) for l in open(sys.argv[1])]
n = int(sys.argv[2])
of = lambda k: [m for m in ms if m.get("k") == k]
h = of("hello")
assert len(h) == n and all(x["backend"] == "nccl" and x["device"].startswith("cuda") for x in h), h
steps = [m for m in of("step") if m["r"] == 0]
assert len(steps) == 300 and all(math.isfinite(s["loss"]) for s in steps), len(steps)
assert steps[-1]["dev_mem"] > 0 and steps[-1]["dev_mem_total"] > 0, steps[-1]
coll = [c for c in of("coll") if c["bucket"] >= 0 and c["r"] == 0]
# timed by CUDA events (workers/python/ddptop/compat.py): start = enqueue, done = start + device time
assert coll and all(c["enq"] == c["start"] < c["done"] for c in coll), len(coll)
us = sorted((c["done"] - c["start"]) / 1e3 for c in coll)
assert [b["status"] for b in of("bye")] == [0] * n
torch_v = h[0]["version"].split(" torch ")[-1].split()[0]
print(f"torch {torch_v}, {n} rank(s), 300 steps, loss {steps[-1]['loss']:.3f}, {len(coll)} bucket all-reduces "
      f"(median {us[len(us) // 2]:.0f} us, CUDA events), GPU memory {steps[-1]['dev_mem'] / 2**20:.0f} MiB")
PYEOF
    rt=$?
    if [ $rc -ne 0 ]; then row "e2e torch script, nccl" "FAIL: exit $rc: $(tail -1 /tmp/dc-py.txt | cut -c1-90)"
    elif [ $rt -ne 0 ]; then row "e2e torch script, nccl" "FAIL: $(tail -1 /tmp/dc-pyrow.txt | cut -c1-100)"
    elif sleep 1; [ -n "$(py_left)" ]; then
        row "e2e torch script, nccl" "FAIL: python ranks left"; for p in $(py_left); do kill -9 "$p"; done
    else row "e2e torch script, nccl" "$(cat /tmp/dc-pyrow.txt)"; fi
fi

# ---- the table ---------------------------------------------------------------
say "summary ($(date -u +%Y-%m-%dT%H:%MZ), $(( $(date +%s) - t_start )) s)"
for r in "${RESULTS[@]}"; do printf '%-46s %s\n' "${r%%|*}" "${r#*|}"; done
[ $FAILED -eq 0 ] && echo "device checks: all passed" || echo "device checks: FAILURES above"
exit $FAILED
