# A stopped frontend is not a gone one: SIGSTOP of headless ddptop for 12 s
# (what Ctrl-Z does to the TUI) does not end the job. The workers see ddptop
# in state T, train on (telemetry that finds no room is dropped, counted),
# the screen catches up after SIGCONT (steps far beyond those before the
# stop, and each rank's "trained on while ddptop was stopped" line), and a
# Ctrl-C afterwards still stops the job cleanly (exit 130).
. tests/lib.sh
# A 5 s ping timeout (default 15) keeps the test short; the stop lasts more than twice as long.
export DDPTOP_PING_TIMEOUT=5
out=$TMP/out.txt
"$DDPTOP" run -n 2 --headless -- --dataset synthetic --model mlp:16,32,4 --epochs 100000 --batch-size 8 \
    --ckpt-dir "$TMP/ck" >"$out" 2>&1 &
dp=$!
CLEANUPS+=("kill -CONT $dp; kill -9 $dp")
wait_for 30 grep -q "step [1-9]" "$out" || { cat "$out"; die "job never trained"; }
last_step() { grep -o 'step [0-9]*' "$out" | tail -1 | cut -d' ' -f2; }
# Workers judge ddptop only once its pings (one a second) have started:
# let a few go out first, or the stop would not be noticed at all.
sleep 3
before=$(last_step)
kill -STOP $dp
# 12 s stopped, longer than the workers' ping timeout (5 s here); they must live.
end=$(( $(date +%s) + 12 ))
while [ "$(date +%s)" -lt "$end" ]; do
    [ "$(our_workers | wc -w)" -eq 2 ] || { kill -CONT $dp; cat "$out"; die "a worker died while ddptop was stopped"; }
    sleep 1
done
kill -CONT $dp
wait_for 60 grep -q "trained on while ddptop was stopped" "$out" || { cat "$out"; die "no catch-up line after SIGCONT"; }
wait_for 20 sh -c "[ \$(grep -o 'step [0-9]*' '$out' | tail -1 | cut -d' ' -f2) -gt $((before + 1000)) ]" ||
    { cat "$out"; die "steps did not move on past $before"; }
grep -q "nothing from ddptop" "$out" && die "a worker took the stopped ddptop for gone"
kill -INT $dp
ended_within 60 $dp || die "ddptop did not end after Ctrl-C"
[ $rc -eq 130 ] || { tail -20 "$out"; die "exit $rc after Ctrl-C, want 130"; }
grep -Eq "^stopped by Ctrl-C at step [0-9]+, checkpoint written: /.*/step-[0-9]{8}$" "$out" || { tail -20 "$out"; die "no clean stop"; }
wait_for 10 no_workers || die "workers left: $(our_workers)"
