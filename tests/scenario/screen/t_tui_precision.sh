# The precision a job computes in, where a user looks for it: the header
# segment "precision bf16, grads fp32" on the TUI (real workers in tmux), and
# the hello event line (headless --json) for every rank.
. tests/lib.sh
command -v tmux >/dev/null || skip "tmux not installed"
common="--dataset synthetic --model mlp:64,128,10 --batch-size 32 --eval-every 0 --no-final-ckpt"
# headless: each rank's hello event names the precision
"$DDPTOP" run -n 2 --headless --json -- $common --steps 20 --precision bf16 --ckpt-dir "$TMP/h" >"$TMP/h.out" 2>&1 \
    || { cat "$TMP/h.out"; die "headless bf16 run failed"; }
for r in 0 1; do
    grep -q "\"text\":\"rank $r hello pid [0-9]* on .* (cpu, gloo), precision bf16, grads fp32\"" "$TMP/h.out" \
        || { grep hello "$TMP/h.out"; die "rank $r's hello event does not name the precision"; }
done
"$DDPTOP" run -n 1 --headless --json -- $common --steps 5 --ckpt-dir "$TMP/f" >"$TMP/f.out" 2>&1 \
    || { cat "$TMP/f.out"; die "headless fp32 run failed"; }
grep -q '"text":"rank 0 hello pid [0-9]* on .* (cpu, gloo), precision fp32, grads fp32"' "$TMP/f.out" \
    || { grep hello "$TMP/f.out"; die "the default precision is not named fp32"; }
# the TUI header, as the user sees it
S=ddptop-test-$$
tmux() { command tmux -L "$S" "$@"; }
CLEANUPS+=("command tmux -L $S kill-server")
tmux new-session -d -s "$S" -x 160 -y 40 \
  "cd '$PWD' && DDPTOP_TEST_TAG='$DDPTOP_TEST_TAG' LANG=C.UTF-8 '$DDPTOP' run -n 2 -- $common --epochs 100000 --precision tf32 --ckpt-dir '$TMP/ck' >'$TMP/after.txt' 2>&1; echo \$? >'$TMP/exit'; sleep 60"
screen() { tmux capture-pane -p -t "$S"; }
has() { screen | grep -q -- "$1"; }
wait_for 30 has 'train' || { screen; die "ranks never reached train"; }
wait_for 10 has 'precision tf32, grads fp32' || { screen; die "the header does not show the precision"; }
tmux send-keys -t "$S" d
wait_for 30 no_workers || { screen; die "workers still running after d"; }
tmux send-keys -t "$S" q
wait_for 10 test -s "$TMP/exit" || { screen; die "ddptop did not leave after q"; }
[ "$(cat "$TMP/exit")" = 0 ] || { cat "$TMP/after.txt"; die "ddptop exited $(cat "$TMP/exit")"; }
echo "precision on screen and in the hello events"
