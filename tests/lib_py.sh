# tests/lib_py.sh — a torch script run by ddptop, for the tests of the
# Python screen and hang verdicts (sourced after tests/lib.sh). One
# function launches, so the tests can switch to `ddptop run SCRIPT.py` in
# one place.
"$PY" -c 'import torch' 2>/dev/null || skip "no torch for $PY"
PY_WORKER=$PWD/workers/python/ddptop-worker-py
case $PY in */*) case $PY in /*) ;; *) PY=$PWD/$PY;; esac;; esac # ranks may run elsewhere
# py_run DDPTOP-RUN-OPTIONS... -- SCRIPT.py ARGS...: execs ddptop, so run it
# in the background (its $! is ddptop's pid) or in a subshell.
py_run() { DDPTOP_WORKER=$PY_WORKER DDPTOP_PYTHON=$PY exec "$DDPTOP" run "$@"; }
# the command line of py_run, for a tmux pane
py_run_cmd() { echo "DDPTOP_WORKER='$PY_WORKER' DDPTOP_PYTHON='$PY' '$DDPTOP' run $*"; }
# The Python ranks of this test run (python -m ddptop, with our tag).
our_py_ranks() {
    local p
    for p in $(pgrep -f -- '-m ddptop'); do
        { tr '\0' '\n' </proc/$p/environ; } 2>/dev/null | grep -qx "DDPTOP_TEST_TAG=$DDPTOP_TEST_TAG" && echo "$p"
    done
}
no_py_ranks() { [ -z "$(our_py_ranks)" ]; }
# py_rank_pid R: the process of rank R.
py_rank_pid() {
    local p
    for p in $(our_py_ranks); do
        tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx "RANK=$1" && { echo "$p"; return 0; }
    done
    return 1
}
