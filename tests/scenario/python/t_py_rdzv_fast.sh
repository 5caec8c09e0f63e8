# A rank that reaches init_process_group before rank 0's TCPStore listens
# meets it at once under ddptop: torch's store client, refused, sleeps a
# whole second before it tries again, and the adapter waits for the store
# with cheap connects instead (lifecycle.py wait_for_store). Rank 1 calls
# init_process_group first (a file tells rank 0), rank 0 starts its store
# 0.1 s later; rank 1 must be through within 0.6 s of that (a second's retry
# would put it at 0.9 s or more), and both ranks end cleanly.
. tests/lib.sh
. tests/lib_py.sh
cat >"$TMP/rdzv.py" <<'PYEOF'
import os, sys, time
import torch.distributed as dist
flag = sys.argv[1]
if os.environ["RANK"] == "0":
    while not os.path.exists(flag):
        time.sleep(0.005)
    time.sleep(0.1)
    open(flag + ".t0", "w").write(repr(time.time()))
    dist.init_process_group("gloo")
else:
    open(flag, "w").close()
    dist.init_process_group("gloo")
    done = time.time()
    while not os.path.exists(flag + ".t0"):
        time.sleep(0.005)
    time.sleep(0.05)
    print(f"rank 1 through {done - float(open(flag + '.t0').read()):.3f} s after rank 0 began", flush=True)
dist.barrier()
dist.destroy_process_group()
PYEOF
timeout 120 bash -c "$(declare -f py_run); PY_WORKER='$PY_WORKER' DDPTOP='$DDPTOP' py_run -n 2 --headless --log-dir '$TMP/logs' -- '$TMP/rdzv.py' '$TMP/flag'" \
    >"$TMP/out" 2>&1 || die "the job failed: $(tail -5 "$TMP/out")"
line=$(cat "$TMP"/logs/rank-1*.log | grep -m1 "rank 1 through") || die "rank 1 said nothing: $(tail -5 "$TMP/out")"
s=$(echo "$line" | sed 's/.*through \([0-9.]*\) s.*/\1/')
awk -v s="$s" 'BEGIN { exit !(s < 0.6) }' || die "rank 1 met rank 0 only $s s after its store began (torch's 1 s retry)"
echo "PASS: $line"
