# tests/lib_py.sh — torch scripts run by ddptop, for the python tests
# (sourced after tests/lib.sh; tests/scenario/python/lib_py.sh adds the tmux
# helpers). One place launches, so the launch can change in one place.
"$PY" -c 'import torch' 2>/dev/null || skip "no torch for $PY"
case $PY in */*) case $PY in /*) ;; *) PY=$PWD/$PY;; esac;; esac # ranks may run elsewhere
export DDPTOP_PYTHON=$PY
# The adapter as a DDPTOP_WORKER program: the script follows `--` (ddptop's
# own options before it), and trainer-style options such as --fault SPEC may
# stand before the script, e.g.
#   py_run -n 2 --headless -- examples/ddp_basics.py --epochs 1
PY_WORKER=$PWD/workers/python/ddptop-worker-py
py_run() { DDPTOP_WORKER=$PY_WORKER "$DDPTOP" run "$@"; }
# The same, exec'd: run it in the background and $! is ddptop's pid.
py_exec() { DDPTOP_WORKER=$PY_WORKER exec "$DDPTOP" run "$@"; }
# The same as a shell line, for tmux panes.
py_run_line() { echo "DDPTOP_WORKER='$PY_WORKER' DDPTOP_PYTHON='$PY' '$DDPTOP' run $*"; }
# The comm hooks to test: cxx (the C++ one, built by make against the torch
# of /usr/bin/python3 when libtorch's headers are there) and python (forced
# with DDPTOP_PY_HOOK=python); cxx only where $PY runs that very torch.
py_hooks() {
    local where='import importlib.util as u; print(u.find_spec("torch").origin)'
    if [ -f /usr/include/torch/csrc/distributed/c10d/comm.hpp ] && [ -f /usr/include/pybind11/pybind11.h ] &&
       [ "$("$PY" -c "$where" 2>/dev/null)" = "$(/usr/bin/python3 -c "$where" 2>/dev/null)" ]; then
        echo cxx python
    else
        echo python
    fi
}
# This run's torch ranks (python -m ddptop processes carrying DDPTOP_TEST_TAG).
our_ranks() {
    local p
    for p in $(pgrep -f -- '-m ddptop'); do
        { tr '\0' '\n' </proc/$p/environ; } 2>/dev/null | grep -qx "DDPTOP_TEST_TAG=$DDPTOP_TEST_TAG" && echo "$p"
    done
}
no_ranks() { [ -z "$(our_ranks)" ]; }
# py_rank_pid R: the process of rank R.
py_rank_pid() {
    local p
    for p in $(our_ranks); do
        tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx "RANK=$1" && { echo "$p"; return 0; }
    done
    return 1
}
# py_rec NAME SCRIPT ARGS: `ddptop run -n 2 --headless --json` of a script,
# recorded: $TMP/NAME/{out.jsonl,rec.jsonl,logs/,rc}; rc_of NAME: its exit status.
py_rec() {
    local name=$1; shift
    local d=$TMP/$name
    mkdir -p "$d"
    timeout 120 "$DDPTOP" run -n 2 --python "$PY" --headless --json --record "$d/rec" --log-dir "$d/logs" \
        "$@" >"$d/out.jsonl" 2>&1
    echo $? >"$d/rc"
    "$DDPTOP" export "$d/rec" --jsonl "$d/rec.jsonl" >/dev/null 2>&1 || die "$name: export failed"
}
rc_of() { cat "$TMP/$1/rc"; }
# py_venv DIR [torch]: a venv of $PY's Python at DIR, without pip and
# without the system's packages: nothing but the standard library, or with
# `torch` everything $PY sees in its site directories (torch and what it
# needs) except pyzmq and msgpack, linked in through a .pth file: a user's
# training environment that has torch and nothing of ddptop's.
py_venv() {
    local dir=$1 what=${2:-}
    "$PY" -m venv --without-pip "$dir" >/dev/null 2>&1 || skip "$PY cannot make a venv"
    [ "$what" = torch ] || return 0
    mkdir -p "$dir/torch-only"
    "$PY" - "$dir/torch-only" <<'PYEOF' || die "py_venv: cannot link $PY's packages"
import os, site, sys
out = sys.argv[1]
dirs = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]
blocked = ("zmq", "pyzmq", "msgpack")
seen = set()
for d in dirs:
    for name in sorted(os.listdir(d)):
        stem = name.split(".")[0].split("-")[0].lower()
        if stem in blocked or name in seen or name.endswith(".pth") or name == "__pycache__":
            continue
        seen.add(name)
        os.symlink(os.path.join(d, name), os.path.join(out, name))
PYEOF
    local sp
    sp=$(echo "$dir"/lib/python3*/site-packages)
    echo "$dir/torch-only" >"$sp/torch_only.pth"
    "$dir/bin/python" -c 'import torch' 2>/dev/null || die "py_venv: torch does not import in $dir"
    local m
    for m in zmq msgpack; do
        ! "$dir/bin/python" -c "import $m" 2>/dev/null || die "py_venv: $m imports in $dir"
    done
}
