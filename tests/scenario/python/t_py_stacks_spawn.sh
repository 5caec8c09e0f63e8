# Every rank's stacks for ranks a script starts itself (torch.multiprocessing
# .spawn, run as `ddptop run SCRIPT`, no -n): both ranks share the launched
# process's log, so the stack signal cannot tell their dumps apart; ddptop
# asks each rank on ctl and its heartbeat thread sends the dump back
# ("stacks" command, "stack" message, docs/PROTOCOL.md). Rank 1 straggles in
# its own loop while rank 0 waits for it in a barrier:
# 1. --json after the hang: the tree has rank 1 alone at spawned.py's
#    straggle under its line 19, rank 0 at line 20 in torch's barrier, both
#    stuck after the second look, and no "(no stack ...)" leaf; the hang
#    report keeps each rank's dump (hang-1/stacks/rank-N.txt);
# 2. `ddptop stacks ENDPOINT` from another terminal prints the same
#    branches; then rank 1 is let go, the barrier rank 0 waited in through
#    every ask completes, and the job ends cleanly (exit 0).
. tests/lib.sh
. tests/scenario/python/lib_py.sh
. tests/scenario/python/lib_spawn.sh

spawned_straggler "$TMP/spawned.py"

port=$(free_port 1)
out=$TMP/out.jsonl
DDPTOP_TEST_TAG=$DDPTOP_TEST_TAG timeout 170 "$DDPTOP" run --python "$PY" --headless --json --hang-after 3 \
    --log-dir "$TMP/logs" "$TMP/spawned.py" "$port" "$TMP/release" >"$out" 2>"$TMP/err" &
dp=$!
CLEANUPS+=("kill -9 $dp")
wait_for 120 grep -q '"k":"stacks"' "$out" || { tail -5 "$out" "$TMP/err" "$TMP"/logs/*; die "no stacks object after the hang"; }
"$PY" - "$(grep '"k":"stacks"' "$out" | head -1)" <<'PYEOF' || die "the merged tree of the spawned ranks is wrong"
import json, sys
t = json.loads(sys.argv[1])["tree"]
assert t["world"] == 2 and t["ranks"] == 2 and t["compared"], t
nodes = {n["id"]: n for n in t["nodes"]}
by = {n["frame"]: n for n in t["nodes"]}
assert not any(n["frame"].startswith("(") for n in t["nodes"]), [n["frame"] for n in t["nodes"]]
s = by["spawned.py:9 straggle"]
assert s["ranks"] == "1" and s["stuck"], s
assert nodes[s["parent"]]["frame"] == "spawned.py:19 worker", nodes[s["parent"]]
w = by["spawned.py:20 worker"]
assert w["ranks"] == "0" and w["stuck"], w
barrier = [n for n in t["nodes"] if n["frame"].endswith(" barrier") and "distributed_c10d" in n["frame"]]
assert barrier and barrier[0]["ranks"] == "0", barrier
assert not any("beat.py" in n["frame"] for n in t["nodes"]), "ddptop's heartbeat thread in the tree"
print("PASS: --json's tree")
PYEOF

# the hang's report keeps each rank's own dump, as its heartbeat thread sent it
wait_for 20 test -s "$TMP/logs/hang-1/stacks/rank-1.txt" || { ls -R "$TMP/logs"; die "no stacks/rank-1.txt in the hang report"; }
grep -q 'line 9 in straggle' "$TMP/logs/hang-1/stacks/rank-1.txt" || die "rank 1's dump: $(cat "$TMP/logs/hang-1/stacks/rank-1.txt")"
grep -q 'in barrier' "$TMP/logs/hang-1/stacks/rank-0.txt" || die "rank 0's dump: $(cat "$TMP/logs/hang-1/stacks/rank-0.txt")"

# from another terminal: the endpoint the spawned ranks were given
EP=
for p in $(tagged); do
    EP=$(tr '\0' '\n' </proc/$p/environ | sed -n 's/^DDPTOP_CTL=//p') && [ -n "$EP" ] && break
done
case $EP in ipc://*) ;; *) die "no control endpoint found ('$EP')";; esac
timeout 60 "$DDPTOP" stacks "$EP" >"$TMP/tree.txt" 2>"$TMP/tree.err" || { cat "$TMP/tree.err"; die "ddptop stacks failed"; }
cat "$TMP/tree.txt"
head -1 "$TMP/tree.txt" | grep -q "^2 ranks, [0-9]* stacks; looks 1.0 s apart" || die "ddptop stacks: no head line"
grep -Eq '^\*.* +1 +1 +.*spawned\.py:9 straggle$' "$TMP/tree.txt" || die "ddptop stacks: rank 1's straggle"
grep -Eq '^\*.* +1 +0 +.*spawned\.py:20 worker$' "$TMP/tree.txt" || die "ddptop stacks: rank 0's barrier line"
grep -q "(no stack" "$TMP/tree.txt" && die "ddptop stacks: a rank without its stack"

touch "$TMP/release"
wait $dp
rc=$?
[ $rc = 0 ] || { tail -5 "$out" "$TMP/err"; die "ddptop exited $rc after the release"; }
wait_for 20 none_tagged || die "processes left running: $(tagged)"
grep -q Traceback "$TMP"/logs/*.log && die "a rank raised: $(grep -A5 Traceback "$TMP"/logs/*.log | head -20)"
echo "PASS: spawned ranks' stacks over the wire: --json after a hang, ddptop stacks"
