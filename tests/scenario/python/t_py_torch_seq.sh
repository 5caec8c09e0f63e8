# Collectives numbered as torch numbers them, and Flight Recorder in the
# hang verdict, where torch has them (2.x: `make test T=python/ TORCH_PY=...`);
# the adapter's own count where it has not (Debian's 1.13).
# A 2-rank script makes four collectives, one of them on the process group
# directly (unseen by the wrappers), then DDP broadcasts the model, and rank
# 1 sleeps while rank 0 waits in DDP's broadcast of a BatchNorm's buffers at
# the first forward (dist._broadcast_coalesced, wrapped). 2.x: the coll
# messages carry seqs 1, 2, 4 (torch's count, the unseen one included), then
# DDP's two broadcasts, the last torch's number N as the script reads it
# after the forward; 1.13: seqs 1, 2, 3, 4, 5 (the adapter's count). The
# headless hang verdict names broadcast #N (Flight Recorder agrees on 2.x)
# for rank 1. Either way the job ends clean.
. tests/lib.sh
. tests/lib_py.sh
cat >"$TMP/seqs.py" <<'EOF'
import time
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
count = getattr(dist.distributed_c10d._get_default_group(), "_get_sequence_number_for_group", lambda: -1)
print(f"rank {rank} torch seq at init {count()}", flush=True)
t = torch.ones(8)
dist.all_reduce(t)
dist.barrier()
dist.distributed_c10d._get_default_group().broadcast(t, 0).wait()
dist.broadcast(t, 0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.BatchNorm1d(4))
if rank == 1:
    time.sleep(8)
model(torch.randn(2, 4))
print(f"rank {rank} torch seq {count()}", flush=True)
dist.destroy_process_group()
EOF
out=$TMP/out.jsonl
timeout 200 "$DDPTOP" run -n 2 --python "$PY" --headless --json --hang-after 3 --record "$TMP/rec" \
    --log-dir "$TMP/logs" "$TMP/seqs.py" >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$out" "$TMP"/logs/*; die "ddptop run exited $rc"; }
"$DDPTOP" export "$TMP/rec" --jsonl "$TMP/rec.jsonl" || die "export failed"
"$PY" - "$TMP" <<'PYEOF' || { cat "$out"; die "collectives not numbered as torch numbers them"; }
import json, re, sys
tmp = sys.argv[1]
msgs = [json.loads(l) for l in open(f"{tmp}/rec.jsonl")]
out = [json.loads(l) for l in open(f"{tmp}/out.jsonl") if l.startswith("{")]
log0 = open(f"{tmp}/logs/rank-0.log").read()
numbered = re.search(r"^rank 0 torch seq at init (-?\d+)$", log0, re.M)[1] == "0"  # compat.py's check
torch_seq = int(re.search(r"^rank 0 torch seq (-?\d+)$", log0, re.M)[1])
last = torch_seq if numbered else 5
for r in (0, 1):
    seqs = [(m["seq"], m["op"]) for m in msgs if m.get("k") == "coll" and m.get("r") == r]
    want = [(1, "allreduce"), (2, "barrier"), (4 if numbered else 3, "broadcast")]
    assert seqs[:3] == want, (r, seqs, want)
    # DDP's broadcasts: the model at construction, the buffers at the forward
    ddp = seqs[3:]
    assert [op for _, op in ddp] == ["broadcast"] * 2 and want[2][0] < ddp[0][0] < ddp[1][0] == last, (r, seqs, last)
hangs = [m for m in out if m.get("k") == "hang"]
assert hangs, "no hang verdict"
h = hangs[0]
assert h["op"] == "broadcast" and h["seq"] == last and h["waiting"] == [0] and h["missing"] == [1], h
assert re.search(r"rank 0 waits in broadcast #%d .*for rank 1" % last, h["verdict"]), h["verdict"]
print("torch numbering" if numbered else "the adapter's numbering", "; hang:", hangs[0]["verdict"] if hangs else "none")
PYEOF
grep -q '"verdict":"job done: all 2 ranks ended cleanly"' "$out" || { cat "$out"; die "no clean verdict"; }
wait_for 10 no_ranks || die "ranks left running: $(our_ranks)"
echo "PASS: collectives numbered as torch numbers them where it does"
