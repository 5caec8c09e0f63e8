# A hang in a torch script, as its author reads it: rank 1 of
# examples/ddp_basics.py (2 ranks, Gloo) is SIGSTOPped mid-training; rank 0
# waits in DDP's all-reduce. ddptop's headless JSON verdict names the
# collective and its DDP bucket (the lesson model has one: bucket 0), the
# stopped rank and the Python line it stopped at
# (ddp_basics.py:N in main, from its last heartbeat); the ladder then ends
# the job (exit 1) and no rank is left.
. tests/lib.sh
. tests/lib_py.sh
out=$TMP/out.jsonl
py_exec -n 2 --headless --json --hang-after 3 --stop-grace 2 --log-dir "$TMP/logs" -- \
    examples/ddp_basics.py --data synthetic --limit 512 --batch-size 8 --epochs 100000 --out "$TMP/m.pt" \
    >"$out" 2>"$TMP/err" &
dp=$!
CLEANUPS+=("kill -9 $dp")
wait_for 60 grep -qs '"k":"progress".*"step":[1-9]' "$out" || { cat "$out" "$TMP/err"; die "the script never trained"; }
sleep 1
victim=$(py_rank_pid 1) || die "no rank 1 process"
kill -STOP "$victim"
CLEANUPS+=("kill -CONT $victim")
wait_for 30 grep -q '"k":"hang"' "$out" || { tail -5 "$out"; die "no hang verdict within 30 s"; }
hang=$(grep '"k":"hang"' "$out" | head -1)
echo "$hang"
"$PY" - "$hang" <<'PYEOF' || die "hang verdict wrong"
import json, re, sys
h = json.loads(sys.argv[1])
assert h["waiting"] == [0] and h["missing"] == [1], h
assert h["op"] == "allreduce" and h["seq"] >= 0 and h["bucket"] == 0, h
v = h["verdict"]
assert re.search(r"rank 0 waits in all-reduce #\d+ \(bucket 0, \d+\.\d s\)( at \S+ in \S+)? for rank 1, which is stopped \(SIGSTOP\) "
                 r"at ddp_basics\.py:\d+ in main after step \d+", v), v
PYEOF
kill -TERM "$dp"
ended_within 30 $dp || die "ddptop did not end after SIGTERM"
[ $rc -ne 0 ] || die "ddptop exited 0 although a rank had to be killed"
kill -CONT "$victim" 2>/dev/null
wait_for 10 no_ranks || die "ranks left running: $(our_ranks)"
echo "PASS: a stopped rank of a torch script is named with its Python line"
