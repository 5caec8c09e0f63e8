# A rank exits although an async collective of its script was still in
# flight when the group's last reference went (the cause of issue 29's Join
# hang: Join's forward all-reduces are async and nobody waits for them).
# DDP's Reducer holds the script's process group after
# destroy_process_group; DDP objects sit in reference cycles, so the Reducer
# goes when the garbage collector runs, on whatever thread holds the GIL,
# and ~ProcessGroupGloo joins Gloo's worker threads from there. The adapter
# once put a Python callback on every async collective's Future: it runs on
# Gloo's worker thread and takes the GIL, so that join waited forever (rank
# 0 never exited; bare, the same script exits). Here rank 1 joins rank 0's
# async all-reduce only once rank 0 is about to collect its DDP model, so
# the all-reduce completes inside that join. Both ranks must exit 0 with
# nothing left for the ladder, and the all-reduce is still reported as a
# coll when it completed before the rank's end (seen after the fact, not
# from Gloo's thread; torch 2.x destroys rank 0's group without waiting for
# it, so there it may complete only after rank 0's bye).
. tests/lib.sh
. tests/lib_py.sh
cat >"$TMP/async_exit.py" <<'PYEOF'
import gc, os, sys, time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
sig = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
model = DDP(torch.nn.Linear(2, 2))      # its Reducer: the group's last reference after destroy
if rank == 1:                           # the peer comes once rank 0 collects its model
    while not os.path.exists(sig):
        time.sleep(0.01)
    time.sleep(2)
work = dist.all_reduce(torch.ones(3), async_op=True)    # nobody waits for it
dist.destroy_process_group()
if rank == 0:
    open(sig, "w").close()
del model
gc.collect()                            # ~Reducer, ~ProcessGroupGloo: joins Gloo's threads (torch 1.13)
print(f"rank {rank} collected; all-reduce done: {work.is_completed()}", flush=True)
PYEOF
start=$(date +%s)
py_rec ae --timeout 60 --hang-after 20 "$TMP/async_exit.py" "$TMP/sig"
rc=$(rc_of ae)
[ "$rc" = 0 ] || { grep -v '"k":"progress"' "$TMP/ae/out.jsonl" | tail -12; cat "$TMP"/ae/logs/*;
                   die "exit $rc, want 0: a rank did not exit after its async all-reduce completed"; }
"$PY" - "$TMP/ae" <<'PYEOF' || die "the ranks' ends are not what ddptop shows"
import json, sys
d = sys.argv[1]
msgs = [json.loads(l) for l in open(f"{d}/rec.jsonl")]
s = [json.loads(l) for l in open(f"{d}/out.jsonl") if '"k":"summary"' in l][0]
assert s["verdict"] == "job done: all 2 ranks ended cleanly", s["verdict"]
assert [r["how"] for r in s["ranks"]] == ["exit 0", "exit 0"], s["ranks"]
for r in (0, 1):
    log = open(f"{d}/logs/rank-{r}.log").read()
    assert f"rank {r} collected" in log, r
    assert [m["status"] for m in msgs if m.get("k") == "bye" and m.get("r") == r] == [0], r
    # the async all-reduce of 3 float32s: one coll of step 0 once done (rank 1's always is before its bye)
    ar = [m for m in msgs if m.get("k") == "coll" and m.get("r") == r and m["op"] == "allreduce" and m["bucket"] < 0]
    if r == 1 or "all-reduce done: True" in log:
        assert [(m["bytes"], m["count"], m["step"]) for m in ar] == [(12, 3, 0)], (r, ar)
        assert ar[0]["done"] >= ar[0]["start"], ar[0]
    else:
        assert ar == [], (r, ar)
PYEOF
echo "ok: both ranks exited 0 after an async all-reduce completed while rank 0's group was destroyed ($(( $(date +%s) - start )) s)"
wait_for 10 no_ranks || die "ranks left running: $(our_ranks)"
