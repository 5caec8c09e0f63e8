"""Compare two checkpoints' model.safetensors tensor by tensor.

    python3 tests/gpu/ckpt_compare.py A/model.safetensors B/model.safetensors MAXREL

Reads the safetensors layout itself (8-byte little-endian header length,
JSON header, raw little-endian data), standard library only, so it runs on
the GPU machine and here alike. Prints the largest relative difference,
max|a-b| / max|b| over each tensor, and exits 1 when it is over MAXREL, when
the tensor names, dtypes or shapes differ, or when a value is not finite.
"""
import array
import json
import math
import struct
import sys

FORMATS = {"F32": "f", "F64": "d", "I64": "q", "I32": "i"}


def load(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack_from("<Q", blob, 0)
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        fmt = FORMATS.get(t["dtype"])
        if fmt is None:
            raise SystemExit(f"{path}: tensor {name}: dtype {t['dtype']} not compared")
        a = array.array(fmt)
        lo, hi = t["data_offsets"]
        a.frombytes(blob[8 + n + lo:8 + n + hi])
        if sys.byteorder != "little":
            a.byteswap()
        out[name] = (t["dtype"], tuple(t["shape"]), a)
    return out


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__.strip().splitlines()[2].strip())
    a, b, maxrel = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
    if sorted(a) != sorted(b):
        print(f"tensor names differ: {sorted(a)} vs {sorted(b)}")
        return 1
    worst, worst_name = 0.0, ""
    for name in sorted(a):
        (da, sa, va), (db, sb, vb) = a[name], b[name]
        if (da, sa) != (db, sb):
            print(f"{name}: {da}{list(sa)} vs {db}{list(sb)}")
            return 1
        if not all(math.isfinite(x) for x in va) or not all(math.isfinite(x) for x in vb):
            print(f"{name}: a value is not finite")
            return 1
        scale = max((abs(x) for x in vb), default=0.0) or 1.0
        rel = max((abs(x - y) for x, y in zip(va, vb)), default=0.0) / scale
        if rel > worst:
            worst, worst_name = rel, name
    print(f"{len(a)} tensors, largest relative difference {worst:.2e} ({worst_name or 'none'})")
    return 0 if worst <= maxrel else 1


if __name__ == "__main__":
    sys.exit(main())
