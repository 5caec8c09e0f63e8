# t_py_fails_alike's claim on torch 2.x, where the adapter's Python comm hook
# runs (the C++ one is built for Debian's torch 1.13) and torch's own texts
# differ: a bucket's failed all-reduce is raised from backward as Gloo's
# own error, not as torch's wrapping of the hook's callback ("Got the
# following error when running the callback: ..."), and an uncaught
# exception is printed through torch 2.x's excepthook ("[rankN]: " before
# every line), as bare. Needs an interpreter with torch 2.x: TORCH2_PY=PATH
# (or TORCH_PY naming one, when t_py_fails_alike itself runs on it);
# skipped, saying so, without one.
. tests/lib.sh
torch2_py || skip "no torch 2.x: set TORCH2_PY=/path/to/python (python3 -m venv V && V/bin/pip install torch)"
[ "$PY2" != "$PY" ] || skip "TORCH_PY is torch 2.x: t_py_fails_alike itself checks this claim on it"
rm -rf "$TMP"       # the test below makes its own
TORCH_PY=$PY2 exec bash tests/scenario/python/t_py_fails_alike.sh
