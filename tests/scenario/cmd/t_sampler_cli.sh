# `ddptop sampler` prints each rank's indices exactly as PyTorch's
# DistributedSampler (rows of the shared fixture), and refuses bad input.
. tests/lib.sh
fx=tests/fixtures/distributed_sampler.tsv   # a copy of shared/fixtures' file: a clone tests alone
[ -f "$fx" ] || die "fixture $fx missing"
"$PY" - "$DDPTOP" "$fx" <<'PYEOF' || die "sampler output differs from PyTorch"
import subprocess, sys, csv
ddptop, fx = sys.argv[1], sys.argv[2]
cols = ["size", "world", "rank", "seed", "epoch", "shuffle", "drop_last", "indices"]
rows = [dict(zip(cols, l.rstrip("\n").split("\t"))) for l in open(fx) if l.strip() and not l.startswith("#")]
assert rows, "empty fixture"
checked = 0
groups = {}
for r in rows:
    key = (r["size"], r["world"], r["seed"], r["epoch"], r["shuffle"], r["drop_last"])
    groups.setdefault(key, {})[int(r["rank"])] = r["indices"]
for (size, world, seed, epoch, shuffle, drop_last), ranks in groups.items():
    args = [ddptop, "sampler", "--size", size, "--world", world, "--seed", seed, "--epoch", epoch]
    if shuffle.lower() in ("0", "false"): args.append("--no-shuffle")
    if drop_last.lower() in ("1", "true"): args.append("--drop-last")
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(out) == int(world), (args, out)
    for rank, want in ranks.items():
        got = out[rank].split(": ", 1)[1] if ": " in out[rank] else ""
        norm = lambda s: ",".join(x for x in s.replace("[", "").replace("]", "").replace(" ", "").split(",") if x)
        assert norm(got) == norm(want), (args, rank, got[:80], want[:80])
        checked += 1
print("checked", checked, "rank rows")
PYEOF
"$DDPTOP" sampler --size 10 --world 0 >/dev/null 2>"$TMP/e"; rc=$?
[ $rc -eq 2 ] || die "--world 0 exited $rc"
[ "$(wc -l <"$TMP/e")" -eq 1 ] || die "error is not one line: $(cat "$TMP/e")"
"$DDPTOP" sampler --size 10 --world 2 --bogus >/dev/null 2>&1; [ $? -eq 2 ] || die "unknown option not refused"
