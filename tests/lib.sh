# tests/lib.sh — helpers for scenario tests (sourced).
set -u
BUILD=${BUILD:-build}
PY=${PY:-$BUILD/pyenv/bin/python}
case $BUILD in /*) DDPTOP=$BUILD/ddptop;; *) DDPTOP=$PWD/$BUILD/ddptop;; esac
export LANG=C.UTF-8 OPENBLAS_NUM_THREADS=1
TMP=$(mktemp -d /tmp/ddptop-test.XXXXXX)
trap 'cleanup_all' EXIT
CLEANUPS=()
cleanup_all() {
    for c in "${CLEANUPS[@]+"${CLEANUPS[@]}"}"; do eval "$c" >/dev/null 2>&1; done
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
