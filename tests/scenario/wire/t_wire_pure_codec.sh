#!/usr/bin/env bash
# t_wire_pure_codec.sh — the adapter's pure-Python msgpack (workers/python/
# ddptop/_msgpack.py, what wire.py encodes with where the user's interpreter
# has no msgpack package) against the real msgpack: the same bytes for every
# type at every width boundary (ints, str, bin, arrays, maps, float64, bool,
# nil, nesting), the same objects back (round trip both ways, ext and
# float32 read too), and malformed input refused with ValueError, never a
# crash, a hang or an allocation of what a header merely declares. Then
# wire.py itself with the package hidden: its frames are msgpack's bytes and
# wire.decode returns None for what it cannot read.
# Env: PY (python with msgpack). Exit 0 pass, 77 skip, else fail.
set -u
PY=${PY:-python3}
if ! "$PY" -c 'import msgpack' 2>/dev/null; then
    echo "skip: $PY cannot import msgpack (the reference)"
    exit 77
fi
PYTHONPATH=workers/python "$PY" - <<'PYEOF' || { echo "FAIL: the pure codec differs from msgpack"; exit 1; }
import math, random, struct, subprocess, sys, time
import msgpack
from ddptop import _msgpack as P

failures = []
def check(cond, what):
    if not cond:
        failures.append(what)

ref = msgpack.Packer(use_bin_type=True)
def same(o, what=None):
    want = ref.pack(o)
    got = P.packb(o)
    check(got == want, f"packb {what or repr(o)[:60]}: {got[:16].hex()} != {want[:16].hex()}")
    back = P.unpackb(want)
    rback = msgpack.unpackb(want, raw=False)
    check(back == rback and type(back) is type(rback), f"unpackb {what or repr(o)[:60]}: {repr(back)[:60]}")

# every int width, both sides of each boundary
edges = [0, 1, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1,
         -1, -31, -32, -33, -127, -128, -129, -32767, -32768, -32769, -2**31 + 1, -2**31, -2**31 - 1,
         -2**63 + 1, -2**63]
for i in edges:
    same(i)
for bad in (2**64, -2**63 - 1):
    try:
        P.packb(bad)
        check(False, f"packb {bad} did not raise")
    except OverflowError:
        pass
# floats (always float64, as msgpack's default), bool, nil
for f in (0.0, -0.0, 1.5, 0.1, 1e308, -1e-308, 5e-324, math.inf, -math.inf):
    same(f)
nan = P.unpackb(P.packb(math.nan))
check(P.packb(math.nan) == ref.pack(math.nan) and math.isnan(nan), "nan")
for v in (True, False, None):
    same(v)
# str of every length class, in bytes (multi-byte characters count as bytes)
for n in (0, 1, 31, 32, 255, 256, 65535, 65536):
    same("x" * n, f"str {n}")
    same(b"\xff" * n, f"bin {n}")
same("\u00e9" * 16, "2-byte chars, 32 bytes")
same("n\u0153ud \U0001F600", "utf-8")
same(bytearray(b"abc"))
check(P.packb(memoryview(b"abc")) == ref.pack(b"abc"), "memoryview as bin")
# arrays and maps around 16 and 65536 entries, tuples as arrays, nesting
for n in (0, 15, 16, 65535, 65536):
    same(list(range(n)), f"array {n}")
    same({f"k{i}": i for i in range(n)}, f"map {n}")
check(P.packb((1, "a")) == ref.pack([1, "a"]), "tuple")
same({"v": 1, "k": "step", "m": [b"x", {"a": [None, True, -2**40, 2.5]}], "": ""})
# key order is kept (wire.py puts "v", "k" first)
o = {"k": 1, "v": 2, "a": 3}
check(list(P.unpackb(P.packb(o))) == ["k", "v", "a"], "key order")
# subclasses as msgpack takes them; what it cannot carry
import enum
class Color(enum.IntEnum):
    RED = 3
class S(str):
    pass
check(P.packb(Color.RED) == ref.pack(3) and P.packb(S("ab")) == ref.pack("ab"), "subclasses")
for bad in (object(), {1, 2}, 1j):
    try:
        P.packb(bad)
        check(False, f"packb {bad!r} did not raise")
    except TypeError:
        pass
# random messages of the protocol's shapes, many times
rnd = random.Random(7)
def value(depth=0):
    c = rnd.randrange(9 if depth < 3 else 6)
    if c == 0: return rnd.choice(edges)
    if c == 1: return rnd.uniform(-1e6, 1e6)
    if c == 2: return "".join(rnd.choice("ab\u00e9\u4e2d") for _ in range(rnd.choice((0, 5, 40, 300))))
    if c == 3: return bytes(rnd.randrange(256) for _ in range(rnd.choice((0, 3, 300))))
    if c == 4: return rnd.choice((True, False, None))
    if c == 5: return rnd.randrange(-2**63, 2**64)
    if c == 6: return [value(depth + 1) for _ in range(rnd.randrange(20))]
    return {f"key{rnd.randrange(30)}": value(depth + 1) for _ in range(rnd.randrange(20))}
