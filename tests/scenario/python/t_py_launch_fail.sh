# Scripts that fail, under the adapter. A crash on rank 1 of 2: its
# traceback is in the events, rank 0 is stopped, ddptop exits 1 and no
# rank is left running. --max-restarts 1 with a script that fails on its
# first run: every rank runs the script again, TORCHELASTIC_RESTART_COUNT
# tells it which run it is, and the job ends clean.
. tests/lib.sh
"$PY" -c 'import torch' 2>/dev/null || skip "no torch for $PY"
cat >"$TMP/crash.py" <<'PYEOF'
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

def train(model, opt, rank):
    for step in range(1, 100000):
        loss = model(torch.ones(8, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 1 and step == 3:
            raise ValueError(f"bad batch at step {step}")

def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(4, 2))
    train(model, torch.optim.SGD(model.parameters(), lr=0.01), dist.get_rank())

main()
PYEOF
out=$TMP/crash.jsonl
timeout 200 "$DDPTOP" run -n 2 --python "$PY" --headless --json "$TMP/crash.py" >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 1 ] || die "a crashing script: ddptop exited $rc, not 1"
grep -q '"r":1,"level":"error","text":"[^"]*crash.py:[0-9]* in train: raise ValueError(f' "$out" \
    || die "rank 1's traceback frame is not in the events"
grep -q '"r":1,"level":"error","text":"ValueError: bad batch at step 3"' "$out" || die "rank 1's exception is not in the events"
grep -q '"r":0,[^}]*"text":"rank 0 (pid [0-9]*) ended' "$out" || die "rank 0 did not end"
pids=$(grep -o '(pid [0-9]*) ended' "$out" | tr -dc '0-9\n')
[ "$(echo "$pids" | wc -w)" -eq 2 ] || die "not two rank pids: $pids"
for p in $pids; do ! kill -0 "$p" 2>/dev/null || die "rank pid $p still running"; done

cat >"$TMP/once.py" <<'PYEOF'
import os, sys
import torch
import torch.distributed as dist
count = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
dist.init_process_group("gloo")
dist.barrier()
print(f"rank {dist.get_rank()} restart count {count} of {os.environ['TORCHELASTIC_MAX_RESTARTS']}", flush=True)
if count == 0 and dist.get_rank() == 1:
    sys.exit(4)
dist.destroy_process_group()
PYEOF
out=$TMP/restart.jsonl
timeout 200 "$DDPTOP" run -n 2 --python "$PY" --headless --json --max-restarts 1 --log-dir "$TMP/logs" \
    "$TMP/once.py" >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || die "--max-restarts 1: ddptop exited $rc"
grep -q '"verdict":"job done: all 2 ranks ended cleanly"' "$out" || die "no clean verdict after the restart"
grep -q "\"text\":\"restart 1/1: running $TMP/once.py again (TORCHELASTIC_RESTART_COUNT=1)\"" "$out" \
    || die "the restart is not said"
grep -q '"r":1,"level":"error","text":"rank 1 (pid [0-9]*) ended: exit 4' "$out" || die "the first failure is not shown"
for r in 0 1; do
    grep -qx "rank $r restart count 0 of 1" "$TMP/logs/rank-$r.log" || die "rank $r: first run"
    grep -qx "rank $r restart count 1 of 1" "$TMP/logs/rank-$r.restart-1.log" || die "rank $r: the restart"
done
! grep -q -- '--resume' "$out" || die "a script got --resume"
wait_for 5 no_workers || die "workers left running"
echo "PASS: a crash stops the job with its traceback; --max-restarts reruns the script"
