# Every rank's stacks across two nodes (two ddptops on 127.0.0.1: node 0 and
# the agent of node 1): node 0 signals its own rank and reads its log; the
# rank on node 1 is not its to signal nor its log its to read, so node 0
# asks it on ctl, through the agent's relay ("stacks" command, "stack"
# message, docs/PROTOCOL.md). Rank 1 (node 1) straggles in its own loop
# while rank 0 (node 0) waits in a barrier: node 0's --json tree after the
# hang has rank 1 alone at straggle under line 15 and rank 0 at line 16 in
# torch's barrier, no "(Python on ...)" or "(no stack ...)" leaf; released,
# both nodes end clean.
. tests/lib.sh
"$PY" -c 'import torch' 2>/dev/null || skip "no torch for $PY"
port=$(free_port 3)
KEYS=$TMP/job.keys
cat >"$TMP/stuck.py" <<'PYEOF'
import os, sys, time
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(4)
for _ in range(3):
    dist.all_reduce(t)


def straggle():
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.05)
if rank == 1:
    straggle()
dist.barrier()
dist.destroy_process_group()
PYEOF
"$DDPTOP" run --headless --json --hang-after 3 -n 1 --nnodes 2 --node-rank 0 --rdzv 127.0.0.1:$port --keys "$KEYS" \
    --rdzv-timeout 60 --python "$PY" --log-dir "$TMP/l0" "$TMP/stuck.py" "$TMP/release" >"$TMP/a.out" 2>&1 &
pa=$!
CLEANUPS+=("kill -9 $pa")
wait_for 20 test -s "$KEYS" || { cat "$TMP/a.out"; die "node 0 wrote no key file"; }
"$DDPTOP" run -n 1 --nnodes 2 --node-rank 1 --rdzv 127.0.0.1:$port --keys "$KEYS" --python "$PY" \
    --log-dir "$TMP/l1" "$TMP/stuck.py" "$TMP/release" >"$TMP/b.out" 2>&1 &
pb=$!
CLEANUPS+=("kill -9 $pb")
wait_for 120 grep -q '"k":"stacks"' "$TMP/a.out" || { tail -5 "$TMP/a.out" "$TMP/b.out"; die "no stacks object after the hang"; }
"$PY" - "$(grep '"k":"stacks"' "$TMP/a.out" | head -1)" <<'PYEOF' || die "the merged tree of the two nodes' ranks is wrong"
import json, sys
t = json.loads(sys.argv[1])["tree"]
assert t["world"] == 2 and t["ranks"] == 2 and t["compared"], t
nodes = {n["id"]: n for n in t["nodes"]}
by = {n["frame"]: n for n in t["nodes"]}
assert not any(n["frame"].startswith("(") for n in t["nodes"]), [n["frame"] for n in t["nodes"]]
s = by["stuck.py:13 straggle"]
assert s["ranks"] == "1" and s["stuck"], s
assert nodes[s["parent"]]["frame"] == "stuck.py:15 <module>", nodes[s["parent"]]
w = by["stuck.py:16 <module>"]
assert w["ranks"] == "0" and w["stuck"], w
assert not any("beat.py" in n["frame"] for n in t["nodes"]), "ddptop's heartbeat thread in the tree"
print("PASS: --json's tree")
PYEOF
touch "$TMP/release"
wait $pa; ra=$?
wait $pb; rb=$?
[ $ra -eq 0 ] || { tail -5 "$TMP/a.out"; die "node 0 exited $ra"; }
[ $rb -eq 0 ] || { tail -5 "$TMP/b.out"; die "node 1 exited $rb"; }
grep -q '"verdict":"job done: all 2 ranks ended cleanly"' "$TMP/a.out" || { tail -3 "$TMP/a.out"; die "node 0: no clean verdict"; }
echo "PASS: two nodes: every rank's stacks, node 1's over the wire through the agent"
