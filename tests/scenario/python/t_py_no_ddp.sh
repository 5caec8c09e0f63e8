# A script that never wraps its model in DDP while the world is 2 trains two
# separate models (unpatched imagenet on CPU did): one clear warning says so.
# The same script averaging its gradients with dist.all_reduce itself gets
# none: the warning is about models nothing joins, not about DDP.
. tests/lib.sh
. tests/lib_py.sh
cat >"$TMP/alone.py" <<'PYEOF'
import sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
torch.manual_seed(dist.get_rank())
model = torch.nn.Linear(6, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(20):
    x, y = torch.randn(8, 6), torch.randn(8, 2)
    opt.zero_grad()
    (model(x) - y).square().mean().backward()
    if "--average" in sys.argv:
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()
    opt.step()
dist.destroy_process_group()
PYEOF
py_run -n 2 --headless --json -- "$TMP/alone.py" >"$TMP/alone.json" 2>&1 || { tail -5 "$TMP/alone.json"; die "alone: ddptop failed"; }
n=$(grep -c 'each of the 2 ranks trains its own model' "$TMP/alone.json")
[ "$n" -eq 1 ] || { grep '"event"' "$TMP/alone.json" | tail -20; die "want one warning that each rank trains its own model, got $n"; }
py_run -n 2 --headless --json -- "$TMP/alone.py" --average >"$TMP/avg.json" 2>&1 || { tail -5 "$TMP/avg.json"; die "average: ddptop failed"; }
grep -q 'trains its own model' "$TMP/avg.json" && die "warned though the script averages its gradients"
echo "ok: one warning without DDP, none when the script averages its gradients itself"
wait_for 10 no_ranks || die "ranks left running"
