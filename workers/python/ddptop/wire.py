"""wire.py — protocol v1 frames (docs/PROTOCOL.md), the Python end.

One msgpack map per ZeroMQ frame, string keys only, "v" and "k" first, then
"r" and "t", then the kind's keys in the order of PROTOCOL.md's tables (the
C decoder looks for each key just after the last one it found, so the
table order is its fast path; any order is accepted). Bump PROTO_VERSION
only together with transport/wire/protocol.h.

No sockets here, so tests check it against msgpack and the C codec alone.
The msgpack package encodes where the user's interpreter has it (about 2 us
a step message against 7 us); else _msgpack.py, which writes the same
bytes: the adapter asks the interpreter for nothing but torch.
"""
import threading
import time

try:
    import msgpack
except ImportError:     # the user's environment need not have it
    msgpack = None
from . import _msgpack

CODEC = "msgpack" if msgpack is not None else "ddptop._msgpack"

PROTO_VERSION = 1

PHASES = ("init", "rendezvous", "broadcast", "train", "paused", "checkpoint",
          "stopping", "destroying", "destroyed", "error")

# Field sizes of the C side (bytes with the NUL): longer strings are cut
# there; cutting here keeps a long traceback from being refused whole.
STR_SHORT, STR_MED, STR_LONG = 32, 128, 512


def wall_ns():
    """Wall-clock ns since the epoch: the protocol's "t" and coll times."""
    return time.time_ns()


def cut(s, size):
    """s cut to fit a C field of `size` bytes, at a UTF-8 character boundary."""
    b = str(s).encode("utf-8", "replace")
    if len(b) < size:
        return str(s)
    return b[:size - 1].decode("utf-8", "ignore")


_TLS = threading.local()


def _packer():
    """This thread's Packer: msgpack.packb builds one for every frame, with
    a 1 MiB buffer malloc'ed and freed each time; a Packer is not
    thread-safe, and the script's thread, DDP's callbacks and the beat all
    encode."""
    p = getattr(_TLS, "p", None)
    if p is None:
        p = _TLS.p = msgpack.Packer(use_bin_type=True)
    return p


def _pack(m):
    if msgpack is not None:
        return _packer().pack(m)
    out = bytearray()
    _msgpack.pack_map_into(out, m)
    return bytes(out)


def encode(kind, rank, fields, t_ns=0):
    """One frame: envelope first, then `fields` (a dict, in its own order).
    rank < 0 leaves "r" out (ddptop itself); t_ns 0 stamps now."""
    m = {"v": PROTO_VERSION, "k": kind}
    if rank >= 0:
        m["r"] = rank
    m["t"] = t_ns or wall_ns()
    m.update(fields)
    return _pack(m)


def burst(rank, frames):
    """Several encoded tel frames of this rank as one `burst` frame: each
    element of "m" a bin holding one frame exactly as it would travel alone."""
    return _pack({"v": PROTO_VERSION, "k": "burst", "r": rank, "t": wall_ns(), "m": frames})


def unpack(frame):
    """Any msgpack frame as Python objects (str keys and values decoded);
    ValueError when it is not exactly one msgpack object."""
    if msgpack is None:
        return _msgpack.unpackb(frame)
    return msgpack.unpackb(frame, raw=False)     # its errors are ValueErrors


def decode(frame):
    """A frame from ddptop as a dict; None when it is not a v1 map (skipped,
    as the C decoder skips what it cannot read)."""
    try:
        m = unpack(frame)
    except (ValueError, RecursionError):
        return None
    if not isinstance(m, dict) or m.get("v") != PROTO_VERSION or not isinstance(m.get("k"), str):
        return None
    return m
