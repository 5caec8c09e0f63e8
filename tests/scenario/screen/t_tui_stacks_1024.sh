# The merged stack tree at 1024 ranks on one 80x24 screen: two load
# generators (tests/tools/tool_load.c) play 1024 ranks of ddptop's own
# trainer against `ddptop listen`, rank 700 stops outside any collective
# while the 1023 others wait in the next all-reduce. After the hang, t shows
# the whole job in a handful of lines: rank 700 alone, first, marked odd
# and stuck; the others as one set, "0-699,701-1023", in the all-reduce.
. tests/lib.sh
. tests/lib_tui.sh
command -v tmux >/dev/null || skip "tmux not installed"
LOAD=$BUILD/tests/tool_load
[ -x "$LOAD" ] || die "$LOAD is not built"
ulimit -n 8192 2>/dev/null || skip "skip: cannot open 8192 files (ulimit -n)"
D=$TMP/sock
mkdir -m 700 "$D"
tmux new-session -d -s "$TS" -x 80 -y 24 \
    "cd '$PWD' && LANG=C.UTF-8 '$DDPTOP' listen 'ipc://$D/ctl' --hang-after 3 >'$TMP/after.txt' 2>&1; sleep 60"
wait_for 10 test -S "$D/ctl" || dies "ddptop listen did not bind"
start=$(( $(date +%s) + 3 ))
for first in 0 512; do
    "$LOAD" "ipc://$D/ctl" --ranks 1024 --first $first --count 512 --rate 5 --start $start --stall 700@4 --secs 120 \
        >"$TMP/gen.$first" 2>&1 &
    CLEANUPS+=("kill $!")
done
wait_for 90 has "hang" || dies "no hang on the screen"
keys t
wait_for 20 has "looks 1.0 s apart: \* no rank moved" || dies "t: no merged tree after two looks"
screen | grep -q "^1024 ranks, 1024 stacks; looks 1.0 s apart: \* no rank moved (4), ! smaller set" ||
    dies "not every rank in the tree"
screen | grep -Eq '^\*   +1024 +0-1023 +ddptop-worker$' || dies "no common root"
screen | grep -Eq '^\* ! +1 +700 +\+ \(in no collective\)$' || dies "rank 700 not alone"
screen | grep -Eq '^\*   +1023 +0-699,701-1023 +\+ allreduce #[0-9]+$' || dies "the 1023 others not one set"
[ "$(screen | grep -n '(in no collective)' | cut -d: -f1)" -lt "$(screen | grep -n ' allreduce #' | cut -d: -f1)" ] ||
    dies "the smaller set is not first"
[ "$(screen | grep -c '^\*')" -le 5 ] || dies "more than a handful of lines for 1024 ranks"
keys Escape
echo "PASS: 1024 ranks merged into five lines at 80x24, rank 700 alone"
