# Uneven inputs that do not hang: rank 1's loop is shorter (20 steps, rank 0
# has 30), it destroys its process group and leaves; over Gloo rank 0's next
# all-reduce then fails at once ("Connection closed by peer"), so there is
# no hang for the hang view to explain. ddptop says why in a warn event and
# in the verdict (rank 1 had finished after step 20 while rank 0 trained on),
# first, rank 0's "Connection closed by peer" after it as a consequence;
# ddptop exits 1 and no rank is left. (The uneven epochs lint and a rank
# alone in a collective: t_py_lints.sh, t_py_hang_shutdown.sh.)
. tests/lib.sh
. tests/lib_py.sh
cat >"$TMP/short.py" <<'PYEOF'
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
rank = dist.get_rank()
model = DDP(torch.nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(30 if rank == 0 else 20):    # the bug: each rank its own number of batches
    loss = model(torch.randn(4, 8)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
dist.destroy_process_group()
PYEOF
out=$TMP/out.jsonl
(cd "$TMP" && DDPTOP_WORKER=$PY_WORKER timeout 120 "$DDPTOP" run -n 2 --headless --json --timeout 30 -- "$TMP/short.py") \
    >"$out" 2>"$TMP/err"
rc=$?
[ $rc -eq 1 ] || { tail -20 "$out" "$TMP/err"; die "ddptop exited $rc, want 1"; }
grep -E '^\{"k":"event".*"level":"warn".*rank 1 had finished after step 20 while rank 0 trained on' "$out" | head -1 |
    grep -q "Join" || { grep '"k":"event"' "$out" | tail -20; die "no warn event naming the ranks' different steps"; }
"$PY" - "$(grep '"k":"summary"' "$out")" <<'PYEOF' || die "summary verdict wrong"
import json, sys
s = json.loads(sys.argv[1])
v = s["verdict"]
print(v)
# the cause first; rank 0's broken link after it, said as a consequence
assert v.startswith("job failed: rank 1 had finished after step 20 while rank 0 trained on: its next collective at "
                    "short.py:"), v
assert ("had no partner; the ranks ran different numbers of steps (uneven inputs, or no_sync() windows that differ "
        "by rank: Join); ") in v, v
assert 'rank 0 ended: exit 1 after "Connection closed by peer" (a consequence)' in v, v
assert s["cause"]["kind"] == "uneven", s["cause"]
PYEOF
wait_for 10 no_ranks || die "ranks left: $(our_ranks)"
echo "the uneven ending named"
