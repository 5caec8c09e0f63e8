# The buckets steering rides on, and the shards, as ddptop shows them for
# the lesson script (2 ranks, headless --json, a model DDP splits into two
# buckets once it rebuilds them after step 1): the layout ddptop shows from
# step 2 on is DDP's own (the script prints _get_ddp_logging_data()'s
# rebuilt_bucket_sizes), every later step all-reduces exactly those buckets
# (index and bytes) and they add up to the model; each epoch's shard is
# DistributedSampler's own indices for the rank. The hook is the C++ one
# where it is built for this torch (the rank's log says which), and its
# buckets share one count with the script's own collectives: each seq is one
# call, the same on both ranks.
. tests/lib.sh
. tests/scenario/python/lib_py.sh
out=$TMP/out.jsonl
py_run -n 2 --headless --json --record "$TMP/rec" --log-dir "$TMP/logs" -- examples/ddp_basics.py --data synthetic \
    --limit 1000 --epochs 2 --hidden 512,512 --bucket-cap-mb 0.5 --out "$TMP/model.pt" >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$out" "$TMP"/logs/*; die "ddptop run exited $rc"; }
"$DDPTOP" export "$TMP/rec" --jsonl "$TMP/rec.jsonl" || die "export failed"
"$PY" - "$TMP" "$(py_hooks)" <<'PYEOF' || die "ddptop's buckets or shards are not DDP's"
import json, re, sys
from torch.utils.data import DistributedSampler
tmp, hook = sys.argv[1], sys.argv[2].split()[0]
shown = [json.loads(l) for l in open(f"{tmp}/out.jsonl") if l.startswith("{")]
msgs = [json.loads(l) for l in open(f"{tmp}/rec.jsonl")]
of = lambda k, r: [m for m in msgs if m.get("k") == k and m.get("r") == r]
for r in range(2):
    log = open(f"{tmp}/logs/rank-{r}.log").read()
    ddp = [int(b) for b in re.search(r"^rank %d ddp buckets (.*)$" % r, log, re.M)[1].split(",")]
    params = int(re.search(r"^rank %d params (\d+)$" % r, log, re.M)[1])
    assert len(ddp) == 2 and sum(ddp) == 4 * params, (ddp, params)
    said = [m["text"] for m in shown if m["k"] == "event" and m["r"] == r and "DDP comm hook: " in m["text"]]
    assert len(said) == 1 and ("DDP comm hook: C++ (" if hook == "cxx" else "DDP comm hook: Python") in said[0], said
    layouts = [m["text"] for m in shown if m["k"] == "event" and m["r"] == r and "DDP gradient buckets" in m["text"]]
    last = layouts[-1]
    assert last.startswith(f"DDP gradient buckets from step 2: {len(ddp)} buckets;"), layouts
    assert [int(b) for b in re.findall(r"\d+: (\d+) B", last)] == ddp, (last, ddp)
    steps = sorted({m["step"] for m in of("step", r)})
    assert steps == list(range(1, 17)), steps      # 2 epochs of ceil(500 / 64) batches
    for s in steps[1:]:
        seen = sorted((c["bucket"], c["bytes"]) for c in of("coll", r) if c["step"] == s and c["bucket"] >= 0)
        assert seen == list(enumerate(ddp)), (r, s, seen, ddp)
    seqs = [c["seq"] for c in of("coll", r)]
    assert len(seqs) == len(set(seqs)), ("coll numbers", r, seqs)
    calls = {c["seq"]: (c["op"], c["bucket"], c["bytes"]) for c in of("coll", r)}
    if r == 0:
        calls0 = calls
    else:
        assert calls == calls0, ("the ranks' collectives differ", sorted(set(calls.items()) ^ set(calls0.items())))
    assert {op for op, _, _ in calls.values()} > {"allreduce"}, ("no collective of the script's own", calls)
    shards = of("shard", r)
    assert [s["epoch"] for s in shards] == [0, 1], [s["epoch"] for s in shards]
    for s in shards:
        ref = DistributedSampler(range(1000), num_replicas=2, rank=r, shuffle=True, seed=0)
        ref.set_epoch(s["epoch"])
        assert s["idx"] == list(ref) and (s["size"], s["num_samples"], s["total_size"]) == (1000, 500, 1000), r
print(f"PASS: buckets {ddp} as DDP's, shards as DistributedSampler's")
PYEOF
wait_for 10 no_ranks || die "ranks left running: $(our_ranks)"
echo "PASS: DDP's buckets and DistributedSampler's shards"
