#!/usr/bin/env python3
"""tests/tools/sgr_cells.py — a `tmux capture-pane -p -e` capture (stdin) as
what each cell shows: its character and its attributes and colours, one line
a row, each change of style written as {bold,dim,fg=..,...} before the cell
that starts it, every row from the default style, blanks in the default style
at the end of a row left out, a blank's style reduced to what shows.

tmux writes a capture's styles as changes from the cell before, across rows,
and keeps a blank that was written apart from one that was erased; two
screens that look the same can so capture differently. This form compares
equal exactly when the screens look the same (tests/scenario/screen/
t_tui_direct.sh, tests/bench_frame_screens.py).
"""
import re
import sys

SGR = re.compile(r"\x1b\[([0-9;:]*)m")
OTHER = re.compile(r"\x1b(\[[0-9;?]*[A-Za-ln-z]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78])")
FLAGS = {1: "bold", 2: "dim", 3: "italic", 4: "underline", 5: "blink", 7: "reverse", 8: "invisible", 9: "strike"}
OFF = {22: ("bold", "dim"), 23: ("italic",), 24: ("underline",), 25: ("blink",), 27: ("reverse",),
       28: ("invisible",), 29: ("strike",)}
DEFAULT = (frozenset(), None, None)


def apply(state, params):
    flags, fg, bg = set(state[0]), state[1], state[2]
    p = [int(x) if x else 0 for x in params.replace(":", ";").split(";")] if params else [0]
    i = 0
    while i < len(p):
        c = p[i]
        if c == 0:
            flags, fg, bg = set(), None, None
        elif c in FLAGS:
            flags.add(FLAGS[c])
        elif c in OFF:
            flags.difference_update(OFF[c])
        elif 30 <= c <= 37 or 90 <= c <= 97:
            fg = str(c)
        elif 40 <= c <= 47 or 100 <= c <= 107:
            bg = str(c)
        elif c == 39:
            fg = None
        elif c == 49:
            bg = None
        elif c in (38, 48) and i + 1 < len(p):
            if p[i + 1] == 5 and i + 2 < len(p):
                v, i = "5;%d" % p[i + 2], i + 2
            elif p[i + 1] == 2 and i + 4 < len(p):
                v, i = "2;%d;%d;%d" % tuple(p[i + 2:i + 5]), i + 4
            else:
                v = "?"
            if c == 38:
                fg = v
            else:
                bg = v
        i += 1
    return (frozenset(flags), fg, bg)


def visible(ch, state):
    """A blank shows only its background, reverse video, underline and
    strike (and its foreground when reversed)."""
    if ch != " ":
        return state
    flags = state[0] & {"reverse", "underline", "strike"}
    return (frozenset(flags), state[1] if "reverse" in flags else None, state[2])


def show(state):
    parts = sorted(state[0])
    if state[1] is not None:
        parts.append("fg=" + state[1])
    if state[2] is not None:
        parts.append("bg=" + state[2])
    return "{" + ",".join(parts) + "}"


def cells(text):
    state = DEFAULT
    rows = []
    for line in text.split("\n"):
        row = []
        pos = 0
        while pos < len(line):
            if line[pos] == "\x1b":
                m = SGR.match(line, pos)
                if m:
                    state = apply(state, m.group(1))
                    pos = m.end()
                    continue
                m = OTHER.match(line, pos)
                pos = m.end() if m else pos + 1
                continue
            row.append((line[pos], visible(line[pos], state)))
            pos += 1
        while row and row[-1][0] == " " and row[-1][1] == DEFAULT:
            row.pop()
        out, cur = [], DEFAULT
        for ch, st in row:
            if st != cur:
                out.append(show(st))
                cur = st
            out.append(ch)
        rows.append("".join(out))
    while rows and rows[-1] == "":
        rows.pop()
    return "\n".join(rows)


if __name__ == "__main__":
    sys.stdout.write(cells(sys.stdin.read()) + "\n")
