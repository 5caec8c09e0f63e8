# The classic shutdown hang, named: examples/ddp_shutdown_hang.py (2 ranks)
# calls a barrier inside `if rank == 0:`; rank 1 destroys its process group
# and leaves, rank 0 waits. ddptop warns once that rank 0 is alone in the
# barrier and its hang verdict says nobody else will come (code under
# `if rank == 0:`), naming the line; the ladder then ends it: exit non-zero,
# no rank left.
. tests/lib.sh
. tests/lib_py.sh
out=$TMP/out.jsonl
(cd "$TMP" && py_exec -n 2 --headless --json --hang-after 3 --stop-grace 2 --log-dir "$TMP/logs" -- \
    "$OLDPWD/examples/ddp_shutdown_hang.py") >"$out" 2>"$TMP/err" &
dp=$!
CLEANUPS+=("kill -9 $dp")
wait_for 60 grep -qs '"k":"hang"' "$out" || { cat "$out" "$TMP/err"; die "no hang verdict within 60 s"; }
hang=$(grep '"k":"hang"' "$out" | head -1)
echo "$hang"
"$PY" - "$hang" "$out" <<'PYEOF' || die "the shutdown hang is not named"
import json, re, sys
h = json.loads(sys.argv[1])
assert h["op"] == "barrier" and h["waiting"] == [0] and h["missing"] == [1], h
v = h["verdict"]
assert re.search(r"^rank 0 waits in barrier #\d+ \(\d+\.\d s\) at ddp_shutdown_hang\.py:\d+ in main "
                 r"for rank 1, which ", v), v
assert "every other rank has finished" in v and "`if rank == 0:`" in v, v
events = [json.loads(l) for l in open(sys.argv[2]) if l.startswith('{"k":"event"')]
alone = [e for e in events if "rank 0 is alone in barrier #" in e.get("text", "")]
assert len(alone) == 1 and alone[0]["level"] == "warn", alone
PYEOF
kill -TERM "$dp"
ended_within 30 $dp || die "the ladder did not end the job"
[ $rc -ne 0 ] || die "ddptop exited 0 for a hung job"
grep -Eq 'sent SIGTERM to [12] rank' "$out" || { tail -5 "$out"; die "the ladder did not signal rank 0"; }
wait_for 10 no_ranks || die "ranks left running: $(our_ranks)"
echo "PASS: the shutdown hang is named and ended"
