#!/usr/bin/env python3
"""loss_compare.py — two runs' losses, step by step: rank 0's step
messages in two `ddptop export --jsonl` files, compared over their common
steps (at least --steps of them).

  python3 loss_compare.py A.jsonl B.jsonl TOL [--steps N]

TOL is the largest relative difference |b - a| / |a| allowed at any step
(0: equal bits). Prints one line, "N steps, max relative difference X at
step S (tolerance TOL)", and exits 0 within it, 1 otherwise or when a file
has fewer than N steps (default 20) or a non-finite loss.
"""
import json
import math
import sys


def losses(path):
    out = {}
    for line in open(path):
        m = json.loads(line)
        if m.get("k") == "step" and m.get("r") == 0:
            out[m["step"]] = m["loss"]
    return out


def main(argv):
    if len(argv) not in (4, 6) or (len(argv) == 6 and argv[4] != "--steps"):
        print(__doc__.strip().splitlines()[3].strip())
        return 2
    a, b, tol = losses(argv[1]), losses(argv[2]), float(argv[3])
    need = int(argv[5]) if len(argv) == 6 else 20
    common = sorted(set(a) & set(b))
    if len(common) < need:
        print("only %d common steps (%d and %d), need %d" % (len(common), len(a), len(b), need))
        return 1
    worst, at = 0.0, common[0]
    for s in common:
        if not (math.isfinite(a[s]) and math.isfinite(b[s])):
            print("step %d: loss %r and %r" % (s, a[s], b[s]))
            return 1
        r = abs(b[s] - a[s]) / abs(a[s]) if a[s] else abs(b[s])
        if r > worst:
            worst, at = r, s
    ok = worst <= tol if tol > 0 else all(a[s] == b[s] for s in common)
    print("%d steps, max relative difference %.3g at step %d (tolerance %s)" % (
        len(common), worst, at, "equal" if tol == 0 else "%g" % tol))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
