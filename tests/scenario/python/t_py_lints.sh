# Two of a teacher's lints end to end, each from a small torch script (2
# ranks, Gloo) under `ddptop run --headless --json`, as a warn event:
#  - uneven epochs: rank 0 has 10 batches an epoch, rank 1 has 8 (no Join),
#    so DDP pairs their all-reduces across epochs and rank 0 is left alone
#    at the end (the epoch named is whichever ddptop saw first finish on
#    both: steps arrive in 50 ms bursts, and these take a millisecond);
#  - desync: collective #2 is a barrier on rank 0 but an all-reduce on
#    rank 1 (a collective under an `if`), and both wait.
# (A collective reached by rank 0 only: t_py_hang_shutdown.sh; the forgotten
# set_epoch: t_py_faults.sh.) Each job is then ended by the ladder, no rank left.
. tests/lib.sh
. tests/lib_py.sh
cat >"$TMP/uneven.py" <<'PYEOF'
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)
n = 80 if rank == 0 else 64          # the bug: each rank's own split, of another size
ds = TensorDataset(torch.randn(n, 20), torch.randn(n, 3))
sampler = DistributedSampler(ds, num_replicas=1, rank=0)
loader = DataLoader(ds, batch_size=8, sampler=sampler)
model = DDP(torch.nn.Linear(20, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for x, y in loader:
        loss = (model(x) - y).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
dist.destroy_process_group()
PYEOF
cat >"$TMP/desync.py" <<'PYEOF'
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(4)
dist.all_reduce(t)                   # #1 on both ranks
if dist.get_rank() == 0:
    dist.barrier()                   # #2 on rank 0 ...
else:
    dist.all_reduce(t)               # ... but #2 on rank 1
dist.destroy_process_group()
PYEOF
# lint_run NAME PATTERN: the script's job until a warn event matches, then the ladder.
lint_run() {
    local out=$TMP/$1.jsonl
    (cd "$TMP" && py_exec -n 2 --headless --json --stop-grace 2 --log-dir "$TMP/logs-$1" -- "$TMP/$1.py") \
        >"$out" 2>"$TMP/$1.err" &
    local dp=$!
    CLEANUPS+=("kill -9 $dp")
    wait_for 90 grep -Eqs "^\{\"k\":\"event\".*\"level\":\"warn\".*$2" "$out" ||
        { tail -n 20 "$out" "$TMP/$1.err"; die "$1: no warn event matching: $2"; }
    grep -E "^\{\"k\":\"event\".*\"level\":\"warn\".*$2" "$out" | head -1
    kill -TERM "$dp" 2>/dev/null
    wait_for 60 sh -c "! kill -0 $dp 2>/dev/null" || die "$1: the job did not end"
    wait "$dp"
    wait_for 10 no_ranks || die "$1: ranks left running: $(our_ranks)"
}
lint_run uneven 'uneven epochs: epoch [0-9] took rank [01] (10|8) steps, rank [01] (8|10): at the end the rank with more batches hangs in all-reduce; wrap the loop in torch.distributed.algorithms.join.Join'
lint_run desync 'desync: collective #2 is (barrier on rank 0 but allreduce on rank 1|allreduce on rank 1 but barrier on rank 0)'
echo "PASS: uneven epochs and a desync are warned about, end to end"
