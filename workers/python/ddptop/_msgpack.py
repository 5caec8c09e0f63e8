"""_msgpack.py — the msgpack of protocol v1 in pure Python, so the adapter
needs nothing but torch in the user's interpreter (wire.py uses it where the
msgpack package is not installed).

packb writes what msgpack-python's Packer(use_bin_type=True) writes, byte
for byte: the smallest form of every int, float64, str8..str32, bin8..bin32,
arrays (lists and tuples) and maps. unpackb reads any msgpack (ext as Ext,
float32 as float) and raises ValueError on anything malformed: truncated,
trailing bytes, a declared length longer than what is left, invalid UTF-8,
a map key that is not str or bytes (msgpack's strict_map_key), nesting deeper
than MAX_DEPTH. No sockets, no state but a cache of encoded short strings
(protocol keys and values repeat every frame).
"""
import struct

MAX_DEPTH = 64

_BH = struct.Struct(">BH").pack
_BI = struct.Struct(">BI").pack
_BQ = struct.Struct(">BQ").pack
_Bb = struct.Struct(">Bb").pack
_Bh = struct.Struct(">Bh").pack
_Bi = struct.Struct(">Bi").pack
_Bq = struct.Struct(">Bq").pack
_Bd = struct.Struct(">Bd").pack

# -32..127: one byte each (negative and positive fixint)
_FIX = tuple(bytes((i & 0xFF,)) for i in range(-32, 128))

_STRS = {}              # str -> its encoding, for short strings
_STRS_MAX = 4096


class Ext:
    """An ext value read by unpackb (protocol v1 sends none; a peer's is skipped)."""
    __slots__ = ("code", "data")

    def __init__(self, code, data):
        self.code, self.data = code, data

    def __eq__(self, other):
        return isinstance(other, Ext) and (self.code, self.data) == (other.code, other.data)

    def __repr__(self):
        return f"Ext({self.code}, {self.data!r})"


def _str(s):
    b = _STRS.get(s)
    if b is not None:
        return b
    e = s.encode("utf-8")
    n = len(e)
    if n < 32:
        b = bytes((0xA0 | n,)) + e
    elif n < 0x100:
        b = bytes((0xD9, n)) + e
    elif n < 0x10000:
        b = _BH(0xDA, n) + e
    elif n < 0x100000000:
        b = _BI(0xDB, n) + e
    else:
        raise ValueError("str is too large")
    if n <= 64 and len(_STRS) < _STRS_MAX:
        _STRS[s] = b
    return b


def _int(i):
    if -32 <= i < 128:
        return _FIX[i + 32]
    if i > 0:
        if i < 0x100:
            return bytes((0xCC, i))
        if i < 0x10000:
            return _BH(0xCD, i)
        if i < 0x100000000:
            return _BI(0xCE, i)
        if i < 0x10000000000000000:
            return _BQ(0xCF, i)
        raise OverflowError("Integer value out of range")
    if i >= -0x80:
        return _Bb(0xD0, i)
    if i >= -0x8000:
        return _Bh(0xD1, i)
    if i >= -0x80000000:
        return _Bi(0xD2, i)
    if i >= -0x8000000000000000:
        return _Bq(0xD3, i)
    raise OverflowError("Integer value out of range")


def _len_head(n, fix, fix_max, c16, c32, what):
    if n < fix_max:
        return bytes((fix | n,))
    if n < 0x10000:
        return _BH(c16, n)
    if n < 0x100000000:
        return _BI(c32, n)
    raise ValueError(f"{what} is too large")


def _pack(o, out, depth):
    t = type(o)
    if t is str:
        out += _str(o)
    elif t is int:
        out += _int(o)
    elif t is float:
        out += _Bd(0xCB, o)
    elif t is bool:
        out += b"\xc3" if o else b"\xc2"
    elif o is None:
        out += b"\xc0"
    elif t is dict:
        if depth >= MAX_DEPTH:
            raise ValueError("recursion limit exceeded")
        out += _len_head(len(o), 0x80, 16, 0xDE, 0xDF, "dict")
        for k, v in o.items():
            if type(k) is str:
                out += _str(k)
            else:
                _pack(k, out, depth + 1)
            _pack(v, out, depth + 1)
    elif t is list or t is tuple:
        if depth >= MAX_DEPTH:
            raise ValueError("recursion limit exceeded")
        out += _len_head(len(o), 0x90, 16, 0xDC, 0xDD, "list")
        for v in o:
            _pack(v, out, depth + 1)
    elif t is bytes or t is bytearray or t is memoryview:
        n = o.nbytes if t is memoryview else len(o)
        if n < 0x100:
            out += bytes((0xC4, n))
        elif n < 0x10000:
            out += _BH(0xC5, n)
        elif n < 0x100000000:
            out += _BI(0xC6, n)
        else:
            raise ValueError("bytes is too large")
        out += o
    # subclasses, as msgpack-python takes them (bool before int: it is one)
    elif isinstance(o, bool):
        _pack(bool(o), out, depth)
    elif isinstance(o, int):
        _pack(int(o), out, depth)
    elif isinstance(o, float):
        _pack(float(o), out, depth)
    elif isinstance(o, str):
        _pack(str(o), out, depth)
    elif isinstance(o, (bytes, bytearray)):
        _pack(bytes(o), out, depth)
    elif isinstance(o, dict):
        _pack(dict(o), out, depth)
    elif isinstance(o, (list, tuple)):
        _pack(list(o), out, depth)
    else:
        raise TypeError(f"can not serialize {t.__name__!r} object")


def packb(o):
    """o as msgpack bytes (TypeError for a type msgpack cannot carry,
    OverflowError for an int outside -2^63..2^64-1)."""
    out = bytearray()
    _pack(o, out, 0)
    return bytes(out)


