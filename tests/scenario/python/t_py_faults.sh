# Two scripts that go wrong, under `ddptop run` with the torch adapter:
# a forgotten sampler.set_epoch is said (by the adapter and by ddptop), and
# a script that raises ends the job failed, its traceback in the events.
. tests/lib.sh
"$PY" -c 'import torch' 2>/dev/null || skip "no torch for $PY"

out=$TMP/epoch.jsonl
"$DDPTOP" run -n 2 --python "$PY" --headless --json examples/ddp_forgot_set_epoch.py >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$out"; die "forgot_set_epoch: ddptop exited $rc"; }
grep -q 'DistributedSampler iterated again at epoch 0 without set_epoch(1)' "$out" || { cat "$out"; die "no adapter warning"; }
grep -q '"level":"warn".*epoch 1 has the same sample order as epoch 0: sampler.set_epoch(epoch) not called?' "$out" \
    || { cat "$out"; die "ddptop did not see the repeated order"; }

out=$TMP/crash.jsonl
"$DDPTOP" run -n 2 --python "$PY" --headless --json examples/ddp_basics.py --data synthetic --limit 512 \
    --crash-at-step 3 --out "$TMP/model.pt" >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -ne 0 ] || die "a crashing script: ddptop exited 0"
for r in 0 1; do
    grep -q "\"r\":$r,\"level\":\"error\",\"text\":\"rank $r: destroyed -> error: RuntimeError: crash asked for at step 3\"" \
        "$out" || die "rank $r: no error phase"
    grep -q "\"r\":$r,\"level\":\"error\",\"text\":\"examples/ddp_basics.py:[0-9]* in main: raise RuntimeError(f" "$out" \
        || die "rank $r: the traceback's frame is not in the events"
done
grep -q '"ok":false' "$out" || die "summary says ok"
wait_for 5 no_workers || die "workers left running"
echo "PASS: forgotten set_epoch warned; a crash fails the job with its traceback"
