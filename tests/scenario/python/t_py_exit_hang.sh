# The hang at shutdown in its purest form (issue 30): the script has
# finished (destroy_process_group, its last line) but a non-daemon thread
# blocked in queue.get() keeps its process from exiting. Under ddptop: the
# rank says so live, naming the thread and its line; once no rank trains,
# the ladder ends it; the final verdict names the rank, the thread and the
# line, and the exit is 1. Then ddptop itself is SIGKILLed while a rank is
# in that state: nothing of the job survives it.
. tests/lib.sh
. tests/lib_py.sh
cat >"$TMP/exit_hang.py" <<'PYEOF'
import os, queue, threading, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
q = queue.Queue()
def run():
    while True:
        if q.get() is None:  # BUG: nobody puts None on rank 0
            return
dist.init_process_group("gloo")
threading.Thread(target=run, name="uploader").start()
model = DDP(torch.nn.Linear(4, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(5):
    opt.zero_grad()
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
dist.destroy_process_group()
if os.environ["RANK"] != "0" and not os.environ.get("BOTH"):
    q.put(None)      # rank 1's thread ends; rank 0's waits forever
PYEOF
line=$(grep -n "# BUG" "$TMP/exit_hang.py" | cut -d: -f1)
start=$(date +%s)
py_exec -n 2 --headless --json --hang-after 3 -- "$TMP/exit_hang.py" >"$TMP/out.json" 2>&1 &
dp=$!
CLEANUPS+=("kill -9 $dp")
ended_within 90 $dp || { tail -20 "$TMP/out.json"; die "ddptop never ended a job whose rank 0 waits for its thread"; }
[ $rc -eq 1 ] || { tail -20 "$TMP/out.json"; die "exit $rc, want 1"; }
live=$(grep '"event"' "$TMP/out.json" | grep -m1 'finished (said bye 0 after step 5) but its process did not exit')
echo "$live" | grep -q "it waits for non-daemon thread 'uploader' at exit_hang.py:$line in run" \
    || { grep '"event"' "$TMP/out.json" | tail -20; die "no live line naming the thread and its line"; }
verdict=$(grep '"summary"' "$TMP/out.json" | grep -o '"verdict":"[^"]*"')
echo "$verdict" | grep -q "\"verdict\":\"job failed: rank 0 finished (said bye 0 after step 5) but its process did not exit: it waits for non-daemon thread 'uploader' at exit_hang.py:$line in run" \
    || { echo "$verdict"; die "the final verdict does not name rank 0, the thread and its line"; }
grep '"summary"' "$TMP/out.json" | grep -q '"cause":{"kind":"linger","rank":0' \
    || { grep '"summary"' "$TMP/out.json"; die "--json's cause is not rank 0's linger"; }
echo "ok: live and final: $verdict ($(( $(date +%s) - start )) s)"
wait_for 10 no_ranks || die "ranks left running: $(our_ranks)"

# ddptop SIGKILLed while both ranks wait for their threads
BOTH=1 py_exec -n 2 --headless --hang-after 60 -- "$TMP/exit_hang.py" >"$TMP/k.out" 2>&1 &
dp=$!
CLEANUPS+=("kill -9 $dp")
wait_for 60 grep -q "waits for non-daemon thread" "$TMP/k.out" || { cat "$TMP/k.out"; die "the ranks never reached their threads"; }
sleep 2
[ -n "$(our_ranks)" ] || die "no rank to leave behind"
kill -9 $dp
wait_for 30 no_ranks || die "ranks outlived a SIGKILLed ddptop: $(our_ranks)"
echo "ok: nothing of the job survived ddptop's SIGKILL"
