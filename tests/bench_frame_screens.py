#!/usr/bin/env python3
"""tests/bench_frame_screens.py A.tty B.tty — do two terminal byte streams show
the same screens? Each is a copy bench_frame wrote with --tty-out FILE --marks 1
(every measured frame ends with an OSC that sets the window title); both are
played into a 200x60 tmux pane frame by frame and the pane is captured with
its attributes and colours (capture-pane -e, read as cells by
tests/tools/sgr_cells.py) after each. Prints the first
frame that differs, or that all N frames are the same; exit 0 when the same.

Used to check that frames written by ddptop itself (tui/screen/tty_frame.c)
show exactly what ncurses's refresh showed (docs/BENCHMARKS.md).
Env: COLS (200), ROWS (60), TERM_IN (the pane's TERM for tmux, screen-256color).
"""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools"))
from sgr_cells import cells  # noqa: E402  what each cell shows

MARK = b"\033]2;bench-frame\007"


def frames(path):
    data = open(path, "rb").read()
    parts = data.split(MARK)
    return parts[:-1]  # the tail after the last frame is endwin's


class Pane:
    def __init__(self, name, cols, rows):
        self.sock = "bfs-%d-%s" % (os.getpid(), name)
        self.dir = tempfile.mkdtemp(prefix="bfs.")
        self.fifo = os.path.join(self.dir, "in")
        os.mkfifo(self.fifo)
        subprocess.run(["tmux", "-L", self.sock, "-f", "/dev/null", "new-session", "-d", "-x", str(cols),
                        "-y", str(rows), "stty raw -echo; exec cat %s" % self.fifo], check=True)
        self.w = open(self.fifo, "wb", buffering=0)
        self.n = 0

    def tmux(self, *args):
        return subprocess.run(["tmux", "-L", self.sock] + list(args), check=True, capture_output=True).stdout

    def play(self, chunk):
        self.n += 1
        title = b"f%d" % self.n
        self.w.write(chunk + b"\033]2;" + title + b"\007")
        for _ in range(500):
            if self.tmux("display", "-p", "-t", "0", "#{pane_title}").strip() == title:
                return self.tmux("capture-pane", "-p", "-e", "-t", "0")
            time.sleep(0.01)
        raise RuntimeError("tmux did not take frame %d" % self.n)

    def close(self):
        self.w.close()
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True)


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[0])
        return 2
    cols, rows = int(os.environ.get("COLS", 200)), int(os.environ.get("ROWS", 60))
    a, b = frames(sys.argv[1]), frames(sys.argv[2])
    if len(a) != len(b) or not a:
        print("bench_frame_screens: %d frames against %d" % (len(a), len(b)))
        return 1
    pa, pb = Pane("a", cols, rows), Pane("b", cols, rows)
    try:
        for i, (ca, cb) in enumerate(zip(a, b)):
            sa = cells(pa.play(ca).decode("utf-8", "replace"))
            sb = cells(pb.play(cb).decode("utf-8", "replace"))
            if sa != sb:
                la, lb = sa.splitlines(), sb.splitlines()
                for y, (x, z) in enumerate(zip(la, lb)):
                    if x != z:
                        print("frame %d differs first on row %d:\n  %r\n  %r" % (i, y, x, z))
                        break
                return 1
        print("bench_frame_screens: %d frames, the same screens (text, attributes, colours)" % len(a))
        return 0
    finally:
        pa.close()
        pb.close()


if __name__ == "__main__":
    sys.exit(main())
