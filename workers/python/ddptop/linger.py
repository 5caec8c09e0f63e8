"""linger.py — a script that has finished but whose process does not exit.

After the script's last line Python joins every non-daemon thread before
the process may exit (threading._shutdown): an uploader blocked in
queue.get(), a logger's writer, a thread the script forgot. The process
then hangs at shutdown with nothing of the script's on its main thread.
Here that wait happens before Python's own, while the heartbeat still
runs: the rank says its bye (the script's status: the script is done),
warns once which threads it waits for and where each is, and the beat's
"where" names the first one's innermost frame of the script's, so ddptop
can name it live and end it with its ladder (`w` still works meanwhile).
ddptop gone meanwhile: the rank exits at once (nothing is left to save).
"""
import os
import sys
import threading

from . import beat


def non_daemon():
    """The threads Python would wait for at exit (not the main thread, not the adapter's)."""
    main = threading.main_thread()
    return [t for t in threading.enumerate() if t is not main and not t.daemon and t.is_alive()]


def describe(threads, frames=None):
    """"'uploader' at train.py:88 in run, 'Thread-2' at ..."."""
    frames = sys._current_frames() if frames is None else frames
    out = []
    for t in threads:
        f = frames.get(t.ident)
        w = beat.frame_where(f) if f is not None else ""
        if w:
            file_line, _, fn = w.partition(" ")
            out.append(f"'{t.name}' at {file_line} in {fn}")
        else:
            out.append(f"'{t.name}'")
    return ", ".join(out)


def wait(r, status):
    """Before the rank's bye: when non-daemon threads are alive, say the bye
    now, warn, and wait for them with the beat on. Returns whether the bye
    was sent."""
    threads = non_daemon()
    if not threads:
        return False
    r.bye(status)
    r.lingering = threads
    what = describe(threads)
    n = len(threads)
    r.log("warn", f"the script has finished but its process waits for non-daemon thread{'s' if n > 1 else ''} "
                  f"{what} (Python joins them before the process exits)")
    sys.stderr.write(f"ddptop-py rank {r.rank}: the script has finished; waiting for non-daemon "
                     f"thread{'s' if n > 1 else ''} {what}\n")
    sys.stderr.flush()
    for t in threads:
        while t.is_alive():
            t.join(0.5)
    r.lingering = None
    return True


def front_gone(r):
    """ddptop is gone while this rank waits for its threads: exit now."""
    sys.stderr.write(f"ddptop-py rank {r.rank}: ddptop is gone while the process waited for non-daemon "
                     f"threads after the script finished; exit 1\n")
    sys.stderr.flush()
    os._exit(1)
