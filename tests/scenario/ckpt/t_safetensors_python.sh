#!/usr/bin/env bash
# t_safetensors_python.sh — our .safetensors files against Python's reference
# implementation, both ways:
#   tool_st write-mlp -> safetensors.numpy.load_file / safe_open(...).metadata()
#   safetensors.numpy.save_file -> tool_st dump (our reader)
# Exit 0 pass, 77 skip (no Python safetensors), anything else fails.
set -u
BUILD=${BUILD:-build}
PY=${PY:-$BUILD/pyenv/bin/python}
TOOL=$BUILD/tests/tool_st

if ! "$PY" -c 'import safetensors, numpy' >/dev/null 2>&1; then
    echo "skip: '$PY' cannot import safetensors and numpy (make pydeps)"
    exit 77
fi
if [ ! -x "$TOOL" ]; then
    echo "FAIL: $TOOL is not built"
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 1. C writes, Python reads.
"$TOOL" write-mlp mlp:784,256,256,10 7 "$tmp/model.safetensors" || { echo "FAIL: tool_st write-mlp"; exit 1; }
"$TOOL" dump "$tmp/model.safetensors" >"$tmp/dump.txt" || { echo "FAIL: tool_st dump of our own file"; exit 1; }
"$PY" - "$tmp/model.safetensors" "$tmp/dump.txt" <<'PYEOF' || exit 1
import sys, math
import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file

path, dump = sys.argv[1], sys.argv[2]
t = load_file(path)
want = {"0.weight": (256, 784), "0.bias": (256,), "2.weight": (256, 256), "2.bias": (256,),
        "4.weight": (10, 256), "4.bias": (10,)}
fail = []
if set(t) != set(want):
    fail.append(f"names {sorted(t)} != {sorted(want)}")
for k, shape in want.items():
    if k in t:
        if t[k].shape != shape: fail.append(f"{k}: shape {t[k].shape}, want {shape}")
        if t[k].dtype != np.float32: fail.append(f"{k}: dtype {t[k].dtype}")
        bound = 1 / math.sqrt(shape[-1] if k.endswith("weight") else {"0": 784, "2": 256, "4": 256}[k[0]])
        if np.abs(t[k]).max() > bound * (1 + 1e-6): fail.append(f"{k}: values beyond +-{bound}")
seen = 0
for line in open(dump):
    name, dtype, shape, s = line.rstrip("\n").split("\t")
    seen += 1
    if name not in t: fail.append(f"dump has {name}, python does not"); continue
    py_shape = "[" + ",".join(str(d) for d in t[name].shape) + "]"
    if dtype != "F32" or shape != py_shape: fail.append(f"{name}: dump says {dtype} {shape}, python {py_shape}")
    py_sum = float(t[name].astype(np.float64).sum())
    if not math.isclose(float(s), py_sum, rel_tol=1e-9, abs_tol=1e-9):
        fail.append(f"{name}: sum {s} (tool_st) vs {py_sum!r} (python)")
if seen != len(want): fail.append(f"dump listed {seen} tensors")
with safe_open(path, framework="numpy") as f:
    meta = f.metadata()
    if meta != {"format": "pt"}: fail.append(f"metadata {meta!r}")
    if list(f.keys()) != sorted(want): fail.append(f"keys {list(f.keys())}")
if fail:
    print("FAIL: python reading our file:\n  " + "\n  ".join(fail)); sys.exit(1)
print("ok: python reads tool_st's file:", len(t), "tensors, metadata", meta)
PYEOF

# 2. Python writes, C reads.
"$PY" - "$tmp/py.safetensors" "$tmp/py_sums.txt" <<'PYEOF' || { echo "FAIL: python could not write"; exit 1; }
import sys
import numpy as np
from safetensors.numpy import save_file
rng = np.random.default_rng(3)
t = {"w": rng.standard_normal((3, 5)).astype(np.float32),
     "ids": np.arange(-3, 4, dtype=np.int64),
     "bytes": np.arange(7, dtype=np.uint8),
     "d": np.array([1.5, -2.25], dtype=np.float64),
     "i": np.array([[1, 2], [3, 4]], dtype=np.int32),
     "scalar": np.array(2.5, dtype=np.float32),
     "name with \"quotes\" and é": np.ones((2,), dtype=np.float32)}
save_file(t, sys.argv[1], metadata={"format": "pt", "step": "12"})
with open(sys.argv[2], "w") as f:
    for k, v in t.items():
        f.write(f"{k}\t{repr(float(v.astype(np.float64).sum()))}\t[{','.join(map(str, v.shape))}]\n")
PYEOF
"$TOOL" dump "$tmp/py.safetensors" >"$tmp/c_dump.txt" || { echo "FAIL: tool_st cannot read python's file"; exit 1; }
"$PY" - "$tmp/py_sums.txt" "$tmp/c_dump.txt" <<'PYEOF' || exit 1
import sys, math
want = {}
for line in open(sys.argv[1], encoding="utf-8"):
    k, s, shape = line.rstrip("\n").split("\t")
    want[k] = (float(s), shape)
got = {}
for line in open(sys.argv[2], encoding="utf-8"):
    k, dtype, shape, s = line.rstrip("\n").split("\t")
    got[k] = (float(s), shape)
fail = []
if set(got) != set(want): fail.append(f"names {sorted(got)} vs {sorted(want)}")
for k in want:
    if k in got:
        if got[k][1] != want[k][1]: fail.append(f"{k}: shape {got[k][1]} vs {want[k][1]}")
        if not math.isclose(got[k][0], want[k][0], rel_tol=1e-9, abs_tol=1e-9):
            fail.append(f"{k}: sum {got[k][0]} vs {want[k][0]}")
if fail:
    print("FAIL: our reader on python's file:\n  " + "\n  ".join(fail)); sys.exit(1)
print("ok: tool_st reads python's file:", len(got), "tensors")
PYEOF
echo "pass"