def pack_map_into(out, m, _get=_STRS.get, _fix=_FIX, _d=_Bd):
    """Append the map m to the bytearray out: packb's fast path for a frame,
    one flat map whose values are rarely containers."""
    n = len(m)
    out += bytes((0x80 | n,)) if n < 16 else _len_head(n, 0x80, 16, 0xDE, 0xDF, "dict")
    for k, v in m.items():
        out += _get(k) or _str(k) if type(k) is str else packb(k)
        t = type(v)
        if t is int:
            out += _fix[v + 32] if -32 <= v < 128 else _int(v)
        elif t is float:
            out += _d(0xCB, v)
        elif t is str:
            out += _get(v) or _str(v)
        else:
            _pack(v, out, 1)


# ---- decoding ---------------------------------------------------------------

_U16 = struct.Struct(">H").unpack_from
_U32 = struct.Struct(">I").unpack_from
_U64 = struct.Struct(">Q").unpack_from
_I8 = struct.Struct(">b").unpack_from
_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from
_I64 = struct.Struct(">q").unpack_from
_F32 = struct.Struct(">f").unpack_from
_F64 = struct.Struct(">d").unpack_from
_U8 = struct.Struct(">B").unpack_from
_VARLEN = {0xD9: (_U8, 1, "s"), 0xDA: (_U16, 2, "s"), 0xDB: (_U32, 4, "s"),
           0xC4: (_U8, 1, "b"), 0xC5: (_U16, 2, "b"), 0xC6: (_U32, 4, "b"),
           0xDC: (_U16, 2, "a"), 0xDD: (_U32, 4, "a"), 0xDE: (_U16, 2, "m"), 0xDF: (_U32, 4, "m")}
_INTS = {0xCC: (_U8, 1), 0xCD: (_U16, 2), 0xCE: (_U32, 4), 0xCF: (_U64, 8),
         0xD0: (_I8, 1), 0xD1: (_I16, 2), 0xD2: (_I32, 4), 0xD3: (_I64, 8)}


def _take(b, i, n):
    if n > len(b) - i:
        raise ValueError("incomplete input")
    return i + n


def _dec(b, i, depth):
    c = b[i]
    i += 1
    if c < 0x80:
        return c, i
    if c >= 0xE0:
        return c - 0x100, i
    if 0xA0 <= c < 0xC0:
        j = _take(b, i, c & 0x1F)
        return str(b[i:j], "utf-8"), j
    if 0x90 <= c < 0xA0:
        return _arr(b, i, c & 0x0F, depth)
    if 0x80 <= c < 0x90:
        return _map(b, i, c & 0x0F, depth)
    if c == 0xC0:
        return None, i
    if c == 0xC2:
        return False, i
    if c == 0xC3:
        return True, i
    if c == 0xCB:
        return _F64(b, i)[0], _take(b, i, 8)
    if 0xCC <= c <= 0xD3:
        unpack, size = _INTS[c]
        return unpack(b, i)[0], _take(b, i, size)
    if c == 0xCA:
        return _F32(b, i)[0], _take(b, i, 4)
    if c in _VARLEN:                 # str8/16/32, bin8/16/32, array16/32, map16/32
        unpack, w, kind = _VARLEN[c]
        n = unpack(b, i)[0]
        i += w
        if kind == "a":
            return _arr(b, i, n, depth)
        if kind == "m":
            return _map(b, i, n, depth)
        j = _take(b, i, n)
        return (str(b[i:j], "utf-8") if kind == "s" else b[i:j]), j
    if 0xD4 <= c <= 0xD8:            # fixext 1, 2, 4, 8, 16
        n = 1 << (c - 0xD4)
        j = _take(b, i, 1 + n)
        return Ext(_I8(b, i)[0], bytes(b[i + 1:j])), j
    if c in (0xC7, 0xC8, 0xC9):      # ext 8, 16, 32
        w = (1, 2, 4)[c - 0xC7]
        n = (_U8, _U16, None, _U32)[w - 1](b, i)[0]
        i += w
        j = _take(b, i + 1, n)
        return Ext(_I8(b, i)[0], bytes(b[i + 1:j])), j
    raise ValueError(f"byte 0x{c:02x} is not msgpack")


def _arr(b, i, n, depth):
    if depth >= MAX_DEPTH:
        raise ValueError("nesting deeper than %d" % MAX_DEPTH)
    if n > len(b) - i:                # every element takes a byte at least
        raise ValueError(f"an array declares {n} elements, {len(b) - i} bytes are left")
    out = []
    for _ in range(n):
        v, i = _dec(b, i, depth + 1)
        out.append(v)
    return out, i


def _map(b, i, n, depth):
    if depth >= MAX_DEPTH:
        raise ValueError("nesting deeper than %d" % MAX_DEPTH)
    if 2 * n > len(b) - i:
        raise ValueError(f"a map declares {n} pairs, {len(b) - i} bytes are left")
    out = {}
    for _ in range(n):
        k, i = _dec(b, i, depth + 1)
        if type(k) is not str and type(k) is not bytes:
            raise ValueError(f"{type(k).__name__} is not allowed for map key")
        v, i = _dec(b, i, depth + 1)
        out[k] = v
    return out, i


def unpackb(data):
    """One msgpack object that fills data exactly (bytes-like); ValueError
    when it is not one."""
    b = bytes(data)
    try:
        o, i = _dec(b, 0, 0)
    except (IndexError, struct.error):
        raise ValueError("incomplete input") from None
    if i != len(b):
        raise ValueError(f"{len(b) - i} bytes of extra data")
    return o
