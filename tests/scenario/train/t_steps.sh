# --steps N is N optimizer steps across as many epochs as it takes; with
# --epochs too, whichever comes first, and the stop says which (issue 15,
# item 2). The default job keeps its 30 epochs when an unrelated trainer
# option is added. A run resumed before an epoch boundary that --steps
# crosses ends bit for bit where the uninterrupted one does.
. tests/lib.sh
# 64 samples over 2 ranks, batch 8: 4 steps an epoch
JOB="--dataset synthetic --model mlp:16,8,3 --synthetic-size 64 --batch-size 8 --eval-every 0 --seed 5 --momentum 0.9"

# summary_step FILE: the job's step in the --json summary.
summary_step() { tail -1 "$1" | sed -n 's/.*"k":"summary".*"step":\([0-9]*\),"epoch".*/\1/p'; }

timeout 60 "$DDPTOP" run -n 2 --headless --json -- $JOB --steps 10 --ckpt-dir "$TMP/A" >"$TMP/a.json" 2>&1 \
    || die "--steps 10 failed: $(tail -3 "$TMP/a.json")"
[ "$(summary_step "$TMP/a.json")" = 10 ] || die "--steps 10 stopped at step $(summary_step "$TMP/a.json"): $(tail -1 "$TMP/a.json")"
grep -q 'stopping after step 10: reached --steps 10"' "$TMP/a.json" || die "--steps 10: the stop does not say --steps"
echo "ok: --steps 10 ran 10 steps over 3 epochs"

timeout 60 "$DDPTOP" run -n 2 --headless --json -- $JOB --steps 10 --epochs 2 --no-final-ckpt >"$TMP/b.json" 2>&1 \
    || die "--steps 10 --epochs 2 failed: $(tail -3 "$TMP/b.json")"
[ "$(summary_step "$TMP/b.json")" = 8 ] || die "--steps 10 --epochs 2 stopped at step $(summary_step "$TMP/b.json")"
grep -q 'stopping after step 8: finished 2 epochs (before --steps)' "$TMP/b.json" || die "--epochs first: the stop does not say which bound"
timeout 60 "$DDPTOP" run -n 2 --headless --json -- $JOB --steps 6 --epochs 2 --no-final-ckpt >"$TMP/c.json" 2>&1 \
    || die "--steps 6 --epochs 2 failed"
grep -q 'stopping after step 6: reached --steps 6 (before --epochs)' "$TMP/c.json" || die "--steps first: the stop does not say which bound"
echo "ok: with --epochs, whichever comes first, named"

# The default length (30 epochs = 120 steps here) with an unrelated option.
timeout 120 "$DDPTOP" run -n 2 --headless --json -- $JOB --lr 0.05 --no-final-ckpt >"$TMP/d.json" 2>&1 \
    || die "-- --lr 0.05 failed: $(tail -3 "$TMP/d.json")"
[ "$(summary_step "$TMP/d.json")" = 120 ] || die "-- --lr 0.05 ran $(summary_step "$TMP/d.json") steps, want the default 30 epochs (120)"
echo "ok: an unrelated option keeps the default 30 epochs"

# Resumed at step 6 (mid epoch 1), on to --steps 10: the same weights as A.
timeout 60 "$DDPTOP" run -n 2 --headless -- $JOB --steps 6 --ckpt-dir "$TMP/B" >"$TMP/b1.out" 2>&1 || die "B1 failed"
timeout 60 "$DDPTOP" run -n 2 --headless -- $JOB --steps 10 --ckpt-dir "$TMP/B" --resume "$TMP/B/latest" >"$TMP/b2.out" 2>&1 \
    || die "B2 (resume) failed: $(tail -3 "$TMP/b2.out")"
[ "$(readlink "$TMP/B/latest")" = step-00000010 ] || die "resume did not reach step 10: $(ls "$TMP/B")"
cmp "$TMP/A/step-00000010/model.safetensors" "$TMP/B/step-00000010/model.safetensors" \
    || die "resumed across an epoch boundary: weights differ from the uninterrupted run"
cmp "$TMP/A/step-00000010/trainer.safetensors" "$TMP/B/step-00000010/trainer.safetensors" \
    || die "resumed across an epoch boundary: optimizer state or position differ"
echo "ok: resumed at step 6, --steps 10 across the boundary: bit for bit"
no_workers || die "workers left: $(our_workers)"
