# How scripts written the ways users write them start and end under
# `ddptop run -n 2`:
# - init_process_group that torch refuses (an unknown keyword) fails on
#   every rank at once;
# - a print without flush before a SIGKILL reaches the rank's log (stdout
#   line-buffered, as on a terminal);
# - sys.exit("message") on one rank: the message is in the rank's log and
#   ddptop's events and verdict, as Python would print it, exit 1;
# - a child the script forks (os.fork, as DataLoader workers are made) while
#   another thread holds the rank's socket lock (the heartbeat flushing):
#   ddptop.log and torch.save in the child are the child's own, a child
#   that runs to the script's end exits with its own status, neither hangs,
#   and nothing of the children's reaches ddptop;
# - a subprocess a rank leaves running ends with the rank (its exit, or the
#   ladder's SIGTERM), as torchrun ends its workers' process groups;
# - a script with no process group (-n 1): hello and phase train at its
#   first optimizer step;
# - the explicit API (`import ddptop`) in a script run bare by an
#   interpreter without zmq or msgpack: a no-op, not an ImportError.
. tests/lib.sh
. tests/lib_py.sh
# a call torch refuses fails on every rank at once, as it does bare: no rank
# waits for a store rank 0 never starts (30 s, then ddptop's SIGTERM)
cat >"$TMP/badinit.py" <<'PYEOF'
import torch.distributed as dist
dist.init_process_group("gloo", no_such_argument=1)
PYEOF
start=$(date +%s)
py_rec badinit "$TMP/badinit.py"
secs=$(( $(date +%s) - start ))
[ "$(rc_of badinit)" = 1 ] || { cat "$TMP/badinit/out.jsonl"; die "a refused init_process_group: exit $(rc_of badinit), not 1"; }
for r in 0 1; do
    grep -q "\"r\":$r,\"level\":\"error\",\"text\":\"rank $r (pid [0-9]*) ended: exit 1" "$TMP/badinit/out.jsonl" \
        || { cat "$TMP/badinit/out.jsonl"; die "rank $r did not fail by itself (${secs}s)"; }
done
grep -q "TypeError: init_process_group() got an unexpected keyword argument 'no_such_argument'" "$TMP/badinit/out.jsonl" \
    || { cat "$TMP/badinit/out.jsonl"; die "torch's TypeError not shown"; }
[ $secs -lt 25 ] || die "a refused init_process_group took ${secs}s"

# a print without flush before the rank dies (SIGKILL: no exit to flush
# at) is in the rank's log and ddptop's log tail, as it is on the terminal
# torchrun's ranks print to (PYTHONUNBUFFERED unset, as users have it)
cat >"$TMP/noflush.py" <<'PYEOF'
import os, signal, torch.distributed as dist
dist.init_process_group("gloo")
print(f"rank {dist.get_rank()} loaded the data")
if dist.get_rank() == 1:
    os.kill(os.getpid(), signal.SIGKILL)
dist.barrier()
PYEOF
PYTHONUNBUFFERED= py_rec noflush "$TMP/noflush.py"
[ "$(rc_of noflush)" = 1 ] || { cat "$TMP/noflush/out.jsonl"; die "a killed rank: ddptop exited $(rc_of noflush), not 1"; }
grep -qx "rank 1 loaded the data" "$TMP/noflush/logs/rank-1.log" || { cat "$TMP/noflush/logs/rank-1.log"; die "the killed rank's print was lost"; }
grep -q '"r":1,"level":"error","text":"log: rank 1 loaded the data"' "$TMP/noflush/out.jsonl" \
    || { cat "$TMP/noflush/out.jsonl"; die "the killed rank's print is not in ddptop's log tail"; }

cat >"$TMP/exitmsg.py" <<'PYEOF'
import sys, torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 1:
    sys.exit("bad config: no data on rank 1")
dist.barrier()
PYEOF
py_rec exitmsg "$TMP/exitmsg.py"
[ "$(rc_of exitmsg)" = 1 ] || { cat "$TMP/exitmsg/out.jsonl"; die "sys.exit(message): ddptop exited $(rc_of exitmsg), not 1"; }
grep -qx "bad config: no data on rank 1" "$TMP/exitmsg/logs/rank-1.log" || { cat "$TMP/exitmsg/logs/rank-1.log"; die "sys.exit's message not in the rank's log"; }
grep -q '"r":1,"level":"error","text":"rank 1: train -> error: sys.exit: bad config: no data on rank 1"' "$TMP/exitmsg/out.jsonl" \
    || { cat "$TMP/exitmsg/out.jsonl"; die "sys.exit's message not in ddptop's events"; }
