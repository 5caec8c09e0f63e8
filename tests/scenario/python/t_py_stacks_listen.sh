# Every rank's stacks under `ddptop listen`: torch ranks started by hand
# (torchrun's environment, DDPTOP_CONNECT over tcp with the job's CURVE
# keys) are not ddptop's to signal and their logs are not ddptop's to read,
# so it asks them on ctl ("stacks" command, "stack" message,
# docs/PROTOCOL.md). Rank 1 straggles in its own loop while rank 0 waits in
# a barrier: --json's tree after the hang has both ranks' script frames
# (rank 1 alone at straggle under line 15, rank 0 at line 16 in torch's
# barrier, both stuck after the second look) and no "(Python on ...)" or
# "(no stack ...)" leaf; released, both ranks end cleanly and so does ddptop.
. tests/lib.sh
"$PY" -c 'import torch' 2>/dev/null || skip "no torch for $PY"
port=$(free_port 3) keys=$TMP/job.keys out=$TMP/listen.jsonl
export PYTHONPATH=$PWD/workers/python${PYTHONPATH:+:$PYTHONPATH}
rank_env() { echo RANK=$1 WORLD_SIZE=2 LOCAL_RANK=$1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 2)); }

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

timeout 150 "$DDPTOP" listen tcp://127.0.0.1:$port --headless --json --hang-after 3 --keys "$keys" >"$out" 2>&1 &
pl=$!
CLEANUPS+=("kill -9 $pl")
wait_for 10 test -s "$keys" || { cat "$out"; die "listen wrote no key file"; }
pids=()
for r in 0 1; do
    env -u DDPTOP_CTL -u DDPTOP_TEL -u DDPTOP_JOB $(rank_env $r) DDPTOP_CONNECT=tcp://127.0.0.1:$port \
        DDPTOP_KEYS="$keys" timeout 140 "$PY" -m ddptop "$TMP/stuck.py" "$TMP/release" >"$TMP/w$r" 2>&1 &
    pids+=($!)
    CLEANUPS+=("kill -9 $!")
done
wait_for 120 grep -q '"k":"stacks"' "$out" || { tail -5 "$out" "$TMP/w0" "$TMP/w1"; die "no stacks object after the hang"; }
"$PY" - "$(grep '"k":"stacks"' "$out" | head -1)" <<'PYEOF' || die "the merged tree of the listened ranks is wrong"
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
barrier = [n for n in t["nodes"] if n["frame"].endswith(" barrier") and "distributed_c10d" in n["frame"]]
assert barrier and barrier[0]["ranks"] == "0", barrier
assert not any("beat.py" in n["frame"] for n in t["nodes"]), "ddptop's heartbeat thread in the tree"
print("PASS: --json's tree")
PYEOF
touch "$TMP/release"
for r in 0 1; do wait ${pids[$r]}; rw=$?; [ $rw -eq 0 ] || { cat "$TMP/w$r"; tail -5 "$out"; die "rank $r exited $rw"; }; done
wait $pl; rl=$?
[ $rl -eq 0 ] || { tail -5 "$out"; die "ddptop listen exited $rl"; }
grep -q '"verdict":"job done: all 2 ranks ended cleanly"' "$out" || { tail -3 "$out"; die "no clean verdict"; }
echo "PASS: ddptop listen: every rank's stacks over the wire after a hang"
