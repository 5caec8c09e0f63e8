# A torch script's --fault kill:1@5 with --max-restarts 2 fires once, as
# the C trainer's does: the script is run again (it starts from step 0,
# below the fault's step) and finishes, so the class sees one SIGKILL, one
# restart and the job done, exit 0.
. tests/lib.sh
. tests/lib_py.sh
out=$TMP/out.txt
# in a directory of its own: a ./checkpoints left by another run would be
# resumed from
mkdir "$TMP/run"
(cd "$TMP/run" && timeout 200 env DDPTOP_WORKER=$PY_WORKER "$DDPTOP" run -n 2 --headless --max-restarts 2 \
    --stop-grace 3 -- --fault kill:1@5 "$OLDPWD/examples/ddp_basics.py" --data synthetic --limit 2048 --epochs 1 \
    --out "$TMP/model.pt") >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || die "ddptop exited $rc, want 0 (one restart, then done)"
[ "$(grep -c "ended: signal 9" "$out")" -eq 1 ] || die "the kill fired $(grep -c "ended: signal 9" "$out") times, want once"
grep -q "restart 1/2" "$out" || die "no restart"
grep -q "restart 2/2" "$out" && die "the fault fired again after the restart"
grep -qi "job done" "$out" || die "no clean verdict"
wait_for 10 no_ranks || die "ranks left running: $(our_ranks)"
echo "PASS: a script's kill fires once across restarts"
