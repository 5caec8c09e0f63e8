# ddptop never changes how a script fails (issue 30): the failing cases
# (a parameter one rank does not use, without find_unused_parameters; an op
# desync; a shape desync; a barrier on rank 0 only, mid-training and after
# the loop) run bare, each rank started with torchrun's environment by
# hand, and under `ddptop run -n 2 --headless`, with ddptop agreeing every
# step (DDPTOP_AGREE_STEPS=1, the worst case; the unused parameter also at
# ddptop's own pace, and with the Python comm hook where the C++ one runs):
# every rank ends the same way (exit status or signal) with the same
# exception text as bare Python prints it (DDP's "Expected to have finished
# reduction ..." for the unused parameter; Gloo's abort, timeout or closed
# connection where torch has one; torch 2.x's "[rankN]: " before each line:
# t_py2_fails_alike runs this on torch 2.x), addresses aside. When ddptop's
# agreement rode the script's collectives, the unused parameter's rank 1
# aborted in Gloo ("op.preamble.length <= op.nbytes") instead of raising
# DDP's error; when the Python hook raised a failed bucket in its callback,
# rank 0 got "Got the following error when running the callback: ...".
. tests/lib.sh
. tests/lib_py.sh
. tests/scenario/python/diag/lib_diag.sh
cat >"$TMP/cases.py" <<'PYEOF'
import datetime
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

case, mode = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=6))
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 16)
        self.b = nn.Linear(16, 4)
        self.c = nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.a(x))
        return self.b(h) + (0 if case == "unused" and rank == 1 else self.c(h))


model = Net()
if mode == "ddp":
    model = nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(8):
    loss = model(torch.randn(32, 8)).square().mean()
    opt.zero_grad()
    loss.backward()
    if mode == "manual":       # the gradients averaged by hand, as tutorials do without DDP
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
    opt.step()
    if step == 3:
        t = torch.ones(10 if case != "shape" or rank == 0 else 20)
        if case == "op" and rank == 1:
            dist.broadcast(t, 0)
        elif case in ("op", "shape"):
            dist.all_reduce(t)
        elif case == "rank0" and rank == 0:
            dist.barrier()
if case == "rank0end" and rank == 0:
    dist.barrier()
print(f"rank {rank} done", flush=True)
dist.destroy_process_group()
PYEOF

under() {   # under NAME CASE MODE [VAR=VALUE...]: the same through ddptop
    local name=$1 d=$TMP/$1 c=$2 m=$3
    shift 3
    mkdir -p "$d"
    env "$@" timeout 180 "$DDPTOP" run -n 2 --python "$PY" --headless --json --log-dir "$d/logs" \
        "$TMP/cases.py" "$c" "$m" >"$d/out.jsonl" 2>&1
    diag_ends "$name"
}

for cm in unused:ddp op:manual shape:manual rank0:manual rank0end:ddp; do
    c=${cm%:*} m=${cm#*:}
    diag_bare "bare-$c" "$TMP/cases.py" "$c" "$m"
    # the bare runs are what the claims below rest on: each case fails as torch makes it fail
    case $c in
        unused) grep -q "Expected to have finished reduction in the prior iteration" "$TMP/bare-$c/rank-1.log" ||
                    die "bare unused: rank 1 did not raise DDP's error";;
        shape)  grep -q "signal 6" "$TMP/bare-$c/rank-0.how" || die "bare shape: rank 0 did not abort";;
        rank0end) [ "$(cat "$TMP/bare-$c/rank-1.how")" = "exit 0" ] || die "bare rank0end: rank 1 did not end 0";;
    esac
    [ -s "$TMP/bare-$c/rank-0.how" ] && grep -qv "exit 0" "$TMP/bare-$c/rank-0.how" || die "bare $c: rank 0 did not fail"
    under "every-$c" "$c" "$m" DDPTOP_AGREE_STEPS=1
    diag_same "bare-$c" "every-$c"
    # at ddptop's own pace too, for the case whose failure ddptop once changed (the others
    # meet fewer agreements than at every step, the worst case above)
    if [ "$c" = unused ]; then
        under "paced-$c" "$c" "$m"
        diag_same "bare-$c" "paced-$c"
        # where the C++ hook ran above, the Python one too: a bucket's failed all-reduce
        # raised from its Future.then callback reached the script in torch's wrapping
        # ("Got the following error when running the callback: ...") instead of as itself
        case " $(py_hooks) " in
            *" cxx "*) under "pyhook-$c" "$c" "$m" DDPTOP_PY_HOOK=python
                       diag_same "bare-$c" "pyhook-$c";;
        esac
    fi
done
echo "ok: unused parameter, op and shape desync, rank-0-only barriers fail alike bare and under ddptop"
