# The screen tells a lost checkpoint (issue 15, item 1): a job whose
# checkpoint directory became a file after launch is destroyed with `d`;
# the final checkpoint cannot be written, so the status line says
# "job failed: checkpoint lost", never "ended cleanly", and ddptop exits 3.
. tests/lib.sh
. tests/lib_tui.sh # the private tmux server and its helpers; the real workers, not the feeder
JOB="--dataset synthetic --model mlp:16,8,3 --batch-size 8 --eval-every 0 --epochs 1000000 --ckpt-dir '$TMP/ck'"
tmux new-session -d -s "$TS" -x 160 -y 45 \
    "cd '$PWD' && DDPTOP_TEST_TAG='$DDPTOP_TEST_TAG' LANG=C.UTF-8 '$DDPTOP' run -n 2 -- $JOB >'$TMP/after.txt' 2>&1; echo \$? >'$TMP/exit'; sleep 120"
wait_for 60 has "RUNNING" || dies "the job did not start"
rm -rf "$TMP/ck" && touch "$TMP/ck"
tmux send-keys -t "$TS" d
wait_for 60 has "checkpoint lost" || dies "the screen does not say the checkpoint was lost"
has "ended cleanly" && dies "the screen says ended cleanly"
tmux send-keys -t "$TS" q
wait_for 30 test -s "$TMP/exit" || dies "ddptop did not leave"
[ "$(cat "$TMP/exit")" = 3 ] || die "exit $(cat "$TMP/exit"), want 3: $(tail -3 "$TMP/after.txt")"
grep -q '^job failed: checkpoint lost: step [0-9]* was not written' "$TMP/after.txt" || die "summary: $(tail -3 "$TMP/after.txt")"
logs=$(grep -o "logs are kept in .*" "$TMP/after.txt" | sed 's/logs are kept in //')
[ -n "$logs" ] && CLEANUPS+=("rm -rf '$logs'")
echo "ok: $(grep '^job failed' "$TMP/after.txt")"
no_workers || die "workers left: $(our_workers)"
