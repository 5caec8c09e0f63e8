# tests/scenario/python/lib_py.sh — torch scripts under ddptop, for the
# python tests (sourced after tests/lib.sh). Skips without torch.
"$PY" -c 'import torch' 2>/dev/null || skip "no torch for $PY"
export DDPTOP_PYTHON=$PY
# The launch, in one place: today the adapter runs as DDPTOP_WORKER and the
# script follows `--` (ddptop's own options before it), e.g.
#   py_run -n 2 --headless -- examples/ddp_basics.py --epochs 1
PY_WORKER=$PWD/workers/python/ddptop-worker-py
py_run() { DDPTOP_WORKER=$PY_WORKER "$DDPTOP" run "$@"; }
# The same as a shell line, for tmux panes.
py_run_line() { echo "DDPTOP_WORKER='$PY_WORKER' DDPTOP_PYTHON='$PY' '$DDPTOP' run $*"; }
# This run's torch ranks (python processes carrying DDPTOP_TEST_TAG).
our_ranks() {
    local p
    for p in $(pgrep '^python'); do
        { tr '\0' '\n' </proc/$p/environ; } 2>/dev/null | grep -qx "DDPTOP_TEST_TAG=$DDPTOP_TEST_TAG" && echo "$p"
    done
}
no_ranks() { [ -z "$(our_ranks)" ]; }
