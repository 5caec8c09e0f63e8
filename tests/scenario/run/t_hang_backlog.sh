# A hang after ddptop fell behind is seen, and blamed right, once ddptop has
# caught up. ddptop is stopped (SIGSTOP, shorter than the ping timeout: a
# loaded machine's delay) while both ranks train on and rank 0 stops alone
# after step 20000 (unsafe-stop@20000): when ddptop resumes, each rank's
# last words wait behind thousands of steps, most of them in the rank's own
# queue, which a rank blocked in a collective hands to its socket every
# PUMP_MS (it did once a beat: a socket-full a second, and ddptop saw no
# hang before --timeout 8 ended the job). Every hang object names rank 0's
# unsafe stop as the cause; none blames rank 1 (the screen once blamed the
# rank whose backlog was still being read: t_fault_menu_teach under a busy
# CI machine; that rule, job_catching_up, is test_hang's and test_summary's).
. tests/lib.sh
export DDPTOP_PING_TIMEOUT=300
out=$TMP/out.jsonl
"$DDPTOP" run -n 2 --headless --json --hang-after 1 --stop-grace 1 --timeout 8 --log-dir "$TMP/logs" -- \
    --dataset synthetic --model mlp:16,32,4 --epochs 100000 --batch-size 8 --no-final-ckpt \
    --fault unsafe-stop@20000 >"$out" 2>&1 &
dp=$!
CLEANUPS+=("kill -CONT $dp; kill -9 $dp; kill -9 \$(our_workers)")
wait_for 30 grep -q '"rank 1: broadcast -> train"' "$out" || { cat "$out"; die "the job never trained"; }
kill -STOP $dp
wait_for 120 grep -q "unsafe stop - rank 0 stops alone at step 20000\|unsafe stop - each rank stops" "$TMP/logs/rank-0.log" ||
    { kill -CONT $dp; cat "$TMP/logs/rank-0.log"; die "rank 0 did not stop at step 20000"; }
grep -q '"k":"hang"' "$out" && { kill -CONT $dp; die "a hang was seen before the stop: too early to test the backlog"; }
sleep 2
kill -CONT $dp
ended_within 60 $dp || die "ddptop did not end"
[ $rc -eq 1 ] || { tail -20 "$out"; die "ddptop exited $rc, want 1"; }
grep '"k":"hang"' "$out" | head -3
grep -q '"k":"hang"' "$out" || { grep -v progress "$out" | tail -20; die "no hang object"; }
"$PY" - "$out" <<'PYEOF' || die "a hang object blames the wrong rank"
import json, sys
for line in open(sys.argv[1]):
    h = json.loads(line)
    if h.get("k") != "hang":
        continue
    assert "rank 0 left the training loop (unsafe stop) after step 20000" in h["verdict"], h["verdict"]
    assert "for rank 1" not in h["verdict"] and "stopped stepping" not in h["verdict"], h["verdict"]
PYEOF
wait_for 5 no_workers || die "workers left: $(our_workers)"
echo "PASS: no verdict on a rank ddptop was still catching up on"
