# The adapter's feature checks (workers/python/ddptop/compat.py) without
# ddptop, in one process (world 1, Gloo): torch's numbering where the
# default group counts from 0 (2.x: seqs 1, 2, ..., -1 on another group;
# 1.13: the adapter counts the default group's, -1 on another; monitored_barrier, made of send/recv, -1 on
# 2.x), Flight Recorder's op names as the wrappers
# name ops, and a CUDA-timed bucket's coll held until the step after its
# own, then sent with the device's time (a stand-in timer: no GPU here).
. tests/lib.sh
"$PY" -c 'import torch' 2>/dev/null || skip "no torch for $PY"
export PYTHONPATH=$PWD/workers/python${PYTHONPATH:+:$PYTHONPATH}
"$PY" - "$TMP" <<'PYEOF' || die "compat units"
import sys
import torch
import torch.distributed as dist
from ddptop import collectives, compat, lifecycle, state

sent = []
class Up:
    drops = 0
    def send(self, kind, fields, t_ns=0): sent.append((kind, dict(fields)))
    def send_important(self, kind, fields): sent.append((kind, dict(fields)))
    def commands(self): return []
    def flush(self): pass
r = state.Run(Up(), 0, 1, 0, 1, 0)
state.set_run(r)
collectives.install()
lifecycle.install()

dist.init_process_group("gloo", init_method=f"file://{sys.argv[1]}/store", rank=0, world_size=1)
pg = dist.distributed_c10d._get_default_group()
counts = getattr(pg, "_get_sequence_number_for_group", None)
numbered = counts is not None and counts() == 0 or False
assert compat.torch_numbering() == numbered, (compat.torch_numbering(), numbered)
sub = dist.new_group([0])
t = torch.ones(4)
dist.all_reduce(t)
dist.barrier()
dist.all_reduce(t, group=sub)
dist.monitored_barrier()     # send/recv inside: torch does not count it
dist.broadcast(t, 0)
seqs = [f["seq"] for k, f in sent if k == "coll"]
# the subgroup's creation may make collectives of its own on the default group: its next number
want = [1, 2, -1, -1, counts()] if numbered else [1, 2, -1, 3, 4]     # 1.13: the default group's only
assert seqs == want, (seqs, want)

assert [compat._op(n) for n in ("gloo:all_reduce", "nccl:_allgather_base", "gloo:broadcast", "nccl:reduce_scatter_tensor_coalesced",
                                "gloo:barrier", "nccl:all_gather_into_tensor_coalesced")] == \
    ["allreduce", "allgather", "broadcast", "reducescatter", "barrier", "allgather"]

class Timer:      # compat.CudaTimer's face, 2.5 ms on the "device"
    waited = 0
    def wait_ms(self):
        Timer.waited += 1
        return 2.5
sent.clear()
r.step = 6
k = collectives.begin("allreduce")
collectives.end(k, "allreduce", 4000, bucket=0, step=7, timer=Timer())
assert sent == [] and Timer.waited == 0, sent
r.flush_step(keep_step=7)       # the step's own buckets wait for the next step
assert sent == [] and Timer.waited == 0, sent
r.flush_step()                  # the next step (or anything important): out
(kind, c), = sent
assert kind == "coll" and c["bucket"] == 0 and c["step"] == 7 and c["done"] - c["start"] == 2500000, c
assert abs(c["algbw"] - 4000 / 2.5e6) < 1e-12 and c["enq"] == c["start"], c
dist.destroy_process_group()
assert not compat.torch_numbering()
print("PASS:", "torch's numbering" if numbered else "the adapter's numbering", seqs)
PYEOF
