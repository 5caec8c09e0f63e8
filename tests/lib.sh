# tests/lib.sh — helpers for scenario tests (sourced).
set -u
BUILD=${BUILD:-build}
PY=${PY:-$BUILD/pyenv/bin/python}
# The torch tests (tests/scenario/python/) run under TORCH_PY when it is set:
# make test T=python/ TORCH_PY=/path/to/venv/bin/python (another torch, e.g. 2.x).
case $0 in */scenario/python/*) PY=${TORCH_PY:-$PY};; esac
# torch2_py: PY2, the interpreter for the tests of what torch 2.x alone has
# (its error texts, torch.compile): TORCH2_PY=PATH (make test T=py2
# TORCH2_PY=...), else $PY when its torch is 2.x; none: status 1 (the test
# skips, saying so). A TORCH2_PY without torch 2.x is an error.
torch2_py() {
    local p=${TORCH2_PY:-$PY} v
    case $p in */*) case $p in /*) ;; *) p=$PWD/$p;; esac;; esac
    v=$("$p" -c 'import torch; print(torch.__version__)' 2>/dev/null)
    if [ "${v%%.*}" -ge 2 ] 2>/dev/null; then PY2=$p; return 0; fi
    [ -z "${TORCH2_PY:-}" ] || die "TORCH2_PY=$TORCH2_PY: no torch 2.x there (torch '${v:-none}')"
    return 1
}
case $BUILD in /*) DDPTOP=$BUILD/ddptop;; *) DDPTOP=$PWD/$BUILD/ddptop;; esac
export LANG=C.UTF-8 OPENBLAS_NUM_THREADS=1
TMP=$(mktemp -d /tmp/ddptop-test.XXXXXX)
trap 'cleanup_all' EXIT
CLEANUPS=()
cleanup_all() {
    local rc=$?
    for c in "${CLEANUPS[@]+"${CLEANUPS[@]}"}"; do eval "$c" >/dev/null 2>&1; done
    # DDPTOP_TEST_KEEP=1: a failed test leaves its files for a look
    if [ "${DDPTOP_TEST_KEEP:-}" = 1 ] && [ $rc != 0 ] && [ $rc != 77 ]; then echo "kept $TMP"; return; fi
    rm -rf "$TMP"
}
die() { echo "FAIL: $*"; exit 1; }
skip() { echo "$*"; exit 77; }
# wait_for SECONDS CMD...: poll until CMD succeeds.
wait_for() {
    local t=$1; shift
    local end=$(( $(date +%s) + t ))
    while [ "$(date +%s)" -le "$end" ]; do "$@" && return 0; sleep 0.2; done
    return 1
}
# Workers started by this test run carry DDPTOP_TEST_TAG in their
# environment, so concurrent runs (or a user's own job) are not mistaken for
# leftovers.
export DDPTOP_TEST_TAG=${DDPTOP_TEST_TAG:-$$-$RANDOM}
. tests/lib_tag.sh
no_workers() { [ -z "$(our_workers)" ]; }
# ended_within SECS PID: waits up to SECS for PID (a job of this shell) to
# end and sets rc to its exit status; returns 1 while it still runs.
ended_within() {
    wait_for "$1" sh -c "! kill -0 $2 2>/dev/null" || return 1
    wait "$2"
    rc=$?
    return 0
}
# free_port [N]: a port P with P..P+N-1 (default 2) free on 127.0.0.1, below
# the kernel's ephemeral range (32768+), where Gloo's own ports live.
free_port() {
    local n=${1:-2} p k busy
    for _ in $(seq 1 100); do
        p=$((20000 + RANDOM % 12000))
        busy=0
        for k in $(seq 0 $((n - 1))); do
            (exec 3<>/dev/tcp/127.0.0.1/$((p + k))) 2>/dev/null && { busy=1; break; }
        done
        [ $busy = 0 ] && [ $((p + n)) -lt 32768 ] && { echo $p; return 0; }
    done
    echo 29999
}
