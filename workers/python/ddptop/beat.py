"""beat.py — the heartbeat thread, and stacks on demand.

Once a second, also while the script is stuck in a collective (torch
releases the GIL while it waits): a `beat` with the last step, the phase,
the oldest collective in flight (with its DDP bucket, -1 outside DDP's
buckets, and its payload's count and dtype where known) and where the script's thread is, as
"file:line function" of the script's innermost frame in the key "where" (ddptop skips keys it does not
know). It also sends the telemetry burst, so a slow step never leaves
messages waiting, and watches ddptop (front.py): gone (dead, or silent
past DDPTOP_PING_TIMEOUT seconds, default 15, 0 off, while not stopped),
the rank stops at an agreed step with a final checkpoint and exits 1;
stopped (SIGSTOP, Ctrl-Z), it trains on.

faulthandler dumps every thread's Python stack to stderr (the rank's log)
on SIGUSR1 (DDPTOP_STACK_SIGNAL names another), even while the
interpreter is blocked. Where ddptop cannot read this rank's log (`ddptop
listen`, another node, ranks a script spawned, which share one log), it
asks on ctl instead (cmd "stacks", arg a token): this thread, which runs
while the script's thread waits in a collective (torch releases the GIL),
looks for such an ask every STACK_POLL_S, dumps every thread into a file
of its own and sends the text back in one "stack" message with the token
(at most STACK_MAX bytes, cut at a line; docs/PROTOCOL.md). Only this thread takes that signal: every other
thread blocks it, so it never interrupts a blocking call of the script's
thread (torch 1.13's TCPStore gives up on EINTR inside
init_process_group, and poll() is never restarted, SA_RESTART or not).
"""
import faulthandler
import os
import runpy
import signal
import sys
import tempfile
import threading
import time

import torch

from . import collectives, compat, front
from .state import run

BEAT_S = 1.0
# Between beats, while the telemetry stream holds what its socket had no room
# for, it is handed over this often: a script blocked in a collective after
# ddptop fell behind otherwise delivered its backlog a socket-full a beat.
PUMP_S = 0.05
# How often the thread looks for ddptop's "stacks" ask between beats.
STACK_POLL_S = 0.1
# Most bytes of one answer (the wire's PROTO_MAX_STACK_BYTES).
STACK_MAX = 64 << 10


# Frames under these are the machinery, not the script's line a user looks for
# (the standard library's, frozen modules' such as <frozen genericpath> too).
_SKIP = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (torch, runpy, threading)) + \
    (os.path.dirname(os.path.abspath(__file__)) + os.sep, "<frozen ")


def frame_where(top):
    """A thread's innermost frame of the script's: "train.py:88 main"
    (torch's and the adapter's own frames skipped; the innermost when the
    script has none); "" without a frame."""
    f = top
    while f is not None and f.f_code.co_filename.startswith(_SKIP):
        f = f.f_back
    f = f or top
    if f is None:
        return ""
    return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno} {f.f_code.co_name}"


def where(r, top=None):
    """The script's innermost frame on the main thread (frame_where). top:
    the main thread's innermost frame, if known."""
    return frame_where(top or sys._current_frames().get(r.main_thread))


_FR = None


def beat_once(r):
    global _FR
    frames = sys._current_frames()
    top = frames.get(r.main_thread)
    lingering = r.lingering
    if lingering:       # the script has finished: where its process waits is a thread of its own (linger.py)
        top = next((frames[t.ident] for t in lingering if t.is_alive() and t.ident in frames), top)
    seq, op, since, bucket, count, dtype = collectives.oldest_in_flight()
    if seq < 0 and compat.torch_numbering():      # a collective the wrappers do not see? (2.x)
        _FR = _FR or compat.FlightRecorder()
        fr = _FR.in_flight(top)
        if fr:
            seq, op, since = fr
    if r.collect is not None:
        r.collect(r)
    if r.later_colls:     # a backward without an optimizer step: its buckets do not wait for one
        collectives.send_later(r, host_only=True)
    r.send("beat", step=r.step, phase=r.phase, seq=seq, op=op, since=since, where=where(r, top), bucket=bucket,
           count=count, dtype=dtype)
    r.up.flush()


_DUMP = None