for i in range(2000):
    same({"v": 1, "k": "x", "r": i, "t": time.time_ns(), "f": value()}, f"random {i}")
# what only others write: float32, ext (fixext 1..16, ext 8/16/32), str8 from old packers
check(P.unpackb(msgpack.packb(0.5, use_single_float=True)) == 0.5, "float32")
for n in (1, 2, 4, 8, 16, 3, 300, 70000):
    e = P.unpackb(msgpack.packb(msgpack.ExtType(5, b"z" * n)))
    check(isinstance(e, P.Ext) and e.code == 5 and e.data == b"z" * n, f"ext {n}")
check(P.unpackb(b"\xd4\xfdq").code == -3, "negative ext type")

# malformed: ValueError, never another exception, and nothing huge allocated
good = ref.pack({"v": 1, "k": "cmd", "id": 3, "op": "ckpt", "arg": -1, "s": "x" * 40, "b": b"y" * 300})
bad = [b"", b"\xc1", good[:-1], good + b"\x00", b"\xa5abc", b"\xd9", b"\xd9\x05ab",
       b"\xdd\xff\xff\xff\xff", b"\xdf\xff\xff\xff\xff", b"\xc6\xff\xff\xff\xff", b"\xdb\x7f\xff\xff\xff",
       b"\xcd\x01", b"\xcf" + b"\x00" * 7, b"\xcb\x00", b"\xc9\xff\xff\xff\xff\x01", b"\xd8\x01",
       b"\x81\x01\x02", b"\x81\xc0\x02", b"\x81\x91\x01\x02", b"\xa2\xff\xfe", b"\x91" * 100000 + b"\x01",
       b"\x81\xa1k" * 5000 + b"\xc0"]
for i in range(len(good)):          # every prefix of a good frame
    bad.append(good[:i])
for i in range(3000):               # and random bytes, and good frames with one byte changed
    b = bytearray(good)
    b[rnd.randrange(len(b))] = rnd.randrange(256)
    bad.append(bytes(b))
    bad.append(bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 40))))
def has_ext(o):
    if isinstance(o, P.Ext):
        return True
    if isinstance(o, list):
        return any(has_ext(x) for x in o)
    if isinstance(o, dict):
        return any(has_ext(x) for x in o.values())
    return False
refused = 0
for b in bad:
    try:
        got = P.unpackb(b)
    except ValueError:
        refused += 1
        continue
    except Exception as e:
        check(False, f"unpackb {b[:12].hex()}: {type(e).__name__} {e}")
        continue
    # accepted: then msgpack must accept it too, with the same value
    try:
        want = msgpack.unpackb(b, raw=False, strict_map_key=True)
    except Exception as e:
        # msgpack 1.0 refuses ext types below 0 (and -1 that is no timestamp);
        # the adapter skips any ext, as the C decoder does
        check(has_ext(got), f"unpackb {b[:12].hex()} accepted what msgpack refuses ({type(e).__name__} {e})")
        continue
    check(got == want or (isinstance(want, msgpack.ExtType) and isinstance(got, P.Ext)),
          f"unpackb {b[:12].hex()}: {got!r} != {want!r}")
check(refused > len(bad) // 2, f"only {refused} of {len(bad)} malformed inputs refused")
t0 = time.monotonic()
for _ in range(100):
    try:
        P.unpackb(b"\xdd\xff\xff\xff\xff\x01")
    except ValueError:
        pass
check(time.monotonic() - t0 < 2, "a declared 4G array took time")

# wire.py with the msgpack package hidden: the pure codec, the same frames
sys.modules["msgpack"] = None     # import msgpack now raises ImportError
from ddptop import wire
check(wire.CODEC == "ddptop._msgpack", f"wire.py uses {wire.CODEC} with msgpack hidden")
fields = dict(epoch=2, step=471, loss=0.3817, lr=0.001, samples=30144, step_ms=12.5, drops=17, where="t.py:9 f")
f1 = wire.encode("step", 3, fields, t_ns=1700000000123456789)
want = ref.pack(dict({"v": 1, "k": "step", "r": 3, "t": 1700000000123456789}, **fields))
check(f1 == want, "wire.encode without msgpack: not msgpack's bytes")
bu = wire.burst(3, [f1, f1])
check(msgpack.unpackb(bu)["m"] == [f1, f1], "wire.burst without msgpack")
check(wire.decode(ref.pack({"v": 1, "k": "cmd", "op": "stop", "id": 4})) == {"v": 1, "k": "cmd", "op": "stop", "id": 4},
      "wire.decode without msgpack")
for b in (b"\xc1", ref.pack({"v": 2, "k": "cmd"}), ref.pack([1]), b"\x91" * 100000, ref.pack({"v": 1, "k": 5})):
    check(wire.decode(b) is None, f"wire.decode {b[:8].hex()} is not None")

if failures:
    for f in failures[:30]:
        print("FAIL:", f)
    sys.exit(1)
print(f"pure msgpack: same bytes and values as msgpack {msgpack.version}; {refused} malformed inputs refused")
PYEOF
echo "PASS: the adapter's own msgpack against msgpack"
