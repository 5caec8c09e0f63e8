"""front.py — is ddptop still there? (the Python twin of uplink_front in
workers/link/uplink.c; docs/RELIABILITY.md, item 2).

A ddptop that launched this rank is its parent, and it asked the kernel to
SIGKILL the rank when it dies (the parent-death signal). The adapter takes
that signal back: a rank killed with its parent saves nothing and runs no
`finally`. Instead the heartbeat thread looks once a second:

  gone     the parent died (getppid changed), or ddptop has been silent
           past DDPTOP_PING_TIMEOUT while not stopped: the rank asks for a
           checkpoint and a stop through the same agreement as `c` and `d`,
           so every rank stops after the same step and rank 0 writes the
           final checkpoint; the rank then exits 1 (nobody watched the end).
           A stop that cannot finish (a peer blocked for good) is ended by
           faulthandler's watchdog after GONE_BACKSTOP_S: the stacks go to
           the log, exit 1.
  stopped  silent, but the parent is in state T (Ctrl-Z of the TUI, SIGSTOP):
           the rank trains on, telemetry without room is dropped and
           counted; once ddptop runs again the rank says how long it trained
           on and how much was dropped.

A frontend that is not the parent (tests/tools/fake_front.py, `ddptop
listen`) is judged by its pings alone: silent past the timeout is gone.
"""
import ctypes
import faulthandler
import os
import sys
import time

PR_SET_PDEATHSIG, PR_GET_PDEATHSIG = 1, 2
GONE_BACKSTOP_S = 60.0
OK, STOPPED, GONE = "ok", "stopped", "gone"


def _prctl():
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def take_parent():
    """The parent's pid when it set a death signal for us (ddptop's
    launcher), which is then cleared; 0 when there is no such parent."""
    prctl = _prctl()
    if prctl is None:
        return 0
    sig = ctypes.c_int(0)
    if prctl(PR_GET_PDEATHSIG, ctypes.byref(sig), 0, 0, 0) != 0 or sig.value == 0:
        return 0
    parent = os.getppid()
    if parent <= 1 or prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0) != 0:
        return 0
    return parent


def proc_state(pid):
    """The state letter of /proc/PID/stat ("pid (comm) S ..."; comm may hold
    spaces and parentheses, hence the last ')'); "" when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            s = f.read()
    except OSError:
        return ""
    rp = s.rfind(b")")
    return chr(s[rp + 2]) if rp >= 0 and len(s) > rp + 2 else ""


class Front:
    def __init__(self, parent):
        self.parent = parent
        self.gone = False
        self.stopped_since = 0.0      # monotonic; 0 while not stopped
        self.drops_at_stop = 0

    def look(self, up, ping_timeout_s):
        """(OK | STOPPED | GONE, why) now; GONE stays."""
        if self.gone:
            return GONE, "ddptop is gone"
        if self.parent and os.getppid() != self.parent:
            self.gone = True
            up.no_waiting()
            return GONE, f"ddptop (pid {self.parent}) is gone"
        silent = up.silent_s(ping_timeout_s)
        if silent and self.parent and proc_state(self.parent) in ("T", "t"):
            if not self.stopped_since:
                self.stopped_since = time.monotonic() - silent
                self.drops_at_stop = up.drops
            return STOPPED, f"ddptop (pid {self.parent}) is stopped"
        if self.stopped_since:
            return OK, self._resumed(up, up.rank)
        if silent:
            self.gone = True
            up.no_waiting()
            return GONE, f"nothing from ddptop for {silent:.1f} s (DDPTOP_PING_TIMEOUT)"
        return OK, ""

    def _resumed(self, up, rank):
        secs = time.monotonic() - self.stopped_since
        self.stopped_since = 0.0
        up.last_heard = time.monotonic()     # a whole ping timeout to catch up and ping again
        return (f"rank {rank} trained on while ddptop was stopped (about {secs:.1f} s): "
                f"{up.drops - self.drops_at_stop} telemetry messages dropped")


def arm_backstop():
    """Once gone: the rank ends by itself after GONE_BACKSTOP_S whatever
    blocks it (faulthandler's watchdog is a C thread: no GIL needed)."""
    faulthandler.dump_traceback_later(GONE_BACKSTOP_S, exit=True, file=sys.stderr)
