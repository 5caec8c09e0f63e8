"""_zmq.py — the ZeroMQ calls uplink.py makes, through ctypes on the
libzmq.so.5 that ddptop itself links (so it is on every host where ddptop
runs ranks), instead of asking the user's interpreter for pyzmq.

The face is the part of pyzmq's that uplink.py uses (Context, socket,
setsockopt/getsockopt, connect, send/recv with DONTWAIT raising Again,
poll, close, term), so uplink takes either. ctypes lets go of the GIL
around every call, as pyzmq does around the ones that wait. Sockets are not
thread-safe: the caller serialises (uplink's lock). No __del__: a process
the script forked must not term its parent's context when it exits.
The library is the very file ddptop has loaded (its /proc maps: ddptop is a
rank's parent), so a ddptop built against a libzmq of its own prefix works
too; else the loader's libzmq.so.5; DDPTOP_LIBZMQ names another.
"""
import ctypes
import errno
import os

DEALER, PUSH = 5, 8
ROUTING_ID, EVENTS, LINGER, SNDHWM = 5, 15, 17, 23
CURVE_PUBLICKEY, CURVE_SECRETKEY, CURVE_SERVERKEY = 48, 49, 50
POLLIN, POLLOUT = 1, 2
DONTWAIT = 1


class ZMQError(OSError):
    pass


class Again(ZMQError):
    """The call would have waited (EAGAIN): a full queue, nothing to read."""


class _Msg(ctypes.Structure):
    _fields_ = [("_", ctypes.c_uint64 * 8)]     # zmq_msg_t: 64 bytes, aligned


class _PollItem(ctypes.Structure):
    _fields_ = [("socket", ctypes.c_void_p), ("fd", ctypes.c_int),
                ("events", ctypes.c_short), ("revents", ctypes.c_short)]


_lib = None
path = None             # the file load() took


def parent_libzmq():
    """The libzmq file this process's parent has mapped, or None: ddptop's
    own (a rank's parent), or the one a rank took (its script's spawned
    ranks), wherever it was installed."""
    try:
        with open(f"/proc/{os.getppid()}/maps") as f:
            for line in f:
                parts = line.rstrip("\n").split(None, 5)
                if len(parts) == 6 and os.path.basename(parts[5]).startswith("libzmq.so") \
                        and os.path.isfile(parts[5]):
                    return parts[5]
    except OSError:
        pass
    return None


def load():
    """libzmq loaded once: DDPTOP_LIBZMQ when set, else the parent's file,
    else libzmq.so.5 where the loader finds it; OSError (saying which
    library and why) when it cannot be, or lacks a call used here."""
    global _lib, path
    if _lib is not None:
        return _lib
    env = os.environ.get("DDPTOP_LIBZMQ")
    names = [env] if env else [n for n in (parent_libzmq(), "libzmq.so.5") if n]
    errors = []
    for name in names:
        try:
            lib = ctypes.CDLL(name, use_errno=True)
            break
        except OSError as e:
            errors.append(str(e))
    else:
        raise OSError("; ".join(errors))
    vp, i, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    sigs = {
        "zmq_ctx_new": ([], vp), "zmq_ctx_term": ([vp], i), "zmq_socket": ([vp, i], vp),
        "zmq_close": ([vp], i), "zmq_setsockopt": ([vp, i, vp, sz], i),
        "zmq_getsockopt": ([vp, i, vp, ctypes.POINTER(sz)], i), "zmq_connect": ([vp, ctypes.c_char_p], i),
        "zmq_send": ([vp, vp, sz, i], i), "zmq_msg_init": ([vp], i), "zmq_msg_recv": ([vp, vp, i], i),
        "zmq_msg_data": ([vp], vp), "zmq_msg_size": ([vp], sz), "zmq_msg_close": ([vp], i),
        "zmq_poll": ([vp, i, ctypes.c_long], i), "zmq_strerror": ([i], ctypes.c_char_p),
        "zmq_has": ([ctypes.c_char_p], i), "zmq_version": ([ctypes.POINTER(i)] * 3, None),
    }
    try:
        for fn, (args, res) in sigs.items():
            f = getattr(lib, fn)
            f.argtypes, f.restype = args, res
    except AttributeError as e:
        raise OSError(f"{name}: {e}") from None
    _lib, path = lib, name
    return lib


