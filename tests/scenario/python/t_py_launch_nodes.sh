# A torch script on two nodes (two ddptops on 127.0.0.1: node 0 and the
# agent of node 1), launched the same way on both: each rank gets
# torchrun's environment (GROUP_RANK = its node, global RANK, MASTER_ADDR
# and MASTER_PORT = node 0's --rdzv host and PORT+2), init_process_group
# works unchanged across the nodes, the adapter on node 1 reaches node 0
# through the agent, and both ddptops end clean.
. tests/lib.sh
"$PY" -c 'import torch' 2>/dev/null || skip "no torch for $PY"
port=$(free_port 3)
KEYS=$TMP/job.keys
cat >"$TMP/allsum.py" <<'PYEOF'
import os
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"rank {os.environ['RANK']} group {os.environ['GROUP_RANK']} local {os.environ['LOCAL_RANK']} "
      f"master {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']} sum {t.item():g}", flush=True)
dist.destroy_process_group()
PYEOF
"$DDPTOP" run --headless --json -n 1 --nnodes 2 --node-rank 0 --rdzv 127.0.0.1:$port --keys "$KEYS" \
    --rdzv-timeout 60 --python "$PY" --log-dir "$TMP/l0" "$TMP/allsum.py" >"$TMP/a.out" 2>&1 &
pa=$!
CLEANUPS+=("kill -9 $pa")
wait_for 20 test -s "$KEYS" || { cat "$TMP/a.out"; die "node 0 wrote no key file"; }
"$DDPTOP" run -n 1 --nnodes 2 --node-rank 1 --rdzv 127.0.0.1:$port --keys "$KEYS" --python "$PY" \
    --log-dir "$TMP/l1" "$TMP/allsum.py" >"$TMP/b.out" 2>&1 &
pb=$!
CLEANUPS+=("kill -9 $pb")
wait $pa; ra=$?
wait $pb; rb=$?
echo "--- node 0"; cat "$TMP/a.out"; echo "--- node 1"; cat "$TMP/b.out"
[ $ra -eq 0 ] || die "node 0 exited $ra"
[ $rb -eq 0 ] || die "node 1 exited $rb"
grep -q '"verdict":"job done: all 2 ranks ended cleanly"' "$TMP/a.out" || die "node 0: no clean verdict"
grep -qx "rank 0 group 0 local 0 master 127.0.0.1:$((port + 2)) sum 3" "$TMP/l0/rank-0.log" || { cat "$TMP"/l0/*; die "rank 0"; }
grep -qx "rank 1 group 1 local 0 master 127.0.0.1:$((port + 2)) sum 3" "$TMP/l1/rank-1.log" || { cat "$TMP"/l1/*; die "rank 1"; }
grep -q '"text":"rank 1 hello pid [0-9]* on .* (cpu, gloo)"' "$TMP/a.out" || die "node 0 did not hear rank 1's adapter"
echo "PASS: a torch script across two nodes"
