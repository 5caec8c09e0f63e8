"""uplink.py — this rank's sockets to ddptop (the Python twin of
workers/link/uplink.c).

ctl is a DEALER with routing id "rank-R.PID.NONCE" (hello, store requests; ddptop's
cmd and val come back on it), tel a PUSH (everything else), or, where ddptop
offers it on this host, its telemetry stream (a unix stream socket ddptop's own
thread reads: transport/net/tstream.h, docs/PROTOCOL.md; no ZeroMQ I/O thread
woken per burst on either side). Telemetry never
waits: frames wait for the next 50 ms mark of the wall clock (the same
marks on every rank, so the ranks' bursts leave together and ddptop's I/O
thread serves them in one wake-up) and go with DONTWAIT as one `burst`
frame (docs/PROTOCOL.md), so ZeroMQ and ddptop pay their per-frame costs
once per burst; a full queue drops the burst and counts its messages (the
step's "drops"). What a user
must see (hello, phase, ckpt, log, bye) flushes the burst first and may wait
up to 2 s for queue room. Every ctl frame is a sign of life; "ping" stops
here. Over tcp:// both sockets are CURVE clients with the job's keys.

ZeroMQ is ddptop's own libzmq.so.5 through ctypes (_zmq.py): the user's
interpreter needs no pyzmq. pyzmq is taken only where that library cannot
be loaded, or has no CURVE and the job is on tcp:// (zmq_for).

Thread use: the script's thread, DDP's communication callbacks and the
heartbeat thread all send, so every socket call holds one lock (ZeroMQ
sockets are not thread-safe). Store requests release it between polls.
"""
import os
import secrets
import socket
import sys
import threading
import time

from . import _zmq, wire

TEL_HWM = 10000
BURST_NS = 50_000_000           # a burst a 50 ms slot of the wall clock
BURST_FRAMES = 512              # at most PROTO_MAX_BURST (4096) inside one burst
BURST_BYTES = 4 << 20           # well within the 8 MiB frame limit
IMPORTANT_WAIT_S = 2.0
STORE_MARGIN_S = 5.0
CMD_QUEUE = 64


class StoreError(Exception):
    """ddptop's store did not answer, or refused."""


class TransportError(Exception):
    """No ZeroMQ to reach ddptop with: the message is the one line to print."""


def zmq_for(curve):
    """The ZeroMQ binding to use: _zmq on ddptop's libzmq, or pyzmq where
    that cannot be loaded or (curve: a tcp:// job) has no CURVE."""
    try:
        _zmq.load()
        if not curve or _zmq.has(b"curve"):
            return _zmq
        why = f"the libzmq here ({_zmq.version()}) has no CURVE for tcp://"
    except OSError as e:
        why = f"cannot load ddptop's libzmq ({e})"
    try:
        import zmq
        return zmq
    except ImportError:
        pass
    raise TransportError(f"{why}, and {sys.executable} has no pyzmq: install the package pyzmq into it "
                         f"({sys.executable} -m pip install pyzmq)")


STREAM_MAGIC = b"DDPTEL1\n"     # transport/net/tstream.h
STREAM_PENDING_MAX = 16 << 20
MAX_FRAME = 8 << 20


def stream_path(tel_ep):
    """The telemetry stream beside an ipc:// tel endpoint (tstream_path), else None."""
    if not tel_ep.startswith("ipc://"):
        return None
    p = tel_ep[6:] + ".stream"
    return p if 0 < len(p.encode()) < 108 else None


