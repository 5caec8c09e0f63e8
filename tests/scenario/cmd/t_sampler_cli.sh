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
# Whole numbers, read exactly: a seed above 2^53 keeps its low bits (torch
# seeds with (seed + epoch) & 0xffffffff), and a fraction or a hex number is
# refused, not truncated.
s1=$("$DDPTOP" sampler --size 10 --world 2 --seed 9007199254740993) || die "big seed: exit $?"
s0=$("$DDPTOP" sampler --size 10 --world 2 --seed 9007199254740992) || die "big seed: exit $?"
[ "$s1" != "$s0" ] || die "seeds 2^53 and 2^53+1 gave the same shards: $s1"
if "$PY" -c 'import torch' 2>/dev/null; then
    want=$("$PY" -c 'from torch.utils.data.distributed import DistributedSampler as D
for r in (0, 1): print("rank %d: %s" % (r, ",".join(map(str, D(range(10), num_replicas=2, rank=r, seed=9007199254740993)))))')
    [ "$s1" = "$want" ] || die "seed 2^53+1: $s1, torch: $want"
fi
for bad in "--size 2.5" "--world 1.5" "--seed 1.5" "--size 0x10" "--epoch 1e3"; do
    "$DDPTOP" sampler --size 10 --world 2 $bad >/dev/null 2>"$TMP/e"; rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/e")" -eq 1 ] && grep -q "expected an integer" "$TMP/e" \
        || die "sampler $bad: exit $rc: $(cat "$TMP/e")"
done
echo "ok: sampler's whole numbers are exact"
