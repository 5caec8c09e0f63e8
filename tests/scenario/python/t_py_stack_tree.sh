# Every rank's stacks merged into one tree, on real torch ranks: a 3-rank
# script whose rank 1 never leaves its own loop (straggle) while ranks 0
# and 2 wait in a barrier for it.
# 1. --headless --json: after the {"k":"hang"} verdict comes one
#    {"k":"stacks"} object whose tree has rank 1 alone (odd, first) at
#    straggle and ranks 0,2 in barrier under the script's line, both marked
#    stuck by the second look, and no heartbeat thread of ddptop's.
# 2. The screen in tmux at 80x24: t opens the merged page with the sets and
#    the stuck marks; at 200x60 the same page, whole lines; `ddptop stacks
#    ENDPOINT` prints the same tree from another terminal, `--json` the
#    object; an attached screen's t shows the same page. Bad input to
#    `ddptop stacks`: one line, exit 2. Then rank 1 is let go: the barrier
#    ranks 0,2 sat in through every look completes (no signal interrupted
#    it), every rank ends cleanly and ddptop exits 0.
. tests/lib.sh
. tests/lib_py.sh
. tests/lib_tui.sh
command -v tmux >/dev/null || skip "tmux not installed"

# ---- bad input ----
out=$("$DDPTOP" stacks 2>&1); rc=$?
[ $rc = 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || die "no endpoint: exit $rc: $out"
out=$("$DDPTOP" stacks ipc:///tmp/x --control 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q -- --control || die "--control: exit $rc: $out"
out=$(timeout 10 "$DDPTOP" stacks "ipc://$TMP/nothing/ctl" --wait 1 2>&1); rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "ddptop stacks: no job answered" || die "no job: exit $rc: $out"

cat >"$TMP/stuck.py" <<'EOF'
import os, time
import torch
import torch.distributed as dist
RELEASE = os.environ.get("STUCK_RELEASE", "/nonexistent")
dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(4)
for _ in range(3):
    dist.all_reduce(t)


def straggle():
    while not os.path.exists(RELEASE):
        time.sleep(0.05)


if rank == 1:
    straggle()
dist.barrier()
dist.destroy_process_group()
EOF

# ---- 1. headless --json: the tree follows the hang ----
out=$TMP/out.jsonl
py_exec -n 3 --headless --json --hang-after 3 --stop-grace 2 --log-dir "$TMP/logs" -- "$TMP/stuck.py" \
    >"$out" 2>"$TMP/err" &
dp=$!
CLEANUPS+=("kill -9 $dp")
wait_for 90 grep -q '"k":"stacks"' "$out" || { tail -5 "$out" "$TMP/err"; die "no stacks object after the hang"; }
grep -q '"k":"hang"' "$out" || die "stacks without a hang"
"$PY" - "$(grep '"k":"stacks"' "$out" | head -1)" <<'PYEOF' || die "the merged tree is wrong"
import json, sys
t = json.loads(sys.argv[1])["tree"]
assert t["world"] == 3 and t["ranks"] == 3 and t["compared"], t
nodes = {n["id"]: n for n in t["nodes"]}
by = {n["frame"]: n for n in t["nodes"]}
s = by["stuck.py:14 straggle"]
assert s["ranks"] == "1" and s["n"] == 1 and s["odd"] and s["stuck"], s
assert nodes[s["parent"]]["frame"] == "stuck.py:18 <module>", nodes[s["parent"]]
w = by["stuck.py:19 <module>"]
assert w["ranks"] == "0,2" and w["n"] == 2 and not w["odd"] and w["stuck"], w
barrier = [n for n in t["nodes"] if n["frame"].endswith(" barrier") and "distributed_c10d" in n["frame"]]
assert barrier and barrier[0]["ranks"] == "0,2" and barrier[0]["stuck"], barrier
# under the script's line 19, and the smaller set comes first among siblings
up = barrier[0]
while up["parent"] >= 0 and up["frame"] != "stuck.py:19 <module>":
    up = nodes[up["parent"]]
assert up is w, "barrier not under line 19"
order = [n["id"] for n in t["nodes"] if n["parent"] == w["parent"]]
assert order == [s["parent"], w["id"]], order
assert not any("beat.py" in n["frame"] for n in t["nodes"]), "ddptop's heartbeat thread in the tree"
PYEOF
kill -TERM "$dp"
ended_within 30 $dp || die "ddptop did not end after SIGTERM"
wait_for 10 no_ranks || die "ranks left running: $(our_ranks)"

# ---- 2. the screen, and ddptop stacks from another terminal ----
tmux new-session -d -s "$TS" -x 80 -y 24 \
    "cd '$PWD' && DDPTOP_TEST_TAG='$DDPTOP_TEST_TAG' STUCK_RELEASE='$TMP/release' LANG=C.UTF-8 $(py_run_line -n 3 --hang-after 3 --log-dir "'$TMP/logs2'" -- \
    "'$TMP/stuck.py'") >'$TMP/after.txt' 2>&1; echo \$? >'$TMP/exit'; sleep 120"
wait_for 90 has "hang" || dies "no hang on the screen"
keys t
wait_for 10 has "every rank's stacks, merged" || dies "t did not open the merged page"
wait_for 15 has "looks 1.0 s apart: \* no rank moved" || dies "no second look"
# 80 columns: the sets and the frames fit, the odd rank first and marked
screen | grep -Eq '^\* ! +1 +1 +\+ stuck\.py:18 <module>' || dies "rank 1's branch (odd, stuck) not shown"
screen | grep -Eq '^\*   +2 +0,2 +\+ stuck\.py:19 <module>' || dies "ranks 0,2's branch not shown"
[ "$(screen | grep -n '+ stuck.py:18' | cut -d: -f1)" -lt "$(screen | grep -n '+ stuck.py:19' | cut -d: -f1)" ] ||
    dies "the smaller set is not first"
screen_e | grep 'stuck.py:18' | grep -q $'\e\\[' || dies "the odd branch is not coloured apart"
# 200x60: the same page, the barrier under line 19 on the screen with its set
resize 200 60
wait_for 5 hasE '^\*   +2 +0,2 +distributed_c10d\.py:[0-9]+ barrier' || dies "200x60: no barrier frame for 0,2"
# from another terminal: the job's endpoint as its workers were given it
EP=
for p in $(our_ranks); do
    EP=$(tr '\0' '\n' </proc/$p/environ | sed -n 's/^DDPTOP_CTL=//p') && [ -n "$EP" ] && break
done
case $EP in ipc://*) ;; *) dies "no control endpoint found ('$EP')";; esac
timeout 60 "$DDPTOP" stacks "$EP" >"$TMP/tree.txt" 2>"$TMP/tree.err" || { cat "$TMP/tree.err"; die "ddptop stacks failed"; }
cat "$TMP/tree.txt"
head -1 "$TMP/tree.txt" | grep -q "^3 ranks, 3 stacks; looks 1.0 s apart: \* no rank moved (13), ! smaller set$" ||
    die "ddptop stacks: no head line"
grep -Eq '^\* ! +1 +1 +\+ stuck\.py:18 <module>$' "$TMP/tree.txt" || die "ddptop stacks: rank 1's branch"
grep -Eq '^\* +! +1 +1 + stuck\.py:14 straggle$' "$TMP/tree.txt" || die "ddptop stacks: straggle"
timeout 60 "$DDPTOP" stacks "$EP" --json >"$TMP/tree.json" || die "ddptop stacks --json failed"
"$PY" -c 'import json,sys; t=json.load(open(sys.argv[1])); assert t["world"]==3 and t["compared"], t;
assert any(n["frame"]=="stuck.py:14 straggle" and n["ranks"]=="1" for n in t["nodes"]), t' "$TMP/tree.json" ||
    die "ddptop stacks --json: not the tree"
# an attached screen's t: the job gathers, the viewer shows the same page
tmux new-session -d -s v -x 80 -y 24 "cd '$PWD' && LANG=C.UTF-8 '$DDPTOP' attach '$EP'; sleep 60"
vhas() { tmux capture-pane -p -t v | grep -Eq -- "$1"; }
wait_for 20 vhas "attached" || { tmux capture-pane -p -t v; die "the viewer did not attach"; }
tmux send-keys -t v t
wait_for 20 vhas "every rank's stacks, merged" || { tmux capture-pane -p -t v; die "t on the viewer: no page"; }
wait_for 5 vhas '^\* ! +1 +1 +  stuck\.py:14 straggle' || { tmux capture-pane -p -t v; die "t on the viewer: no tree"; }
tmux send-keys -t v q
keys Escape
wait_for 5 sh -c "! tmux -L '$TS' capture-pane -p -t '$TS' | grep -q 'every rank.s stacks, merged'" || dies "Esc did not close"
# six looks signalled every rank; none broke a blocking call: released, rank 1 joins the
# barrier ranks 0 and 2 waited in all along, and every rank ends cleanly
touch "$TMP/release"
wait_for 60 has " DONE " || dies "the released job did not end"
keys q
wait_for 30 test -s "$TMP/exit" || dies "ddptop did not leave"
wait_for 10 no_ranks || die "ranks left running: $(our_ranks)"
grep -l Traceback "$TMP"/logs2/*.log && die "a rank raised: $(cat "$TMP"/logs2/*.log | grep -A5 Traceback | head -20)"
[ "$(cat "$TMP/exit")" = 0 ] || { cat "$TMP/after.txt"; die "ddptop exited $(cat "$TMP/exit") after the release"; }
echo "PASS: every rank's torch stacks merged: --json after a hang, t at 80x24 and 200x60, ddptop stacks"
