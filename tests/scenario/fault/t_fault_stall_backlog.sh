# A stalled rank's last words reach the screen even when ddptop was behind:
# ddptop is stopped (SIGSTOP, shorter than the ping timeout, as a loaded
# machine delays it) while rank 1 trains on and stalls at step 20000, so the
# socket of its telemetry stream is full and the fault sentence waits in the
# rank's own queue. The stalled rank answers nothing but still hands that
# queue to the socket as room comes: after SIGCONT the sentence is shown.
# (A rank that flushed once and then slept kept it forever: t_fault_menu_teach
# failed so under a busy CI machine.)
. tests/lib.sh
export DDPTOP_PING_TIMEOUT=300
out=$TMP/out.jsonl
"$DDPTOP" run -n 2 --headless --json --hang-after 1 --stop-grace 1 --timeout 10 --log-dir "$TMP/logs" -- \
    --dataset synthetic --model mlp:16,32,4 --epochs 100000 --batch-size 8 --no-final-ckpt \
    --fault stall:1@20000 >"$out" 2>&1 &
dp=$!
CLEANUPS+=("kill -CONT $dp; kill -9 $dp; kill -9 \$(our_workers)")
wait_for 30 grep -q '"rank 1: broadcast -> train"' "$out" || { cat "$out"; die "the job never trained"; }
kill -STOP $dp
wait_for 120 grep -q "fault: rank 1 stops stepping at step 20000" "$TMP/logs/rank-1.log" ||
    { kill -CONT $dp; cat "$TMP/logs/rank-1.log"; die "rank 1 did not stall at step 20000"; }
if grep -q '"r":1,"level":"warn","text":"fault: rank 1 stops stepping' "$out"; then
    kill -CONT $dp
    die "ddptop read the sentence before the stop: the stall came too early to test the backlog"
fi
sleep 1
kill -CONT $dp
# rank 0's all-reduce times out 10 s after the stall (--timeout 10): by then
# ddptop has read what rank 1 said before it stalled, all of it
ended_within 60 $dp || die "ddptop did not end"
[ $rc -eq 1 ] || { tail -20 "$out"; die "ddptop exited $rc, want 1"; }
grep -q '"r":1,"level":"warn","text":"fault: rank 1 stops stepping at step 20000' "$out" ||
    { grep '"r":1' "$out" | tail -5; die "the stalled rank's fault sentence never reached ddptop"; }
grep -q '"r":1,"state":"failed","how":"SIGTERM by ddptop","step":20000,' "$out" ||
    { grep '"k":"summary"' "$out"; die "the summary does not have rank 1 at step 20000, where it stalled"; }
wait_for 5 no_workers || die "workers left: $(our_workers)"
echo "PASS: a stalled rank's queued sentence reaches ddptop after it caught up"
