# --fault kill:1@30 with --max-restarts 2 fires once: rank 1 kills itself
# at step 30, the restart resumes from the step-20 checkpoint (below the
# fault's step) and trains to --steps 60 without the fault firing again, so
# the class sees the recovery: one SIGKILL, "restart 1/2", no "restart
# 2/2", the job done, exit 0. Same for a torch script through the adapter.
. tests/lib.sh
out=$TMP/out.txt
timeout 120 "$DDPTOP" run -n 2 --headless --max-restarts 2 --stop-grace 3 -- --fault kill:1@30 --ckpt-every 20 \
    --steps 60 --epochs 1000 --dataset synthetic --model mlp:16,32,4 --batch-size 8 --ckpt-dir "$TMP/ck" >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || die "ddptop exited $rc, want 0 (one restart, then done)"
[ "$(grep -c "ended: signal 9" "$out")" -eq 1 ] || die "the kill fired $(grep -c "ended: signal 9" "$out") times, want once"
grep -q "restart 1/2: resuming from step 20" "$out" || die "no restart from the step-20 checkpoint"
grep -q "restart 2/2" "$out" && die "the fault fired again after the restart"
grep -q "faults at steps up to 30 fired in an earlier run" "$out" || die "the restart does not say the fault is spent"
grep -qi "job done" "$out" || die "no clean verdict"
[ -e "$TMP/ck/step-00000060" ] || die "the restart did not train to step 60: $(ls "$TMP/ck")"
wait_for 5 no_workers || die "workers left running: $(our_workers)"
echo "PASS: kill fires once across restarts"
