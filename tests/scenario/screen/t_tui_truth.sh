# The screen never hides meaning, at 80x24, 100x30, 120x40 and 200x60:
# the progress bar stays after the first checkpoint (from 30 rows) (the header's flow()
# counted a line it never drew, so below ~136 columns the bar vanished);
# text cut at a panel's edge loses whole words or shows … ("waiting for
# hell", "eta 00:1" never); after DONE the key line offers only keys that
# still do something; a replay's last frame shows no collective as still
# awaited with a frozen wait once its ranks have ended.
. tests/lib.sh
. tests/lib_tui.sh
cat >"$TMP/t.feed" <<'FEED'
set beat=0.3
0    0,1  hello max_steps=90000 steps_per_epoch=1000 dataset_size=64000 model=mlp:784,1024,1024,1024,1024,10
25   2    hello max_steps=90000 steps_per_epoch=1000 dataset_size=64000 model=mlp:784,1024,1024,1024,1024,10
0.1  0,1  phase phase=train
0.1  0,1  train from=1 to=90000 rate=40 buckets=1
1.0  0    ckpt step=40 path=/tmp/ckpts/a/long/directory/name/step-00000040
FEED
start_feed 80 24 "" -n 3 -- --script "$TMP/t.feed"
wait_for 15 has "last checkpoint: step 40" || dies "no checkpoint on screen"
# every "waiting for ..." is whole or cut with an ellipsis, never mid-word
whole_words() {
    ! screen | grep -oE "waiting for ?[a-z…]*" | grep -qvE "^waiting for( hello|…)$"
}
# the title's eta, when shown, is a whole time
whole_eta() {
    local e
    e=$(screen | head -1 | grep -oE "eta [0-9:]*[^ ]?")
    [ -z "$e" ] || echo "$e" | grep -qE "^eta [0-9]+:[0-9]{2}:[0-9]{2}$"
}
progress() { hasE "^\[[█░#.=-]+\] +[0-9.]+%  step [0-9]+ of 90000"; }
for size in 80x24 100x30 120x40 200x60; do
    resize "${size%x*}" "${size#*x}"
    wait_for 10 sh -c "[ \"\$(command tmux -L '$TS' capture-pane -p -t '$TS' | wc -l)\" -eq ${size#*x} ]" ||
        dies "no $size frame"
    sleep 0.5
    # below 30 rows the header is one line (the title keeps step S/M)
    [ "${size#*x}" -lt 30 ] || wait_for 10 progress || dies "no progress bar after the checkpoint at $size"
    wait_for 5 has "waiting for" || dies "rank 2 is not shown waiting at $size"
    whole_words || dies "a word cut without … at $size"
    whole_eta || dies "eta cut at $size: $(screen | head -1)"
done
keys d
wait_for 60 has "job done" || dies "d did not end the job"
# after DONE: q and the navigation, not c d p f a w
wait_for 5 sh -c "command tmux -L '$TS' capture-pane -p -t '$TS' | tail -1 | grep -q '^q quit'" ||
    dies "the key line after DONE does not start with q quit"
screen | tail -1 | grep -qE "ckpt|destroy|pause|fault|abort|stack" && dies "the key line offers keys that do nothing now"
keys c
wait_for 5 has "the job has ended: no rank left to act on" || dies "c after DONE does not say why it does nothing"
has "checkpoint requested" && dies "c after DONE claims a checkpoint was requested"
keys q
wait_for 15 test -s "$TMP/exit" || dies "ddptop did not leave"

# a replay to its end: the collectives rank 0 waited in never completed
command tmux -L "$TS" kill-server
wait_for 10 sh -c "! command tmux -L '$TS' ls >/dev/null 2>&1" || die "tmux server did not go"
tmux new-session -d -s "$TS" -x 120 -y 40 \
    "cd '$PWD' && LANG=C.UTF-8 '$DDPTOP' replay --speed 64 examples/recordings/shutdown-hang.rec; sleep 60"
wait_for 30 has "end of recording" || dies "the replay did not reach its end"
hasE "^#[0-9]+ .* in, waiting [0-9.]+s for" && dies "ended ranks shown as still awaited on the last frame"
hasE "^#[0-9]+ .* in, never completed: r[0-9 r]+ ended without it" || dies "no collective said never completed"
keys q
echo "screen truth ok"