def version():
    """libzmq's version as "4.3.4"."""
    v = [ctypes.c_int() for _ in range(3)]
    load().zmq_version(*v)
    return ".".join(str(x.value) for x in v)


def has(capability):
    """zmq_has: b"curve", b"ipc", ..."""
    return bool(load().zmq_has(capability))


def _error(what):
    e = ctypes.get_errno()
    msg = f"{what}: {load().zmq_strerror(e).decode(errors='replace')}"
    return Again(e, msg) if e == errno.EAGAIN else ZMQError(e, msg)


class Context:
    def __init__(self):
        self.h = load().zmq_ctx_new()
        if not self.h:
            raise _error("zmq_ctx_new")

    def socket(self, kind):
        return Socket(self, kind)

    def term(self):
        while _lib.zmq_ctx_term(self.h) != 0:
            if ctypes.get_errno() != errno.EINTR:
                raise _error("zmq_ctx_term")
        self.h = None


class Socket:
    def __init__(self, ctx, kind):
        self.h = _lib.zmq_socket(ctx.h, kind)
        if not self.h:
            raise _error("zmq_socket")
        self._iv, self._n = ctypes.c_int(), ctypes.c_size_t()
        self._ivp, self._np = ctypes.byref(self._iv), ctypes.byref(self._n)

    def setsockopt(self, opt, value):
        if isinstance(value, int):
            v = ctypes.c_int(value)
            rc = _lib.zmq_setsockopt(self.h, opt, ctypes.byref(v), ctypes.sizeof(v))
        else:
            value = bytes(value)
            rc = _lib.zmq_setsockopt(self.h, opt, value, len(value))
        if rc != 0:
            raise _error(f"zmq_setsockopt {opt}")

    def getsockopt(self, opt):
        """An int option (EVENTS, LINGER, ...)."""
        v, n = self._iv, self._n        # made once: uplink asks EVENTS often
        n.value = ctypes.sizeof(v)
        if _lib.zmq_getsockopt(self.h, opt, self._ivp, self._np) != 0:
            raise _error(f"zmq_getsockopt {opt}")
        return v.value

    def connect(self, endpoint):
        if _lib.zmq_connect(self.h, endpoint.encode()) != 0:
            raise _error(f"zmq_connect {endpoint}")

    def send(self, frame, flags=0):
        frame = bytes(frame)
        while _lib.zmq_send(self.h, frame, len(frame), flags) < 0:
            if ctypes.get_errno() != errno.EINTR:
                raise _error("zmq_send")

    def recv(self, flags=0):
        m = _Msg()
        _lib.zmq_msg_init(ctypes.byref(m))
        try:
            while _lib.zmq_msg_recv(ctypes.byref(m), self.h, flags) < 0:
                if ctypes.get_errno() != errno.EINTR:
                    raise _error("zmq_msg_recv")
            return ctypes.string_at(_lib.zmq_msg_data(ctypes.byref(m)), _lib.zmq_msg_size(ctypes.byref(m)))
        finally:
            _lib.zmq_msg_close(ctypes.byref(m))

    def poll(self, timeout_ms=-1, flags=POLLIN):
        """The events among flags within timeout_ms (0 when none came)."""
        item = _PollItem(self.h, 0, flags, 0)
        while True:
            rc = _lib.zmq_poll(ctypes.byref(item), 1, timeout_ms)
            if rc >= 0:
                return item.revents if rc else 0
            if ctypes.get_errno() != errno.EINTR:
                raise _error("zmq_poll")
            # a signal: wait again (for at most the whole timeout once more)

    def close(self):
        if self.h:
            _lib.zmq_close(self.h)
            self.h = None
