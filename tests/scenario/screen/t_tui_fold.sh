# Frequent events fold (issue 29, item 4): a job that checkpoints every 2
# steps (three events a checkpoint: the phase to checkpoint, the checkpoint,
# the phase back) shows one row each in the events panel, with the newest
# text and a count ("×12"), while the straggler warning said at the start
# stays in view; at the end the checkpoint row's count is the number of
# checkpoints the recording holds. The replay of the recording shows the
# same row, and headless still prints every checkpoint.
. tests/lib.sh
. tests/lib_tui.sh # the private tmux server and its helpers; the real workers, not the feeder
JOB="--dataset synthetic --synthetic-size 256 --model mlp:16,8,3 --batch-size 32 --eval-every 0 --steps 60 \
--ckpt-every 2 --ckpt-dir '$TMP/ck' --fault slow:1:1ms --pace 10"
tmux new-session -d -s "$TS" -x 120 -y 40 \
    "cd '$PWD' && DDPTOP_TEST_TAG='$DDPTOP_TEST_TAG' LANG=C.UTF-8 '$DDPTOP' run -n 2 --record '$TMP/rec' -- $JOB >'$TMP/after.txt' 2>&1; echo \$? >'$TMP/exit'; sleep 120"
WARN="r1 fault: rank 1 sleeps 1 ms every step"
wait_for 60 has "RUNNING" || dies "the job did not start"
keys 6 # the events panel zoomed: room for every row the job makes
# rows of the events panel with rank 0's periodic checkpoints, and their counts
ckpt_rows() { screen | grep -E "r0 (×[0-9]+ )?checkpoint step [0-9]+ written by rank 0"; }
folded() { ckpt_rows | grep -Eq "r0 ×([1-9][0-9]) checkpoint step"; }
wait_for 90 folded || dies "no folded checkpoint row with a count of 10 or more"
screen >"$TMP/mid"
[ "$(ckpt_rows | wc -l)" = 1 ] || dies "checkpoint rows: $(ckpt_rows | wc -l), want 1"
for kind in "train -> checkpoint (periodic)" "checkpoint -> train"; do
    n=$(grep -c "rank 0: $kind" "$TMP/mid")
    [ "$n" = 1 ] || { cat "$TMP/mid"; die "'$kind' rows: $n, want 1"; }
done
grep -q "$WARN" "$TMP/mid" || { cat "$TMP/mid"; die "the warning is no longer in view"; }
wait_for 90 has "job done" || dies "the job did not end"
screen >"$TMP/end"
live=$(grep -oE "r0 ×[0-9]+ checkpoint step [0-9]+ written by rank 0 .*" "$TMP/end" | sed 's/ *$//')
grep -q "$WARN" "$TMP/end" || { cat "$TMP/end"; die "the warning is no longer in view at the end"; }
keys q
wait_for 15 test -s "$TMP/exit" || dies "ddptop did not leave"
[ "$(cat "$TMP/exit")" = 0 ] || die "ddptop exited $(cat "$TMP/exit"): $(tail -3 "$TMP/after.txt")"
no_workers || die "workers left: $(our_workers)"
# the count is every checkpoint rank 0 reported (the final one folds in too)
"$DDPTOP" export "$TMP/rec" --jsonl "$TMP/rec.jsonl" >/dev/null 2>&1 || die "export failed"
n=$(grep '"k":"ckpt"' "$TMP/rec.jsonl" | grep -c '"r":0')
[ "$n" -ge 10 ] && [ "${live%% checkpoint*}" = "r0 ×$n" ] || { cat "$TMP/end"; die "row '$live', $n checkpoints recorded"; }
# headless, a log of what happened, prints each one
"$DDPTOP" replay "$TMP/rec" --headless --speed 64 >"$TMP/replay.out" 2>&1 || die "replay --headless failed"
h=$(grep -c "r0 checkpoint step [0-9]* written by rank 0" "$TMP/replay.out")
[ "$h" = "$n" ] || die "headless replay printed $h checkpoints, $n recorded"
# the replay's screen folds alike
tmux kill-server
wait_for 10 sh -c "! command tmux -L '$TS' ls >/dev/null 2>&1" || die "the tmux server did not go"
rm -f "$TMP/exit"
tmux new-session -d -s "$TS" -x 120 -y 40 \
    "cd '$PWD' && LANG=C.UTF-8 '$DDPTOP' replay '$TMP/rec' --speed 64 >'$TMP/after.txt' 2>&1; echo \$? >'$TMP/exit'; sleep 60"
wait_for 60 has "end of recording" || dies "the replay did not reach its end"
keys 6
wait_for 5 sh -c "command tmux -L '$TS' capture-pane -p -t '$TS' | grep -qF '$WARN'" || dies "the replay lost the warning"
replayed=$(screen | grep -oE "r0 ×[0-9]+ checkpoint step [0-9]+ written by rank 0 .*" | sed 's/ *$//')
[ "$replayed" = "$live" ] || { screen; die "replay row '$replayed', live '$live'"; }
keys q
wait_for 10 test -s "$TMP/exit" || dies "the replay did not leave"
echo "ok: $live; warning in view; replay alike; headless $h lines"