class Stream:
    """A rank's end of ddptop's telemetry stream (the Python twin of
    tstream.c's client): each frame a 4-byte little-endian length and its
    bytes, after the greeting. Never blocks: what the socket does not take
    waits here (at most STREAM_PENDING_MAX bytes, then a frame is dropped
    whole) and goes with the next send or flush."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.setblocking(False)
        for tries in range(50):
            try:
                self.sock.connect(path)
                break
            except BlockingIOError:     # a full backlog: a thousand ranks at once
                if tries == 49:
                    self.sock.close()
                    raise
                time.sleep(0.01)
            except OSError:
                self.sock.close()
                raise
        self.q = bytearray(STREAM_MAGIC)
        self.broken = False
        self.inbuf = bytearray()
        self.write()

    def write(self):
        """What waits, as far as the socket takes it; the bytes still waiting."""
        while self.q and not self.broken:
            try:
                w = self.sock.send(self.q)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self.broken = True
                self.q = bytearray()
                break
            del self.q[:w]
        return len(self.q)

    def send(self, frame):
        """True when taken (sent, or queued behind what waits)."""
        n = len(frame)
        if self.broken or not 0 < n <= MAX_FRAME:
            return False
        hdr = n.to_bytes(4, "little")
        if self.q and self.write():
            if len(self.q) + 4 + n > STREAM_PENDING_MAX:
                return False
            self.q += hdr
            self.q += frame
            return True
        if self.broken:
            return False
        try:
            w = self.sock.sendmsg([hdr, frame])
        except (BlockingIOError, InterruptedError):
            w = 0
        except OSError:
            self.broken = True
            return False
        if w < 4 + n:
            self.q += (hdr + bytes(frame))[w:]
        return True

    def read(self):
        """The frames ddptop sent down (its pings): a list of bytes, never
        waiting. A broken stream or something that is not a frame of at
        most 256 bytes breaks it (sends then drop)."""
        out = []
        while not self.broken:
            try:
                b = self.sock.recv(4096)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                b = b""
            if not b:
                self.broken = True
                self.q = bytearray()
                break
            self.inbuf += b
            while len(self.inbuf) >= 4:
                n = int.from_bytes(self.inbuf[:4], "little")
                if not 0 < n <= 256:
                    self.broken = True
                    return out
                if len(self.inbuf) < 4 + n:
                    break
                out.append(bytes(self.inbuf[4:4 + n]))
                del self.inbuf[:4 + n]
        return out

    def wait(self, timeout_s):
        """Write what waits, waiting for the socket up to timeout_s."""
        import select
        deadline = time.monotonic() + timeout_s
        while self.write() and time.monotonic() < deadline:
            select.select([], [self.sock], [], min(0.1, max(0.0, deadline - time.monotonic())))
        return len(self.q)

    def close(self, linger_s):
        if linger_s > 0:
            self.wait(linger_s)
        self.sock.close()


class Uplink:
    def __init__(self, ctl_ep, tel_ep, rank, keys=None):
        self.rank = rank
        self.drops = 0
        self.lock = threading.RLock()
        zmq = self.z = zmq_for(bool(keys))
        self.ctx = zmq.Context()
        self.ctl = self.ctx.socket(zmq.DEALER)
        self.tel = self.ctx.socket(zmq.PUSH)
        # a routing id of this process's own (docs/PROTOCOL.md, "Routing ids")
        self.ctl.setsockopt(zmq.ROUTING_ID, f"rank-{rank}.{os.getpid()}.{secrets.token_hex(4)}".encode())
        self.ctl.setsockopt(zmq.LINGER, 0)
        self.tel.setsockopt(zmq.SNDHWM, TEL_HWM)
        for s in (self.ctl, self.tel):
            if keys:   # CURVE options go before connect
                s.setsockopt(zmq.CURVE_SERVERKEY, keys["server-public"].encode())
                s.setsockopt(zmq.CURVE_PUBLICKEY, keys["client-public"].encode())
                s.setsockopt(zmq.CURVE_SECRETKEY, keys["client-secret"].encode())
        self.ctl.connect(ctl_ep)
        self.stream = None
        path = None if keys or os.environ.get("DDPTOP_TEL_STREAM") == "0" else stream_path(tel_ep)
        if path:
            try:
                self.stream = Stream(path)
            except OSError:     # none there (an older ddptop): ZeroMQ's tel
                self.stream = None
        if self.stream is None:
            self.tel.connect(tel_ep)
        self.burst = []
        self.burst_bytes = 0
        self.burst_slot = 0
        self.cburst = None      # the C++ burst (_hook.Burst) where the extension runs: use_burst
        self.cmds = []
        self.stack_ask = None   # the token of ddptop's latest "stacks" ask not answered yet (beat.py answers)
        self.vals = {}          # store replies another thread's read took off ctl, by key (_store takes them)
        self.last_heard = time.monotonic()
        self.pinged = False
        self.important_wait_s = IMPORTANT_WAIT_S
        self.linger_ms = 2000

    # ---- telemetry ----
    def use_burst(self, cburst):
        """From now on frames wait in cburst (the extension's _hook.Burst, the
        same 50 ms slots and limits), which the step engine (_steps.cpp)
        fills with its own messages too."""
        with self.lock:
            self._flush()
            self.cburst = cburst

    def pump(self):
        """Send the bursts the C++ burst finished (the step engine says when)."""
        with self.lock:
            self._pump()

    def _pump(self):
        ready = self.cburst.take()
        if ready:
            for frame, n in ready:
                if not self._tel_send(frame):
                    self.drops += n

    def send(self, kind, fields, t_ns=0):
        """Queue a telemetry frame; never blocks. Returns False if dropped."""
        now = time.time_ns()
        frame = wire.encode(kind, self.rank, fields, t_ns or now)
        with self.lock:
            if self.cburst is not None:
                self.cburst.add(frame, now)
                self._pump()
                return True
            slot = now // BURST_NS
            # a frame of a later slot (or an earlier one: the clock was set
            # back) sends what waits first and starts the next burst
            if self.burst and (slot != self.burst_slot or self.burst_bytes + len(frame) > BURST_BYTES):
                self._flush()
            if not self.burst:
                self.burst_slot = slot
            self.burst.append(frame)
            self.burst_bytes += len(frame)
            if len(self.burst) >= BURST_FRAMES:
                self._flush()
        return True

    def _flush(self):
        """The waiting frames as one burst (a lone frame as itself)."""
        if self.cburst is not None:
            self.cburst.finish()
            self._pump()
            return
        n = len(self.burst)
        if not n:
            return
        frame = self.burst[0] if n == 1 else wire.burst(self.rank, self.burst)
        self.burst, self.burst_bytes = [], 0
        if not self._tel_send(frame):
            self.drops += n

    def _tel_send(self, frame):
        """One tel frame out without waiting: False when it was dropped."""
        if self.stream is not None:
            return self.stream.send(frame)
        try:
            self.tel.send(frame, self.z.DONTWAIT)
            return True
        except self.z.Again:
            return False

    def flush(self):
        with self.lock:
            self._flush()
            if self.stream is not None:
                self.stream.write()      # what the socket did not take before

    def backlog(self):
        """Bytes the telemetry stream's socket has not taken yet (0 over ZeroMQ)."""
        s = self.stream
        return len(s.q) if s is not None else 0

    def write_backlog(self):
        """Hand the stream's socket what it had no room for (the heartbeat
        thread's, while the script's thread is blocked and sends nothing)."""
        if self.stream is not None:
            with self.lock:
                self.stream.write()

    def flush_wait(self, timeout_s):
        """Flush, then give what waits up to timeout_s to leave (a rank
        about to die): the stream's queue as its socket makes room, or
        ZeroMQ's I/O thread the time."""
        with self.lock:
            self._flush()
            if self.stream is not None:
                self.stream.wait(timeout_s)
                return
        time.sleep(timeout_s)

    def send_important(self, kind, fields):
        """hello (on ctl, so ddptop learns the routing id), phase, ckpt,
        log, bye: the burst first, then up to 2 s of waiting for room."""
        frame = wire.encode(kind, self.rank, fields)
        sock = self.ctl if kind == "hello" else self.tel
        deadline = time.monotonic() + self.important_wait_s
        while True:
            with self.lock:
                self._flush()
                if sock is self.tel:
                    if self._tel_send(frame):
                        return True
                    if self.stream is not None and self.stream.broken:     # ddptop went away
                        self.drops += 1
                        return False
                else:
                    try:
                        sock.send(frame, self.z.DONTWAIT)
                        return True
                    except self.z.Again:
                        pass
            if time.monotonic() >= deadline:
                self.drops += 1
                return False
            time.sleep(0.005)

    def no_waiting(self):
        """ddptop is gone: nothing waits for queue room any more, nor lingers at close."""
        self.important_wait_s = 0.0
        self.linger_ms = 0

    # ---- ctl: commands, pings, store ----
    def _read_ctl(self, want_key=None):
        """Read what waits on ctl; queue commands. Returns the "val" for
        want_key when it came, else None. Caller holds the lock."""
        while True:
            # nothing waiting is the usual answer: asked without an exception
            # (a raised zmq.Again, its traceback and message, cost more than the read)
            if not self.ctl.getsockopt(self.z.EVENTS) & self.z.POLLIN:
                return None
            try:
                frame = self.ctl.recv(self.z.DONTWAIT)
            except self.z.Again:
                return None
            self.last_heard = time.monotonic()
            m = wire.decode(frame)
            if m is None:
                continue
            if m["k"] == "cmd":
                self._take_cmd(m)
            elif m["k"] == "val":
                key = m.get("key")
                if want_key is not None and key == want_key:
                    return m
                # the heartbeat thread's read (pings, stacks asks) while the
                # script's thread waits for this reply: kept for _store
                if isinstance(key, str) and len(self.vals) < CMD_QUEUE:
                    self.vals[key] = m

    def _take_cmd(self, m):
        """A command from ddptop: a ping is heard, a "stacks" ask waits for
        the heartbeat thread (the latest one only: an older look is over),
        the rest for the script's thread (steer.py). Caller holds the lock."""
        op = m.get("op")
        if op == "ping":
            self.pinged = True
        elif op == "stacks":
            arg = m.get("arg")
            self.stack_ask = arg if isinstance(arg, int) else 0
        elif len(self.cmds) < CMD_QUEUE:   # ddptop sends a handful; a flood is dropped
            self.cmds.append(m)

    def take_stack_ask(self):
        """The token of a "stacks" ask that came and is not answered yet, or
        None (reads ctl, and the telemetry stream, for it)."""
        with self.lock:
            self._read_ctl()
            if self.stream is not None:
                self._read_stream()
            tok, self.stack_ask = self.stack_ask, None
        return tok

    def send_ctl(self, kind, fields):
        """One frame on ctl without waiting: False when it was dropped."""
        frame = wire.encode(kind, self.rank, fields)
        with self.lock:
            try:
                self.ctl.send(frame, self.z.DONTWAIT)
                return True
            except self.z.Again:
                self.drops += 1
                return False

    def commands(self):
        """Commands that arrived since the last call (dicts: op, id, arg)."""
        with self.lock:
            self._read_ctl()
            out, self.cmds = self.cmds, []
        return out

    def _read_stream(self):
        """ddptop's pings down the telemetry stream (when this rank is on
        it): heard, as on ctl. Caller holds the lock."""
        for frame in self.stream.read():
            m = wire.decode(frame)
            if m is None:
                continue
            self.last_heard = time.monotonic()
            if m["k"] == "cmd":
                self._take_cmd(m)

    def silent_s(self, timeout_s):
        """Seconds ddptop has been silent when that exceeds timeout_s after
        its first ping, else 0 (a ddptop that never pings is never judged)."""
        with self.lock:
            self._read_ctl()
            if self.stream is not None:
                self._read_stream()
            if not self.pinged or timeout_s <= 0:
                return 0.0
            s = time.monotonic() - self.last_heard
        return s if s > timeout_s else 0.0

    def _store(self, kind, key, fields, timeout_s):
        with self.lock:
            self.vals.pop(key, None)    # an earlier request's late reply
            self.ctl.send(wire.encode(kind, self.rank, dict(key=key, **fields)))
        deadline = time.monotonic() + timeout_s + STORE_MARGIN_S
        while time.monotonic() < deadline:
            with self.lock:
                m = self.vals.pop(key, None)
                if m is not None:
                    return m
                if self.ctl.poll(50):
                    m = self._read_ctl(want_key=key)
                    if m is not None:
                        return m
        raise StoreError(f'store: no reply from ddptop for "{key}" within {timeout_s + STORE_MARGIN_S:g} s')

    def store_set(self, key, val):
        m = self._store("set", key, {"val": val}, 0)
        if not m.get("ok"):
            why = m.get("error") or ""
            raise StoreError(f'store: ddptop refused set "{key}"' + (f": {why}" if why else ""))

    def store_get(self, key, timeout_s):
        m = self._store("get", key, {"timeout_ms": int(timeout_s * 1000)}, timeout_s)
        if not m.get("ok"):
            raise StoreError(f'store: key "{key}" did not appear within {timeout_s:g} s')
        return m.get("val", b"")

    def close(self, linger_ms=2000):
        with self.lock:
            self._flush()
            if self.stream is not None:
                self.stream.close(min(linger_ms, self.linger_ms) / 1000.0)
            self.tel.setsockopt(self.z.LINGER, min(linger_ms, self.linger_ms))
            self.tel.close()
            self.ctl.close()
        self.ctx.term()
