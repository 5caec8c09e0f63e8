#!/usr/bin/env bash
# tests/run.sh [PATTERN] — run every test (or those whose name contains
# PATTERN) and print "N passed, N failed" last. `make test T=PATTERN`.
#
# C unit tests: tests/unit/test_*.c, built as build/tests/test_* (each
#   prints PASS:/FAIL: lines per case); test_gpu* from tests/gpu/.
# Scenario tests: tests/scenario/<subsystem>/t_*.sh (each one case; exit 0
#   passes, 77 skips). PATTERN matches "screen/t_tui_keys" too.
#   They run TEST_JOBS at a time (default 3: they mostly wait on their
#   jobs' pace, timeouts and ranks), each with its own DDPTOP_TEST_TAG
#   (RUN.NAME), so a test's no-leftover checks see only its own workers;
#   each result is printed when it ends, the counts last.
# Env: BUILD (default build), PY (python with msgpack, numpy, safetensors),
#   TEST_JOBS (scenario tests at once; 1: one after the other).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD
export PY=${PY:-$BUILD/pyenv/bin/python}
export LANG=C.UTF-8
export OPENBLAS_NUM_THREADS=1
export DDPTOP_TEST_TAG="run-$$-$RANDOM"
. tests/lib_tag.sh
pat=${1:-}
jobs_max=${TEST_JOBS:-3}
case $jobs_max in ''|*[!0-9]*|0) echo "run.sh: TEST_JOBS=$jobs_max: want a count of 1 or more"; exit 2;; esac
pass=0; fail=0; skip=0; ran=0
log=$BUILD/test-logs; rm -rf "$log"; mkdir -p "$log"

for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    case "$t" in *.o|*.d) continue;; esac
    name=$(basename "$t")
    case "$name" in *"$pat"*) ;; *) continue;; esac
    ran=$((ran + 1))
    out=$log/$name.out
    timeout 300 "$t" >"$out" 2>&1; rc=$?
    p=$(grep -c '^PASS:' "$out"); f=$(grep -c '^FAIL:' "$out")
    pass=$((pass + p)); fail=$((fail + f))
    grep -E '^(PASS|FAIL):' "$out" | sed 's/^/  /'
    if [ "$f" -gt 0 ]; then grep -v '^PASS:' "$out" | head -40 | sed 's/^/    | /'; fi
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
        fail=$((fail + 1)); echo "  FAIL: $name exited $rc"; tail -20 "$out" | sed 's/^/    | /'
    fi
done

# One scenario test: its result block printed in one write when it ends,
# its exit code kept for the counts.
scenario() {
    local t=$1 name=$2 out=$log/$2.out start rc secs
    start=$(date +%s)
    DDPTOP_TEST_TAG="$DDPTOP_TEST_TAG.$name" timeout 300 bash "$t" >"$out" 2>&1; rc=$?
    secs=$(( $(date +%s) - start ))
    {
        if [ $rc -eq 0 ]; then echo "  PASS: $name (${secs}s)"
        elif [ $rc -eq 77 ]; then echo "  SKIP: $name: $(tail -1 "$out")"
        else echo "  FAIL: $name (exit $rc, ${secs}s)"; tail -30 "$out" | sed 's/^/    | /'
        fi
    } >"$log/$name.res"
    echo $rc >"$log/$name.rc"
    cat "$log/$name.res"
}

# The slowest (each over half a minute on a busy 2-core machine) start
# first, so none of them begins near the end and runs on alone.
slow="python/t_py_diag_hang python/t_py_fails_alike san/t_san_hostile run/t_load_hang
python/t_py_diag_nosync cmd/t_help_docs python/t_py_report_key python/t_py_run"
slow=$(echo $slow)
order=()
for s in $slow; do [ -f "tests/scenario/$s.sh" ] && order+=("tests/scenario/$s.sh"); done
for t in tests/scenario/*/t_*.sh; do
    key=${t#tests/scenario/}
    case " $slow " in *" ${key%.sh} "*) ;; *) order+=("$t");; esac
done
names=()
for t in "${order[@]}"; do
    [ -f "$t" ] || continue
    name=$(basename "$t" .sh)
    case "${t#tests/scenario/}" in *"$pat"*) ;; *) continue;; esac
    ran=$((ran + 1))
    names+=("$name")
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
    scenario "$t" "$name" &
done
wait
for name in "${names[@]+"${names[@]}"}"; do
    rc=$(cat "$log/$name.rc" 2>/dev/null || echo 1)
    if [ "$rc" -eq 0 ]; then pass=$((pass + 1))
    elif [ "$rc" -eq 77 ]; then skip=$((skip + 1))
    else fail=$((fail + 1))
    fi
done

# Leftover workers of this run mean a test leaked processes: a failure too.
# (Workers carry DDPTOP_TEST_TAG, so other jobs on the machine do not count.)
left=$(run_workers)
if [ -n "$left" ]; then
    fail=$((fail + 1)); echo "  FAIL: leftover ddptop-worker processes: $left"
    kill -9 $left 2>/dev/null
fi

if [ -n "$pat" ] && [ $ran -eq 0 ]; then echo "no test matches '$pat'"; fail=$((fail + 1)); fi
if [ $skip -gt 0 ]; then echo "$pass passed, $fail failed, $skip skipped"; else echo "$pass passed, $fail failed"; fi
[ $fail -eq 0 ]
