#!/usr/bin/env bash
# t_wire_python.sh — the C codec against Python's real msgpack, both ways.
#
# C -> Python: tool_wire encode-samples writes one frame per kind; Python
# unpacks each with msgpack's default settings (raw=False, strict_map_key)
# and checks every value, its type, and that keys are strings with "v","k"
# first. Python -> C: Python packs the same messages (keys in another order,
# unknown keys added, an unknown kind, malformed frames) and tool_wire decode
# must read them, or exit 2 with a reason.
# The adapter's own codec (workers/python/ddptop/_msgpack.py, for
# interpreters without msgpack) reads every C frame to the same values and
# packs the same messages to the C frame's bytes.
# Env: BUILD (build dir, default build), PY (python with msgpack).
# Exit 0 pass, 77 skip (no msgpack for $PY), anything else fail.
set -u
BUILD=${BUILD:-build}
PY=${PY:-python3}
TOOL=$BUILD/tests/tool_wire

if ! "$PY" -c 'import msgpack' 2>/dev/null; then
    echo "skip: $PY cannot import msgpack"
    exit 77
fi
if [ ! -x "$TOOL" ]; then
    echo "FAIL: $TOOL is not built"
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_wire_python.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

"$TOOL" encode-samples "$tmp" || { echo "FAIL: tool_wire encode-samples exited $?"; exit 1; }

"$PY" - "$tmp" "$TOOL" <<'PYEOF'
import math, os, subprocess, sys
import msgpack
sys.path.insert(0, "workers/python")
from ddptop import _msgpack

d, tool = sys.argv[1], sys.argv[2]
T = 1700000000123456789
VAL = b"\x00\x01\xffabc"
# Must match sample() in tests/tools/tool_wire.c. No "r" means the sender had none.
EXPECT = {
    "hello": dict(r=3, local_rank=1, world=4, local_world=2, pid=4242, host="n\u0153ud-7",
                  device="cuda:1", backend="nccl", precision="bf16", grad_dtype="fp32", version="ddptop 0.1.0 zmq 4.3.4",
                  dataset="fashion-mnist", model="mlp:784,256,256,10", params=269322,
                  batch=64, max_steps=9375, steps_per_epoch=235, dataset_size=60000),
    "phase": dict(r=3, phase="destroying", detail="waiting for rank 2"),
    "step": dict(r=3, epoch=2, step=471, loss=0.3817, lr=0.001, samples=30144, step_ms=12.5,
                 fwd_ms=3.25, bwd_ms=6.125, opt_ms=0.75, comm_ms=4.5, exposed_ms=1.0625,
                 drops=17, dev_mem=1288490188, dev_mem_total=150118350848),
    "coll": dict(r=3, seq=9001, op="allreduce", bucket=-1, step=471, bytes=26214400,
                 enq=1700000000000000000, start=1700000000000001000,
                 done=1700000000002501000, algbw=10.48576, busbw=15.72864, count=6553600, dtype="float32"),
    "shard": dict(r=3, epoch=1, seed=-5, shuffle=True, drop_last=False, size=10,
                  num_samples=3, total_size=12, padding=2, idx=[7, 0, 300, -1, 2**63 - 1]),
    "ckpt": dict(r=3, step=400, epoch=1, ok=False, path="/ckpt/step-00000400",
                 bytes=1077290, ms=42.5, error="disk full"),
    "log": dict(r=3, level="warn", text="loss \u2193 0.38\nnext\\line"),
    "beat": dict(r=3, step=471, phase="train", seq=9001, op="allreduce",
                 since=1700000000500000000, where="train.py:57 save_checkpoint", bucket=0, count=6553600,
                 dtype="bfloat16"),
    "bye": dict(r=3, status=2, step=9375, refused="the script starts its own ranks"),
    "eval": dict(r=3, epoch=3, step=1876, loss=0.40625, accuracy=0.8575, correct=8575, total=10000),
    "info": dict(r=3, dataset="FashionMNIST", model="Sequential", params=101770, batch=64, dataset_size=60000),
    "stack": dict(r=3, tok=7, cut=False,
                  text='Thread 0x00007f0000000001 (most recent call first):\n  File "train.py", line 57 in save\n'),
    "cmd": dict(id=12, op="ckpt", arg=-1),
    "set": dict(r=3, key="rdzv/nccl_id", val=VAL),
    "get": dict(r=3, key="rdzv/nccl_id", timeout_ms=30000),
    "wait": dict(r=3, key="rdzv/nccl_id", timeout_ms=30000),
    "val": dict(key="rdzv/nccl_id", ok=True, val=VAL, error="store full"),
}

