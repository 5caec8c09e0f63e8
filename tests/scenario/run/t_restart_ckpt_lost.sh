# --max-restarts and a lost checkpoint (docs/DECISIONS.md): the checkpoint
# directory turns into a file during the first attempt, so a periodic
# checkpoint is lost; then rank 1 is killed. The restart (the file gone
# again, so from step 0) writes its checkpoints fine, and those supersede
# the lost one: a warning in the events, the job done, exit 0 (not 3).
. tests/lib.sh
out=$TMP/out.txt
# rank 0 sleeps 50 ms a step: 60 steps take 3 s at least
TRAIN="--dataset synthetic --model mlp:20,16,3 --batch-size 8 --epochs 100000 --steps 60 --ckpt-every 10 \
    --ckpt-dir $TMP/ck --fault slow:0:50"
"$DDPTOP" run -n 2 --headless --max-restarts 1 --stop-grace 3 -- $TRAIN >"$out" 2>&1 &
pid=$!
CLEANUPS+=("kill -9 $pid")
wait_for 60 test -e "$TMP/ck/step-00000010" || { cat "$out"; die "no checkpoint at step 10"; }
rm -rf "$TMP/ck" && touch "$TMP/ck"
wait_for 30 grep -q "checkpoint step [0-9]* lost" "$out" || { cat "$out"; die "no checkpoint lost"; }
victim=""
for p in $(our_workers); do
    tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx RANK=1 && victim=$p
done
[ -n "$victim" ] || { cat "$out"; die "no rank 1 worker found (did the first attempt end already?)"; }
rm -f "$TMP/ck"
kill -9 "$victim"
wait $pid; rc=$?
cat "$out"
grep -q "restart 1/1" "$out" || die "no restart"
grep -q "checkpoint step [0-9]* superseded: step [0-9]* lost earlier" "$out" || die "no warning that it was superseded"
grep -q "job done" "$out" || die "no clean verdict"
grep -q "checkpoint lost: step" "$out" && die "the verdict still says checkpoint lost"
[ $rc -eq 0 ] || die "ddptop exited $rc, want 0: the lost checkpoint was superseded"
wait_for 5 no_workers || die "workers left running: $(our_workers)"
echo "PASS: a checkpoint lost before a restart that wrote later ones is only a warning"
