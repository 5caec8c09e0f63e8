# A torch script's --fault kill:1@5 with --max-restarts 2 fires once, as
# the C trainer's does: the script is run again (it starts from step 0,
# below the fault's step) and finishes, so the class sees one SIGKILL, one
# restart and the job done, exit 0. A ./checkpoints/latest where it runs
# (the built-in trainer's default) changes nothing: the restart does not add
# the trainer's --resume to the script's own arguments (argparse would
# refuse it, exit 2).
. tests/lib.sh
. tests/lib_py.sh
out=$TMP/out.txt
mkdir -p "$TMP/run/checkpoints/step-00000004"
ln -s step-00000004 "$TMP/run/checkpoints/latest"
(cd "$TMP/run" && timeout 200 env DDPTOP_WORKER=$PY_WORKER "$DDPTOP" run -n 2 --headless --max-restarts 2 \
    --stop-grace 3 --log-dir "$TMP/logs" -- --fault kill:1@5 "$OLDPWD/examples/ddp_basics.py" --data synthetic --limit 2048 --epochs 1 \
    --out "$TMP/model.pt") >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || die "ddptop exited $rc, want 0 (one restart, then done)"
[ "$(grep -c "ended: signal 9" "$out")" -eq 1 ] || die "the kill fired $(grep -c "ended: signal 9" "$out") times, want once"
grep -q "restart 1/2: running .* again" "$out" || die "no restart that runs the script again as it was"
grep -q -- "--resume" "$out" && die "the restart handed the script --resume"
grep -qs "unrecognized arguments" "$TMP"/logs/* && die "the script was given arguments it refused"
grep -q "restart 2/2" "$out" && die "the fault fired again after the restart"
grep -qi "job done" "$out" || die "no clean verdict"
wait_for 10 no_ranks || die "ranks left running: $(our_ranks)"
echo "PASS: a script's kill fires once across restarts"