# a burst carries whole frames as bins: here the step and the beat above, as Python packs them
def _frame(kind):
    m = {"v": 1, "k": kind, "r": EXPECT[kind]["r"], "t": T}
    m.update({k: v for k, v in EXPECT[kind].items() if k != "r"})
    return msgpack.packb(m)
EXPECT["burst"] = dict(r=3, m=[_frame("step"), _frame("beat")])

failures = []
def check(cond, what):
    if not cond:
        failures.append(what)

def full(kind):
    m = {"v": 1, "k": kind}
    exp = dict(EXPECT[kind])
    if "r" in exp:
        m["r"] = exp.pop("r")
    m["t"] = T
    m.update(exp)
    return m

# ---- C -> Python ---------------------------------------------------------
for kind in EXPECT:
    path = os.path.join(d, kind + ".bin")
    try:
        with open(path, "rb") as f:
            frame = f.read()
        obj = msgpack.unpackb(frame, raw=False, strict_map_key=True)
    except Exception as e:
        check(False, f"{kind}: Python cannot unpack the C frame: {e!r}")
        continue
    want = full(kind)
    check(isinstance(obj, dict), f"{kind}: top level is {type(obj).__name__}")
    if not isinstance(obj, dict):
        continue
    keys = list(obj)
    check(all(isinstance(k, str) for k in keys), f"{kind}: non-string key in {keys}")
    check(keys[:2] == ["v", "k"], f"{kind}: keys start {keys[:2]}")
    check(keys == list(want), f"{kind}: keys {keys} != {list(want)}")
    for k, v in want.items():
        got = obj.get(k, "<missing>")
        check(type(got) is type(v) and got == v, f"{kind}.{k}: {got!r} != {v!r}")
    # C writes the same smallest forms as Python's packer (fixmap, compact
    # ints, float64): the bytes are identical.
    check(msgpack.packb(want) == frame, f"{kind}: C frame differs from Python's packb")
    check(_msgpack.packb(want) == frame, f"{kind}: C frame differs from the adapter's _msgpack.packb")
    check(_msgpack.unpackb(frame) == obj, f"{kind}: the adapter's _msgpack reads the C frame otherwise")

# ---- Python -> C ---------------------------------------------------------
def esc(s):
    out = []
    for ch in s:
        if ch == "\\": out.append("\\\\")
        elif ch == "\n": out.append("\\n")
        elif ch == "\r": out.append("\\r")
        elif ch == "\t": out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7f: out.append("\\x%02x" % ord(ch))
        else: out.append(ch)
    return "".join(out)

def text(v):
    if isinstance(v, bool): return "true" if v else "false"
    if isinstance(v, bytes): return v.hex()
    if isinstance(v, list): return ",".join(str(x) for x in v)
    if isinstance(v, str): return esc(v)
    return str(v)

n = [0]
def decode(obj_or_bytes):
    n[0] += 1
    data = obj_or_bytes if isinstance(obj_or_bytes, bytes) else msgpack.packb(obj_or_bytes)
    path = os.path.join(d, "py%03d.bin" % n[0])
    with open(path, "wb") as f:
        f.write(data)
    p = subprocess.run([tool, "decode", path], capture_output=True, text=True)
    fields = {}
    for line in p.stdout.splitlines():
        k, _, v = line.partition("=")
        fields[k] = v
    return p.returncode, fields, p.stderr.strip()

def same(kind, k, got, v):
    if isinstance(v, float):
        try:
            return float(got) == v
        except ValueError:
            return False
    return got == text(v)

for kind in EXPECT:
    want = full(kind)
    # a Python peer need not put "v","k" first: reverse the keys
    rc, fields, err = decode(dict(reversed(list(want.items()))))
    check(rc == 0 and err == "", f"py {kind}: tool_wire exit {rc}: {err}")
    check(fields.get("k") == kind and fields.get("v") == "1", f"py {kind}: envelope {fields}")
    check(fields.get("r") == str(want.get("r", -1)), f"py {kind}: r={fields.get('r')}")
    for k, v in want.items():
        if k in ("v", "k", "r"):
            continue
        if k == "m":   # a burst's messages: each decoded as its own frame
            check(fields.get("n") == str(len(v)), f"py {kind}: n={fields.get('n')}")
            for i, inner in enumerate(v):
                iw = msgpack.unpackb(inner)
                check(fields.get(f"m{i}") == "0" and fields.get(f"m{i}.k") == iw["k"],
                      f"py {kind} m{i}: {fields.get(f'm{i}')} {fields.get(f'm{i}.k')}")
                for ik, iv in iw.items():
                    if ik not in ("v", "k", "r"):
                        check(same(iw["k"], ik, fields.get(f"m{i}.{ik}"), iv), f"py {kind} m{i}.{ik}")
            continue
        check(same(kind, k, fields.get(k), v), f"py {kind}.{k}: {fields.get(k)!r} != {text(v)!r}")

