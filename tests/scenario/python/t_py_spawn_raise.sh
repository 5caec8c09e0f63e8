# ddptop never changes how a script fails (issue 30 item 2): an mp.spawn
# script (run as `ddptop run --headless SCRIPT`, no -n) whose rank 1 raises
# while rank 0 waits. Bare, torch's spawn raises ProcessRaisedException in
# the launched process with rank 1's traceback ("-- Process 1 terminated
# with the following error:"); under ddptop the launched process's log
# holds the very same text, frame for frame (none of the adapter's: not its
# wrappers around mp.spawn nor around the rank's function), and ddptop exits
# with the bare run's code. torch's own warning lines (pids, times) and the
# adapter's "ddptop-py" lines are left out of the comparison. The same for
# a forked multiprocessing.Process whose rank 1 raises (multiprocessing
# prints "Process ForkProcess-2:" and the traceback in the child). Runs on
# torch 2.x too: TORCH_PY=/path/to/python.
. tests/lib.sh
. tests/scenario/python/lib_py.sh
SPAWN_PROCS='raiser(_proc)?\.py|--multiprocessing-fork|resource_tracker'   # bare runs too
. tests/scenario/python/lib_spawn.sh

cat >"$TMP/raiser.py" <<'PYEOF'
import os, sys, time
import torch.distributed as dist
import torch.multiprocessing as mp


def fail(rank):
    raise ValueError(f"rank {rank} fails on purpose")


def worker(rank, world, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    if rank == 1:
        fail(rank)
    time.sleep(120)     # no collective: rank 0 never fails itself, its launcher ends it


if __name__ == "__main__":
    mp.spawn(worker, args=(2, int(sys.argv[1])), nprocs=2, join=True)
PYEOF
cat >"$TMP/raiser_proc.py" <<'PYEOF'
import os, sys
import multiprocessing as mp
import torch.distributed as dist


def fail(rank):
    raise ValueError(f"rank {rank} fails on purpose")


def worker(rank, world, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    if rank == 1:
        fail(rank)
    dist.destroy_process_group()    # no collective: rank 0 never fails itself


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    ps = [ctx.Process(target=worker, args=(r, 2, int(sys.argv[1]))) for r in range(2)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    sys.exit(max(p.exitcode for p in ps))
PYEOF
# the text compared: torch's glog lines (W1206 07:37:51.185000 PID file:line] ...) and ddptop-py's left out
text() { grep -Ev '^[IWEF][0-9]{4} [0-9:.]+ +[0-9]+ |^ddptop-py ' "$1"; }

# SCRIPT HEAD: bare, then under ddptop; the same text (HEAD among it) and exit code
alike() {
    local script=$1 head=$2 port bare_rc dd_rc
    port=$(free_port 1)
    DDPTOP_TEST_TAG=$DDPTOP_TEST_TAG timeout 170 "$PY" "$TMP/$script" "$port" >"$TMP/bare.txt" 2>&1
    bare_rc=$?
    wait_for 20 none_tagged || die "$script bare: processes left running: $(tagged)"
    grep -q "^$head" "$TMP/bare.txt" && grep -q "^ValueError: rank 1 fails on purpose" "$TMP/bare.txt" ||
        { cat "$TMP/bare.txt"; die "$script bare: not rank 1's error"; }
    [ "$bare_rc" = 1 ] || { cat "$TMP/bare.txt"; die "$script bare: exit $bare_rc"; }
    port=$(free_port 1)
    rm -rf "$TMP/logs"
    DDPTOP_TEST_TAG=$DDPTOP_TEST_TAG timeout 170 "$DDPTOP" run --python "$PY" --headless --log-dir "$TMP/logs" \
        "$TMP/$script" "$port" >"$TMP/dd.txt" 2>&1
    dd_rc=$?
    wait_for 20 none_tagged || die "$script under ddptop: processes left running: $(tagged)"
    grep -q "following the 2 ranks" "$TMP/dd.txt" || { cat "$TMP/dd.txt"; die "$script: ddptop did not follow the ranks"; }
    [ "$dd_rc" = "$bare_rc" ] || { cat "$TMP/dd.txt"; die "$script: ddptop exited $dd_rc, bare $bare_rc"; }
    text "$TMP/bare.txt" >"$TMP/bare.exc"
    text "$TMP/logs/rank-0.log" >"$TMP/dd.exc"
    cmp -s "$TMP/bare.exc" "$TMP/dd.exc" || { diff "$TMP/bare.exc" "$TMP/dd.exc"
        die "$script: the failure under ddptop is not the bare one (< bare, > ddptop)"; }
    echo "ok: $script: rank 1's exception under ddptop prints as bare ($(wc -l <"$TMP/bare.exc") lines), exit $dd_rc"
}
alike raiser.py "-- Process 1 terminated with the following error:"
alike raiser_proc.py "Process ForkProcess-2:"
echo "PASS: a spawned rank's exception under ddptop prints and exits as bare (mp.spawn, a forked Process)"