def dump_stacks():
    """Every thread's stack as faulthandler writes it (the text the stack
    signal puts in the log), and whether it was cut to STACK_MAX bytes (at
    a line)."""
    global _DUMP
    if _DUMP is None:
        _DUMP = tempfile.TemporaryFile()
    fd = _DUMP.fileno()
    os.lseek(fd, 0, os.SEEK_SET)
    os.ftruncate(fd, 0)
    faulthandler.dump_traceback(file=fd, all_threads=True)
    os.lseek(fd, 0, os.SEEK_SET)
    data = b""
    while len(data) <= STACK_MAX:
        b = os.read(fd, STACK_MAX + 1 - len(data))
        if not b:
            break
        data += b
    cut = len(data) > STACK_MAX
    text = data.decode("utf-8", "replace")
    while len(text.encode("utf-8")) > STACK_MAX:
        cut = True
        b = text.encode("utf-8")[:STACK_MAX]
        text = b[:b.rfind(b"\n") + 1].decode("utf-8", "ignore")
    return text, cut


def answer_stacks(r, token):
    """ddptop's "stacks" ask: every thread's stack back on ctl, with its token."""
    try:
        text, cut = dump_stacks()
    except (OSError, ValueError, RuntimeError) as e:
        text, cut = f"(no dump: {e})\n", False
    r.up.send_ctl("stack", {"tok": token, "cut": cut, "text": text})


def _say(r, text):
    sys.stderr.write(f"ddptop-py rank {r.rank}: {text}\n")
    sys.stderr.flush()


def watch_front(r, fr, ping_timeout_s):
    """Once a beat: is ddptop there, stopped or gone? (front.py)"""
    was_gone, was_stopped = fr.gone, bool(fr.stopped_since)
    state, why = fr.look(r.up, ping_timeout_s)
    if state == front.GONE and r.lingering:
        from . import linger
        linger.front_gone(r)
    if state == front.GONE and not was_gone:
        _say(r, f"{why}: stopping after the next agreed step with a final checkpoint")
        r.front_gone = True
        from .steer import STEER
        STEER.front_gone()
        front.arm_backstop()
    elif state == front.STOPPED and not was_stopped:
        _say(r, f"{why}: training on; telemetry without room is dropped")
    elif state == front.OK and why:
        _say(r, why)
        r.log("info", why)


def _loop(r, stop, ping_timeout_s, fr):
    next_beat = time.monotonic() + BEAT_S
    while True:
        left = min(next_beat - time.monotonic(), STACK_POLL_S)
        if left > PUMP_S and r.up.backlog():
            left = PUMP_S
        if stop.wait(max(0.0, left)):
            return
        if r.hello_sent:
            token = r.up.take_stack_ask()
            if token is not None:
                answer_stacks(r, token)
        if time.monotonic() < next_beat:
            r.up.write_backlog()
            continue
        next_beat = time.monotonic() + BEAT_S
        watch_front(r, fr, ping_timeout_s)
        if r.hello_sent:      # a beat before the hello would name a rank ddptop does not know yet
            beat_once(r)


class Beater:
    """The running heartbeat thread; stop() ends it and waits for it, so no
    beat is on its way while the sockets close."""

    def __init__(self, thread, event, r, fr, ping_timeout_s):
        self.thread, self.event = thread, event
        self.r, self.fr, self.ping_timeout_s = r, fr, ping_timeout_s

    def front_gone(self):
        """Whether ddptop is gone: this rank saw it, or (when another rank
        saw it first and the stop came through the agreement) sees it now."""
        if not self.r.front_gone:
            watch_front(self.r, self.fr, self.ping_timeout_s)
        return self.r.front_gone

    def stop(self, wait_s=2.0):
        self.event.set()
        if self.thread is not threading.current_thread():
            self.thread.join(wait_s)


def start(env=None):
    """Start beating; returns the Beater that stops the thread."""
    env = os.environ if env is None else env
    r = run()
    try:
        ping = float(env.get("DDPTOP_PING_TIMEOUT") or 15)
    except ValueError:
        ping = 15.0
    sig = getattr(signal, env.get("DDPTOP_STACK_SIGNAL") or "SIGUSR1", signal.SIGUSR1)
    faulthandler.register(sig, file=sys.stderr, all_threads=True)
    stop = threading.Event()
    fr = front.Front(front.take_parent())
    t = threading.Thread(target=_loop, args=(r, stop, ping, fr), name="ddptop-beat", daemon=True)
    t.start()
    _only_here(sig)
    return Beater(t, stop, r, fr, ping)


def _only_here(sig):
    """Block the stack signal in the calling (script's) thread, after the
    beat thread started with it open: threads made from now on (torch's,
    Gloo's, the DataLoader's) inherit the block, ZeroMQ's block every
    signal, so the kernel hands the signal to the beat thread."""
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, {sig})
    except (AttributeError, OSError, ValueError):
        pass
