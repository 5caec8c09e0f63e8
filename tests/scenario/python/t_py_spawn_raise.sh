# ddptop never changes how a script fails (issue 30 item 2): an mp.spawn
# script (run as `ddptop run --headless SCRIPT`, no -n) whose rank 1 raises
# while rank 0 waits. Bare, torch's spawn raises ProcessRaisedException in
# the launched process with rank 1's traceback ("-- Process 1 terminated
# with the following error:"); under ddptop the launched process's log
# holds the very same text, frame for frame (none of the adapter's: not its
# wrappers around mp.spawn nor around the rank's function), and ddptop exits
# with the bare run's code. torch's own warning lines (pids, times) and the
# adapter's "ddptop-py" lines are left out of the comparison. Runs on
# torch 2.x too: TORCH_PY=/path/to/python.
. tests/lib.sh
. tests/scenario/python/lib_py.sh
tagged() {
    local p
    for p in $(pgrep -f -- 'raiser\.py|--multiprocessing-fork|resource_tracker'); do
        { tr '\0' '\n' </proc/$p/environ; } 2>/dev/null | grep -qx "DDPTOP_TEST_TAG=$DDPTOP_TEST_TAG" && echo "$p"
    done
}
none_tagged() { [ -z "$(tagged)" ]; }
CLEANUPS+=("for p in \$(tagged); do kill -9 \$p; done")

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
# the text compared: torch's glog lines (W1206 07:37:51.185000 PID file:line] ...) and ddptop-py's left out
text() { grep -Ev '^[IWEF][0-9]{4} [0-9:.]+ +[0-9]+ |^ddptop-py ' "$1"; }

port=$(free_port 1)
DDPTOP_TEST_TAG=$DDPTOP_TEST_TAG timeout 170 "$PY" "$TMP/raiser.py" "$port" >"$TMP/bare.txt" 2>&1
bare_rc=$?
wait_for 20 none_tagged || die "bare: processes left running: $(tagged)"
grep -q "^-- Process 1 terminated with the following error:" "$TMP/bare.txt" &&
    grep -q "^ValueError: rank 1 fails on purpose" "$TMP/bare.txt" || { cat "$TMP/bare.txt"; die "bare: not rank 1's error"; }
[ "$bare_rc" = 1 ] || { cat "$TMP/bare.txt"; die "bare: exit $bare_rc"; }

port=$(free_port 1)
DDPTOP_TEST_TAG=$DDPTOP_TEST_TAG timeout 170 "$DDPTOP" run --python "$PY" --headless --log-dir "$TMP/logs" \
    "$TMP/raiser.py" "$port" >"$TMP/dd.txt" 2>&1
dd_rc=$?
wait_for 20 none_tagged || die "under ddptop: processes left running: $(tagged)"
grep -q "following the 2 ranks" "$TMP/dd.txt" || { cat "$TMP/dd.txt"; die "ddptop did not follow the spawned ranks"; }
[ "$dd_rc" = "$bare_rc" ] || { cat "$TMP/dd.txt"; die "ddptop exited $dd_rc, bare $bare_rc"; }
text "$TMP/bare.txt" >"$TMP/bare.exc"
text "$TMP/logs/rank-0.log" >"$TMP/dd.exc"
cmp -s "$TMP/bare.exc" "$TMP/dd.exc" || { diff "$TMP/bare.exc" "$TMP/dd.exc"; die "the failure under ddptop is not the bare one (< bare, > ddptop)"; }
echo "PASS: a spawned rank's exception under ddptop prints as bare ($(wc -l <"$TMP/bare.exc") lines), exit $dd_rc as bare"
