#!/usr/bin/env bash
# tests/kernels.sh — the numeric tests under other kernels on this CPU
# (`make test-kernels`; CI does not run it): each row sets one of
#   OPENBLAS_CORETYPE     OpenBLAS's sgemm kernel (ddptop's GEMMs and torch's FP32 ones)
#   ATEN_CPU_CAPABILITY   torch's own vectorized loops (sums, softmax, SGD)
#   ONEDNN_MAX_CPU_ISA    oneDNN's kernel for torch's autocast bf16 GEMMs
# (the others unset: the library's own choice), runs the tests whose names
# contain one of KERNEL_TESTS through tests/run.sh, and prints a table of
# pass/fail per setting, then "N settings passed, N failed" last. A kernel
# this CPU cannot run (by /proc/cpuinfo's flags) is listed as skipped.
# Env: BUILD, PY as tests/run.sh; KERNEL_TESTS (space-separated patterns);
# KERNEL_ROWS (space-separated VAR=VALUE or "default"; default: every row).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD PY=${PY:-$BUILD/pyenv/bin/python}
tests=${KERNEL_TESTS:-test_model test_bf16 test_optim test_shm_reduce test_comm_bf16 t_precision_torch t_ddp_equivalence t_grad_accum t_grad_bf16 t_resume_precision t_gpu_emu}
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "

# needs ROW: the cpuinfo flags a row's kernel executes
needs() {
    case $1 in
        OPENBLAS_CORETYPE=Prescott) echo "sse3" ;;  # cpuinfo says pni
        OPENBLAS_CORETYPE=Nehalem) echo "sse4_2" ;;
        OPENBLAS_CORETYPE=Sandybridge) echo "avx" ;;
        OPENBLAS_CORETYPE=Haswell|OPENBLAS_CORETYPE=Zen|ATEN_CPU_CAPABILITY=avx2|ONEDNN_MAX_CPU_ISA=AVX2) echo "avx2 fma" ;;
        OPENBLAS_CORETYPE=SkylakeX|ATEN_CPU_CAPABILITY=avx512|ONEDNN_MAX_CPU_ISA=AVX512_CORE) echo "avx512f avx512bw avx512vl avx512dq" ;;
        OPENBLAS_CORETYPE=Cooperlake|ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16) echo "avx512f avx512bw avx512vl avx512_bf16" ;;
        ONEDNN_MAX_CPU_ISA=AVX512_CORE_AMX) echo "avx512_bf16 amx_bf16 amx_tile" ;;
        *) echo "" ;;
    esac
}

rows=${KERNEL_ROWS:-default OPENBLAS_CORETYPE=Prescott OPENBLAS_CORETYPE=Sandybridge OPENBLAS_CORETYPE=Haswell OPENBLAS_CORETYPE=Zen OPENBLAS_CORETYPE=SkylakeX OPENBLAS_CORETYPE=Cooperlake ATEN_CPU_CAPABILITY=default ATEN_CPU_CAPABILITY=avx2 ATEN_CPU_CAPABILITY=avx512 ONEDNN_MAX_CPU_ISA=SSE41 ONEDNN_MAX_CPU_ISA=AVX2 ONEDNN_MAX_CPU_ISA=AVX512_CORE ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 ONEDNN_MAX_CPU_ISA=AVX512_CORE_AMX}
for r in $rows; do
    case $r in default|OPENBLAS_CORETYPE=?*|ATEN_CPU_CAPABILITY=?*|ONEDNN_MAX_CPU_ISA=?*) ;;
        *) echo "kernels.sh: KERNEL_ROWS entry '$r': want default or OPENBLAS_CORETYPE=, ATEN_CPU_CAPABILITY=, ONEDNN_MAX_CPU_ISA=VALUE"; exit 2 ;;
    esac
done
[ -n "$tests" ] || { echo "kernels.sh: KERNEL_TESTS is empty"; exit 2; }

log=$BUILD/kernel-logs; rm -rf "$log"; mkdir -p "$log"
table=()
ok_rows=0; bad_rows=0; skip_rows=0
for r in $rows; do
    miss=""
    for f in $(needs "$r"); do case $flags in *" $f "*) ;; *) miss="$miss $f" ;; esac; done
    [ "$r" = OPENBLAS_CORETYPE=Prescott ] && case $flags in *" pni "*) miss="" ;; esac
    if [ -n "$miss" ]; then
        table+=("$(printf '%-36s %-7s %s' "$r" skip "this CPU lacks$miss")")
        skip_rows=$((skip_rows + 1)); continue
    fi
    # one setting at a time: the others unset (the machine's own may be set)
    envs=(env -u OPENBLAS_CORETYPE -u ATEN_CPU_CAPABILITY -u ONEDNN_MAX_CPU_ISA -u DNNL_MAX_CPU_ISA)
    [ "$r" = default ] || envs+=("$r")
    p=0; f=0; failed=""; skipped=""
    out=$log/${r//[=\/]/_}.out
    : >"$out"
    for t in $tests; do
        "${envs[@]}" bash tests/run.sh "$t" >>"$out" 2>&1
        last=$(tail -n 1 "$out")
        case $last in
            *" passed, "*" failed"*) ;;
            *) echo "kernels.sh: tests/run.sh $t under $r did not end with its counts (see $out)"; exit 1 ;;
        esac
        tp=${last%% passed*}; tp=${tp##* }; tf=${last%% failed*}; tf=${tf##* }
        p=$((p + tp)); f=$((f + tf))
        [ "$tf" = 0 ] || failed="$failed $t"
        [ "$tp" != 0 ] || [ "$tf" != 0 ] || skipped="$skipped $t"
    done
    if [ "$f" = 0 ]; then
        table+=("$(printf '%-36s %-7s %s' "$r" pass "$p checks${skipped:+; skipped:$skipped}")")
        ok_rows=$((ok_rows + 1))
    else
        table+=("$(printf '%-36s %-7s %s' "$r" FAIL "$p passed, $f failed:$failed (log: $out)")")
        bad_rows=$((bad_rows + 1))
    fi
    echo "${table[${#table[@]}-1]}"
done
echo
echo "kernel sweep on $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); tests: $tests"
printf '%-36s %-7s %s\n' setting result detail
for l in "${table[@]}"; do echo "$l"; done
echo "$ok_rows settings passed, $bad_rows failed, $skip_rows skipped"
[ "$bad_rows" = 0 ]
