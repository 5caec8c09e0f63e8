"""help_box.py — is every row of the key table in the ? box as drawn?

    help_box.py TITLE ROWS PAGE...

ROWS: tool_keys output (keys TAB line, one row a line). PAGE: a capture of
the screen with the help open, one per scroll position (tmux capture-pane).
Each page's box is found by its TITLE on the top border; its inside lines
are put at their place in the help (the border's "▲ N more" says the first
line shown, none: 0), so a description wrapped over a page's edge joins
up. Every row's keys and whole line must then be read in order, spaces
collapsed. Prints what is missing; exit 0 all there, 1 not, 2 usage.
"""
import re
import sys


def inside(page, title):
    rows = page.split("\n")
    for y, row in enumerate(rows):
        t = row.find(" %s " % title)
        if t < 2:
            continue
        x0 = t - 2
        if y + 1 >= len(rows) or rows[y + 1][x0:x0 + 1] not in ("│", "|"):
            continue
        right = rows[y + 1].find(rows[y + 1][x0], x0 + 1)
        m = re.search(r"[▲^] (\d+) more", row[x0:])
        top = int(m.group(1)) if m else 0
        lines = []
        for r in rows[y + 1:]:
            if r[x0:x0 + 1] not in ("│", "|"):
                break
            lines.append(r[x0 + 2:right - 1])
        return top, lines
    return None


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    title = sys.argv[1]
    want = [l.rstrip("\n").split("\t", 1) for l in open(sys.argv[2], encoding="utf-8") if l.strip()]
    at = {}
    for p in sys.argv[3:]:
        got = inside(open(p, encoding="utf-8").read(), title)
        if not got:
            print("no box titled %r in %s" % (title, p))
            return 1
        top, lines = got
        for i, l in enumerate(lines):
            at[top + i] = l
    if sorted(at) != list(range(len(at))):
        print("lines never shown: %s" % sorted(set(range(max(at) + 1)) - set(at)))
        return 1
    text = " ".join(" ".join(at[i].split()) for i in range(len(at)))
    missing = 0
    for keys, line in want:
        need = " ".join((keys + " " + line).split())
        if need not in text:
            print("missing: %s" % need)
            missing += 1
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