grep -q '"verdict":"job failed: rank 1 exit 1[^"]*bad config: no data on rank 1' "$TMP/exitmsg/out.jsonl" \
    || { grep summary "$TMP/exitmsg/out.jsonl"; die "the verdict does not say why rank 1 exited"; }

cat >"$TMP/forks.py" <<'PYEOF'
import os, sys, threading, time, torch, torch.distributed as dist, ddptop
from ddptop import state
rank = int(os.environ["RANK"])

def fork_while_held(child):
    """Fork while another thread holds the rank's socket lock (what the
    heartbeat thread does once a second, for a moment); the child's exit status."""
    lock, held, done = state.run().up.lock, threading.Event(), threading.Event()
    def hold():
        with lock:
            held.set()
            done.wait()
    threading.Thread(target=hold, daemon=True).start()
    held.wait()
    pid = os.fork()
    if pid == 0:
        child()
    done.set()
    end = time.monotonic() + 20
    while time.monotonic() < end:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    sys.exit(f"rank {rank}: the forked child hung")

def saves():
    ddptop.log(child=os.getpid())
    torch.save({"x": 1}, os.path.join(sys.argv[1], f"child{rank}.pt"))
    os._exit(0)

def ends():                  # the child runs to the script's end (no process group yet: torch's own pg would hang it)
    sys.exit(4)

