# Which interpreter runs a script, and what ddptop says when it cannot:
# a missing script is said first (before any word about the interpreter,
# even a missing one); `python3` on PATH without torch is one line, exit 2,
# naming it (path and version) and the interpreters found that have torch
# (later on PATH, a venv in the working directory) with the --python to
# use, or saying none was found (no python3 on PATH at all: the same
# search, here the active $VIRTUAL_ENV); an environment with torch alone but no
# libzmq for ddptop names pyzmq and the interpreter; and where libzmq cannot
# be loaded an interpreter with pyzmq still runs the job through it.
. tests/lib.sh
. tests/lib_py.sh
py_venv "$TMP/proj/.venv" torch
py_venv "$TMP/bare"
TPY=$TMP/proj/.venv/bin/python3 NPY=$TMP/bare/bin/python3
tver=$("$TPY" -c 'import sys; print(sys.version.split()[0])')
nver=$("$NPY" -c 'import sys; print(sys.version.split()[0])')
unset PYTHONPATH VIRTUAL_ENV CONDA_PREFIX DDPTOP_WORKER

# one_line_2 WHAT WANT CMD...: exit 2, one line on stderr/stdout together, saying WANT
one_line_2() {
    local what=$1 want=$2; shift 2
    "$@" >"$TMP/err" 2>&1
    local rc=$?
    [ $rc -eq 2 ] || { cat "$TMP/err"; die "$what: exit $rc, not 2"; }
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || { cat "$TMP/err"; die "$what: not one line"; }
    grep -qF -- "$want" "$TMP/err" || { cat "$TMP/err"; die "$what: does not say \"$want\""; }
}
# a missing script first: with no torch on PATH, and with a --python that is not there
one_line_2 "missing script, python3 without torch" "ddptop: $TMP/nope.py: no such script" \
    env PATH="$TMP/bare/bin" "$DDPTOP" run -n 2 --headless "$TMP/nope.py"
one_line_2 "missing script, missing --python" "ddptop: $TMP/nope.py: no such script" \
    "$DDPTOP" run -n 2 --headless --python "$TMP/no-python" "$TMP/nope.py"
one_line_2 "directory without __main__.py" "ddptop: $TMP/bare: a directory without __main__.py" \
    env PATH="$TMP/bare/bin" "$DDPTOP" run -n 2 --headless "$TMP/bare"

# python3 on PATH has no torch; a later one on PATH has
one_line_2 "no torch, one later on PATH" \
    "ddptop: python3: $NPY (Python $nver) cannot import torch; these can: $TPY (Python $tver): use --python $TPY" \
    env PATH="$TMP/bare/bin:$TMP/proj/.venv/bin" "$DDPTOP" run -n 2 --headless examples/ddp_basics.py
# ... or a venv in the working directory (a script named by its full path)
(cd "$TMP/proj" && one_line_2 "no torch, a venv here" \
    "ddptop: python3: $NPY (Python $nver) cannot import torch; these can: ./.venv/bin/python (Python $tver): use --python ./.venv/bin/python" \
    env PATH="$TMP/bare/bin" "$DDPTOP" run -n 2 --headless "$OLDPWD/examples/ddp_basics.py") || exit 1
# ... or none anywhere; --python named in the line when it was given
one_line_2 "no torch anywhere" \
    "ddptop: --python $TMP/bare/bin/python: $TMP/bare/bin/python (Python $nver) cannot import torch, nor can any python3 on PATH" \
    env PATH="$TMP/bare/bin" "$DDPTOP" run -n 2 --headless --python "$TMP/bare/bin/python" examples/ddp_basics.py
# no python3 on PATH at all: the active venv ($VIRTUAL_ENV) has torch
mkdir -p "$TMP/nopy"
one_line_2 "no python3, a venv active" \
    "ddptop: python3: not found on PATH; these have torch: $TMP/proj/.venv/bin/python (Python $tver): use --python $TMP/proj/.venv/bin/python" \
    env PATH="$TMP/nopy" VIRTUAL_ENV="$TMP/proj/.venv" "$DDPTOP" run -n 2 --headless examples/ddp_basics.py
one_line_2 "no python3 at all" "ddptop: --python python3: not found on PATH (name one with --python PATH)" \
    env PATH="$TMP/nopy" "$DDPTOP" run -n 2 --headless examples/ddp_basics.py
[ -z "$(our_workers)" ] && no_ranks || die "a refused command line started ranks"

# torch alone and no libzmq to load: pyzmq, named with the interpreter
one_line_2 "no libzmq, no pyzmq" \
    "has no pyzmq: install the package pyzmq into it ($TPY -m pip install pyzmq)" \
    env PATH="$TMP/proj/.venv/bin:$PATH" DDPTOP_LIBZMQ="$TMP/no-libzmq.so" \
    "$DDPTOP" run -n 2 --headless examples/ddp_basics.py --data synthetic --steps 5

# no libzmq to load but pyzmq there: the job runs through pyzmq
if "$PY" -c 'import zmq' 2>/dev/null; then
    out=$TMP/pyzmq.jsonl
    DDPTOP_LIBZMQ="$TMP/no-libzmq.so" timeout 120 "$DDPTOP" run -n 2 --python "$PY" --headless --json \
        --log-dir "$TMP/logs" examples/ddp_basics.py --data synthetic --steps 20 --out "$TMP/m.pt" >"$out" 2>&1
    rc=$?
    [ $rc -eq 0 ] || { cat "$out" "$TMP"/logs/*; die "through pyzmq: exit $rc"; }
    grep -q '"verdict":"job done: all 2 ranks ended cleanly"' "$out" || { cat "$out"; die "through pyzmq: no clean end"; }
    grep -q '"step":20' "$out" || { cat "$out"; die "through pyzmq: step 20 never reached ddptop"; }
    echo "PASS: through pyzmq where libzmq.so.5 cannot be loaded"
fi
echo "PASS: the interpreter for a script: a missing script first, no torch named with those that have it"
