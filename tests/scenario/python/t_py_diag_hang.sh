# One diagnosis, live and final (issue 30), for torch jobs that hang: a
# barrier under `if rank == 0:` mid-epoch and at the end of
# examples/ddp_shutdown_hang.py, evaluation through DDP on rank 0 only, an
# op desync, a rank blocked in queue.get() and one spinning in its own loop.
# Each ends with a verdict naming the culprit rank, the cause and the
# script's line, the same as the live hang line, and never a consequence (a
# timeout, "stalled" for a rank that waited in a collective) in its place.
. tests/lib.sh
. tests/lib_py.sh
. tests/scenario/python/diag/lib_diag.sh
n=$(diag_line barrier_mid)
diag_run barrier_mid
diag_check barrier_mid desync 0 "diag_cases.py:$n in barrier_mid"
grep -q '"verdict":"job failed: desync: rank 0 in barrier #[0-9]* at diag_cases.py:'"$n"' in barrier_mid while rank 1 is in all-reduce #' \
    "$TMP/barrier_mid/out.jsonl" || die "barrier_mid: the desync's ops"
n=$(diag_line eval_rank0)
diag_run eval_rank0
diag_check eval_rank0 desync 0 "diag_cases.py:$n in validate"
n=$(diag_line op_desync)
diag_run op_desync
diag_check op_desync desync 0 "diag_cases.py:$n in op_desync"
ex=$PWD/examples/ddp_shutdown_hang.py
n=$(grep -n 'dist.barrier()' "$ex" | head -1 | cut -d: -f1)
diag_run shutdown "$ex" --post 60
diag_check shutdown alone 0 "ddp_shutdown_hang.py:$n in main"
grep -q '"verdict":"job failed: rank 0 alone in barrier #[0-9]* at ddp_shutdown_hang.py:'"$n"' in main: every other rank had finished' \
    "$TMP/shutdown/out.jsonl" || die "shutdown: not named alone"
n=$(diag_line queue_get)
diag_run queue_get
diag_check queue_get stopped 1 "diag_cases.py:$n in queue_get"
n=$(diag_line spin)
diag_run spin
diag_check spin stopped 1 "diag_cases.py:"
echo "PASS: hung torch jobs end with the cause, the rank and the line the live view named"