print(f"rank {rank} ending child exit {fork_while_held(ends)}", flush=True)
dist.init_process_group("gloo")
print(f"rank {rank} saving child exit {fork_while_held(saves)}", flush=True)
dist.barrier()
dist.destroy_process_group()
PYEOF
py_rec forks "$TMP/forks.py" "$TMP"
[ "$(rc_of forks)" = 0 ] || { cat "$TMP/forks/out.jsonl" "$TMP"/forks/logs/*; die "a forked child: exit $(rc_of forks)"; }
for r in 0 1; do
    grep -qx "rank $r ending child exit 4" "$TMP/forks/logs/rank-$r.log" || { cat "$TMP/forks/logs/rank-$r.log"; die "rank $r: the child that ran to the end did not exit 4"; }
    grep -qx "rank $r saving child exit 0" "$TMP/forks/logs/rank-$r.log" || { cat "$TMP/forks/logs/rank-$r.log"; die "rank $r: the child did not exit 0"; }
    [ -s "$TMP/child$r.pt" ] || die "rank $r: the child's torch.save did not write"
done
! grep -q '"k":"ckpt"\|child=' "$TMP/forks/rec.jsonl" || die "a forked child spoke to ddptop as the rank"
"$PY" - "$TMP/forks/rec.jsonl" <<'PYEOF' || die "a forked child spoke to ddptop as the rank"
import json, sys
msgs = [json.loads(l) for l in open(sys.argv[1])]
hellos = sorted(m["r"] for m in msgs if m.get("k") == "hello")
byes = [m["r"] for m in msgs if m.get("k") == "bye"]
assert hellos == [0, 1] and len(byes) == len(set(byes)), (hellos, byes)
PYEOF

# what a rank starts and leaves running (a subprocess of its own, in its
# process group) ends with the rank, as torchrun ends its workers' groups:
# a rank that exits 0, and a rank the ladder kills
cat >"$TMP/leaves.py" <<'PYEOF'
import os, subprocess, sys, time, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
child = subprocess.Popen(["sleep", "300"])
open(os.path.join(sys.argv[1], f"child{rank}"), "w").write(str(child.pid))
dist.barrier()
if sys.argv[2] == "fail":     # rank 0 fails; rank 1, asleep, hears no stop: the ladder's SIGTERM ends it
    sys.exit(3) if rank == 0 else time.sleep(300)
PYEOF
for how in exit fail; do
    rm -f "$TMP"/child[01]
    if [ $how = exit ]; then
        py_rec leaves-$how "$TMP/leaves.py" "$TMP" $how
        [ "$(rc_of leaves-$how)" = 0 ] || { cat "$TMP/leaves-$how/out.jsonl"; die "leaves ($how): exit $(rc_of leaves-$how)"; }
    else
        "$DDPTOP" run -n 2 --python "$PY" --headless --json --stop-grace 1 --log-dir "$TMP/lh" \
            "$TMP/leaves.py" "$TMP" $how >"$TMP/lh.jsonl" 2>&1 &
        dp=$!
        CLEANUPS+=("kill -9 $dp" "for p in \$(our_ranks); do kill -9 \$p; done")
        wait_for 60 test -s "$TMP/child1" || { cat "$TMP/lh.jsonl"; die "leaves (fail): no child"; }
        wait_for 60 sh -c "! kill -0 $dp 2>/dev/null" || { kill -9 $dp; die "leaves (fail): ddptop did not end the job"; }
        grep -q '"r":1,"level":"error","text":"rank 1 (pid [0-9]*) ended: SIGTERM by ddptop' "$TMP/lh.jsonl" \
            || { cat "$TMP/lh.jsonl"; die "leaves (fail): rank 1 was not ended by the ladder"; }
    fi
    for r in 0 1; do [ -s "$TMP/child$r" ] && CLEANUPS+=("kill -9 $(cat "$TMP/child$r")"); done
    for r in 0 1; do
        c=$(cat "$TMP/child$r") || die "leaves ($how): rank $r wrote no child pid"
        wait_for 10 sh -c "! kill -0 $c 2>/dev/null || grep -q '^State:.Z' /proc/$c/status" \
            || die "leaves ($how): rank $r's subprocess $c outlived it"
    done
done

# no process group at all (-n 1, a plain training loop): the hello and phase
# train come with the first optimizer step, not only at the exit, so ddptop
# knows the rank (and its beats flow) while it trains
cat >"$TMP/nopg.py" <<'PYEOF'
import time, torch, torch.nn as nn
m = nn.Linear(4, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for step in range(3):
    loss = m(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.2)
PYEOF
d=$TMP/nopg
mkdir -p "$d"
timeout 60 "$DDPTOP" run -n 1 --python "$PY" --headless --json --record "$d/rec" --log-dir "$d/logs" "$TMP/nopg.py" >"$d/out.jsonl" 2>&1 \
    || { cat "$d/out.jsonl" "$d"/logs/*; die "no process group: ddptop exited $?"; }
"$DDPTOP" export "$d/rec" --jsonl "$d/rec.jsonl" >/dev/null 2>&1 || die "nopg: export failed"
"$PY" - "$d/rec.jsonl" <<'PYEOF' || die "no process group: the rank said hello only at its end"
import json, sys
# the telemetry socket in arrival order (one socket: the order it was sent);
# the hello comes on another, so by its stamp: before the last step's (0.4 s later)
msgs = [m for m in map(json.loads, open(sys.argv[1])) if m.get("r") == 0]
tel = [m["k"] for m in msgs if m.get("_src") == "tel" and m.get("k") in ("phase", "step")]
assert tel == ["phase", "step", "step", "step"], tel
hello = [m["t"] for m in msgs if m.get("k") == "hello"]
last = max(m["t"] for m in msgs if m.get("k") == "step")
assert len(hello) == 1 and hello[0] < last - 200_000_000, (hello, last)
PYEOF
grep -q '"phase":"train"' "$d/rec.jsonl" || die "no process group: no phase train"

cat >"$TMP/api.py" <<'PYEOF'
import sys
sys.modules["zmq"] = sys.modules["msgpack"] = None      # an interpreter without them
import ddptop
ddptop.on_checkpoint(lambda d: None)
ddptop.log(acc=0.5)
print("should_stop", ddptop.should_stop())
PYEOF
out=$(PYTHONPATH=$PWD/workers/python "$PY" "$TMP/api.py" 2>&1) || die "the API outside ddptop: $out"
[ "$out" = "should_stop False" ] || die "the API outside ddptop: $out"

wait_for 10 no_workers || die "workers left running"
echo "PASS: scripts start and end as users write them: a refused init, sys.exit(message), forks, no process group, the API bare"
