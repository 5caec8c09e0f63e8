# `ddptop run -n N --python PY examples/ddp_basics.py ARGS` launches N ranks
# (2, then 4) of an unchanged torch DDP script under the adapter, as
# torchrun would.
# From the recording: every message kind arrives; each step's loss is the
# one the script printed; the DDP buckets reported are the ones the comm
# hook logged and add up to the model; the model and data told (info) are
# DDP's module and the DataLoader's dataset; each epoch's shard is
# DistributedSampler's; beats say where the script is. The job ends clean.
. tests/lib.sh
"$PY" -c 'import torch' 2>/dev/null || skip "no torch for $PY"
data=synthetic
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] && data=fashion-mnist
for n in 2 4; do
d=$TMP/n$n
out=$d/out.jsonl
mkdir -p "$d"
timeout 280 "$DDPTOP" run -n $n --python "$PY" --headless --json --record "$d/rec" --log-dir "$d/logs" \
    examples/ddp_basics.py --data $data --limit 2000 --epochs 2 --out "$d/model.pt" >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$out" "$d"/logs/*; die "ddptop run -n $n exited $rc"; }
grep -q "\"verdict\":\"job done: all $n ranks ended cleanly\"" "$out" || { cat "$out"; die "-n $n: no clean verdict"; }
"$DDPTOP" export "$d/rec" --jsonl "$d/rec.jsonl" || die "export failed"
"$PY" - "$d" $n <<'PYEOF' || die "-n $n: what ddptop received is not what the script did"
import json, math, re, sys
import torch
from torch.utils.data import DistributedSampler
tmp, n = sys.argv[1], int(sys.argv[2])
steps = 2 * math.ceil(math.ceil(2000 / n) / 64)
msgs = [json.loads(l) for l in open(f"{tmp}/rec.jsonl")]
of = lambda k, r=None: [m for m in msgs if m.get("k") == k and (r is None or m.get("r") == r)]
kinds = {"hello", "info", "phase", "step", "coll", "shard", "ckpt", "log", "beat", "bye"}
assert kinds <= {m.get("k") for m in msgs}, kinds - {m.get("k") for m in msgs}
for r in range(n):
    printed = re.findall(r"^rank %d epoch (\d+) step (\d+) loss (\S+)$" % r, open(f"{tmp}/logs/rank-{r}.log").read(), re.M)
    got = [(m["epoch"], m["step"], m["loss"]) for m in of("step", r)]
    want = [(int(e), int(s), float(l)) for e, s, l in printed]
    assert got == want and len(got) == steps, (r, got[:3], want[:3], len(got))
    params = int(re.search(r"^rank %d params (\d+)$" % r, open(f"{tmp}/logs/rank-{r}.log").read(), re.M)[1])
    layouts = [m["text"] for m in of("log", r) if m["text"].startswith("DDP gradient buckets")]
    assert layouts, "no bucket layout"
    for text in layouts:
        since = int(re.search(r"from step (\d+)", text)[1])
        want_b = sorted((int(i), int(b)) for i, b in re.findall(r"(\d+): (\d+) B", text))
        assert sum(b for _, b in want_b) == 4 * params, (text, params)
        later = [int(re.search(r"from step (\d+)", t)[1]) for t in layouts if int(re.search(r"from step (\d+)", t)[1]) > since]
        until = min(later) if later else 10 ** 9
        for s in range(since, min(until, steps + 1)):
            seen = sorted((c["bucket"], c["bytes"]) for c in of("coll", r) if c["step"] == s and c["bucket"] >= 0)
            assert seen == want_b, (r, s, seen, want_b)
    shards = of("shard", r)
    assert [s["epoch"] for s in shards] == [0, 1], shards
    for s in shards:
        ref = DistributedSampler(range(s["size"]), num_replicas=n, rank=r, shuffle=True, seed=0)
        ref.set_epoch(s["epoch"])
        assert s["idx"] == list(ref) and s["num_samples"] == ref.num_samples, (r, s["epoch"])
    beats = of("beat", r)
    assert beats and all(b["where"] for b in beats), beats
    assert any("ddp_basics.py:" in b["where"] for b in beats), [b["where"] for b in beats]
    assert [m["status"] for m in of("bye", r)] == [0]
    # the model and data the header shows: DDP's module, the DataLoader's dataset
    info = of("info", r)[-1]
    assert (info["model"], info["params"], info["dataset"], info["dataset_size"], info["batch"]) == \
        ("Sequential", params, "TensorDataset", 2000, 64), info
h = of("hello", 0)[0]
assert h["backend"] == "gloo" and h["device"] == "cpu" and "torch" in h["version"], h
ck = of("ckpt", 0)
assert len(ck) == 1 and ck[0]["ok"] and ck[0]["path"].endswith("model.pt") and ck[0]["step"] == steps, ck
assert [m["world"] for m in of("hello")] == [n] * n, of("hello")
print(f"PASS: {n} ranks: kinds, losses, buckets, shards, beats")
PYEOF
wait_for 5 no_workers || die "workers left running"
done
echo "PASS: ddptop run of a torch DDP script"