# bursts: the rules for what may be inside (PROTOCOL.md, "burst")
def burst(m, **kw):
    return dict({"v": 1, "k": "burst", "r": 3, "t": T, "m": m}, **kw)
step3 = _frame("step")
step1 = msgpack.packb(dict(msgpack.unpackb(step3), r=1))
rc, fields, err = decode(burst([step1, _frame("hello"), b"\xc1", msgpack.packb(burst([step3])),
                                msgpack.packb(full("set")), step3]))
check(rc == 0 and fields.get("n") == "6" and
      [fields.get(f"m{i}") for i in range(6)] == ["-2", "-1", "-1", "-1", "-1", "0"] and
      fields.get("m5.step") == "471" and "claiming rank 1" in fields.get("m0.error", ""),
      f"burst rules: exit {rc} {err} {fields}")
for what, frame, needle in [
        ("no r", msgpack.packb({"v": 1, "k": "burst", "m": [step3]}), '"r"'),
        ("str inside", msgpack.packb(burst(["step"])), "not a bin"),
        ("4097 messages", msgpack.packb(burst([step3] * 4097)), "more than the 4096"),
        ("m not a list", msgpack.packb(burst(7)), "not an array")]:
    rc, fields, err = decode(frame)
    check(rc == 2 and needle in err, f"burst {what}: exit {rc} {err!r}")

# unknown keys of every type are skipped
m = full("step")
m.update({"future": {"a": [1, 2, {"b": None}], "c": 1.5}, "blob": b"\xff" * 10,
          "ext": msgpack.ExtType(5, b"xyz"), "nothing": None, "z" * 200: "long key"})
rc, fields, err = decode(m)
check(rc == 0 and fields.get("step") == "471" and float(fields.get("loss", "nan")) == 0.3817,
      f"unknown keys: exit {rc} {err} {fields}")

# numbers in other msgpack forms: float32, int for a float, big negative ints
rc, fields, err = decode(msgpack.packb({"v": 1, "k": "step", "loss": 0.5, "lr": 1,
                                        "epoch": -(2**61)}, use_single_float=True))
check(rc == 0 and fields.get("loss") == "0.5" and fields.get("lr") == "1"
      and fields.get("epoch") == str(-(2**61)), f"numeric forms: exit {rc} {err} {fields}")
# ...but integers beyond +-2^61 are malformed (PROTOCOL.md: sums of two must not overflow)
for big in (-(2**63), 2**61 + 1, 2**64 - 1):
    rc, fields, err = decode(msgpack.packb({"v": 1, "k": "step", "step": big}))
    check(rc != 0 and "out of range" in err, f"step {big}: exit {rc} {err}")

# unknown kind: well formed, skipped (exit 0, k=unknown, reason on stderr)
rc, fields, err = decode({"v": 1, "k": "gossip", "r": 2, "t": 5, "payload": [1, 2, 3]})
check(rc == 0 and fields.get("k") == "unknown" and fields.get("r") == "2" and "gossip" in err,
      f"unknown kind: exit {rc} {fields} {err!r}")

# malformed: exit 2 with a one-line reason naming the problem
good = msgpack.packb(full("hello"))
bad = [
    ("truncated", good[:-3], "msgpack"),
    ("trailing garbage", good + b"\xc0", "trailing"),
    ("version 2", {"v": 2, "k": "step"}, "version 2"),
    ("integer key", msgpack.packb({"v": 1, "k": "step", 7: 1}, strict_types=False), "not a string"),
    ("wrong type", {"v": 1, "k": "step", "loss": "low"}, '"loss"'),
    ("top-level array", [1, "step"], "not a map"),
    ("missing v", {"k": "step"}, '"v"'),
    ("huge array32", b"\x81\xa1x\xdd\xff\xff\xff\xff", "declares"),
    ("empty", b"", "empty"),
]
for what, frame, needle in bad:
    rc, fields, err = decode(frame)
    check(rc == 2 and needle in err and "\n" not in err,
          f"malformed {what}: exit {rc}, stderr {err!r} (want 2 and {needle!r})")

if failures:
    for f in failures:
        print("FAIL:", f)
    sys.exit(1)
print("wire: %d kinds C->Python, %d frames Python->C, all match" % (len(EXPECT), n[0]))
PYEOF
