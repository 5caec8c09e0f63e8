"""ddp_hook.py — DistributedDataParallel watched through a comm hook.

Every DDP built while the adapter runs gets a comm hook that does what
DDP's default does — the bucket times 1/world (the default does it as it
fills the bucket), all-reduced with a sum — and reports each bucket as a
`coll` message (index, bytes, time, bandwidths). The buckets carry nothing
of ddptop's: the all-reduce is the bucket, bit for bit DDP's default (the
commands' agreement has a group of its own, steer.py). Ours is registered
before the first backward after the DDP was built (the wrapper of
torch.autograd.backward, which Tensor.backward calls): nothing of the
adapter's runs in DDP's forward, which torch.compile traces, and a script
that registers its own comm hook before it keeps it (DDP takes one): then
buckets are not reported.

Where the adapter's C++ hook fits this torch (cxx_hook.py: torch 1.13 on
the CPU), DDP gets that one instead, doing the same without the GIL; this
Python hook is the one for torch 2.x, CUDA and the fallback.

The bucket layout is logged once and again whenever DDP rebuilds its
buckets (it does after the first iteration), so the buckets ddptop shows
can be checked against the ones the hook saw.
"""
import functools
import time
import weakref

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from . import collectives, compat, cxx_hook, wire
from .state import run


class HookState:
    def __init__(self, process_group, world):
        self.pg = process_group
        self.world = world
        self.scale = 1.0 / world
        self.known = {}           # index -> (bytes, tensors) of the buckets seen
        self.changed = True       # since the layout was last logged
        self.last_launch = 0.0


def _note_bucket(st, bucket, index, nbytes):
    """The layout, cheaply: a bucket's tensors are counted only when its
    size is new (DDP rebuilds its buckets once, after the first step)."""
    known = st.known.get(index)
    if known is None or known[0] != nbytes:
        st.known[index] = (nbytes, len(bucket.gradients()))
        st.changed = True


def _log_layout(st, last_index, step):
    if not st.changed and len(st.known) == last_index + 1:
        return
    for i in [i for i in st.known if i > last_index]:
        del st.known[i]
    st.changed = False
    parts = ", ".join(f"{i}: {b} B ({n} tensors)" for i, (b, n) in sorted(st.known.items()))
    run().log("info", f"DDP gradient buckets from step {step}: {len(st.known)} buckets; {parts}")


def comm_hook(st, bucket):
    """What DDP calls for every bucket of every backward, under the GIL
    (torch 1.13): kept to the scaling, the all-reduce, a clock read and a
    few attribute reads. The bucket is multiplied by 1/world before the sum,
    as DDP's default does, here on the script's thread where the reducer has
    just written it (a division after the sum, on Gloo's thread, took 39-60
    us a step for the lesson's 407 KB bucket on the 2-core VM, against 36
    here). The coll message is built on the script's thread too, at the
    step's end (collectives.end, defer): the callback only takes the time."""
    r = run()
    buf = bucket.buffer()
    n = buf.numel()
    nbytes = n * buf.element_size()
    dtype = collectives.dtype_name(buf.dtype)
    index, last = bucket.index(), bucket.is_last()
    step = r.step + 1       # the step this backward belongs to
    _note_bucket(st, bucket, index, nbytes)
    seq = collectives.begin("allreduce", st.pg, bucket=index)
    timer = compat.CudaTimer() if buf.is_cuda else None
    if st.world > 1:        # DDP's default: grad times 1/world as it fills the bucket (reducer.cpp), bit for bit
        buf.mul_(st.scale)
    if last:
        _log_layout(st, index, step)
        st.last_launch = time.monotonic()
    if timer is not None:
        timer.start()
    # the process group's own call: c10d.all_reduce's checks cost more than the call
    fut = st.pg.allreduce([buf]).get_future()

    def done(f):
        try:
            out = f.value()[0]
        except Exception as e:      # the bucket's all-reduce failed: DDP raises it from backward
            failed(e)
            raise
        if timer is not None:
            timer.stop()
        r.comm_s += collectives.end(seq, "allreduce", nbytes, index, step, timer=timer, defer=True, count=n,
                                       dtype=dtype)
        if last:
            r.exposed_s += time.monotonic() - st.last_launch
        return out

    return fut.then(compat.callback(done))


# A Python exception raised in a Future.then callback reaches the script
# wrapped: torch makes it "Got the following error when running the
# callback: <the error>\n\nAt:\n  <our frames>", and so would a bucket's
# failed all-reduce (a peer gone, a timeout) that bare DDP raises as Gloo's
# own error. A Python hook cannot fail its future otherwise (set_exception
# only sets a value that Python unwraps; DDP would read it as the bucket),
# so the callback keeps the original and the wrapper of torch.autograd.backward
# (install; Tensor.backward calls it) raises that one in place of the
# wrapped one: the script sees what it sees bare.
WRAPPED = "Got the following error when running the callback: "
_failed = []        # the last few bucket errors the callbacks saw


def failed(e):
    """A bucket's all-reduce raised e in the callback."""
    _failed.append(e)
    del _failed[:-8]


def original(e):
    """The bucket's own error that e wraps (a RuntimeError out of backward
    whose text is torch's wrapping of our callback's), else None."""
    text = str(e)
    if not text.startswith(WRAPPED):
        return None
    name, _, msg = text[len(WRAPPED):].partition(": ")   # "[module.]Type: message\n\nAt: ..."
    for orig in reversed(_failed):
        if name.rsplit(".", 1)[-1] == type(orig).__name__ and msg.startswith(str(orig)):
            return orig.with_traceback(None)
    return None


def _ensure_hook(ddp):
    """Ours, unless the script registered its own by then (DDP takes one
    hook)."""
    if getattr(ddp, "__ddptop_user_hook__", False):
        run().log("info", "DDP: the script registered its own comm hook; buckets are not reported")
        return
    if cxx_hook.register(ddp):      # the same work in C++, without the GIL, where it fits this torch
        return
    pg = ddp.process_group
    _ORIG["register_comm_hook"](ddp, HookState(pg, pg.size()), comm_hook)


_ORIG = {}
_pending = []       # weakrefs to the DDPs built since the last backward, without our hook yet


def _register_pending():
    """Before a backward (the first since these DDPs were built): our hook
    goes on each, the script's own taking precedence. Not in DDP's forward:
    torch.compile(DDP(model)) traces the forward, and anything of ours in it
    (the registration, a log line) was a graph break of its own; backward is
    never traced (and is a graph break bare too)."""
    while _pending:
        ddp = _pending.pop()()
        if ddp is not None and run() is not None:
            _ensure_hook(ddp)


def install():
    cxx_hook.load()
    _ORIG.update(init=DDP.__init__, register_comm_hook=DDP.register_comm_hook,
                 builtin=DDP._register_builtin_comm_hook)

    @functools.wraps(_ORIG["init"])
    def init(self, *args, **kwargs):
        _ORIG["init"](self, *args, **kwargs)
        r = run()
        if r is None:
            return
        r.ddps.append(weakref.ref(self))
        _pending.append(weakref.ref(self))
        params = sum(p.numel() for p in self.module.parameters())
        r.log("info", f"DDP: {type(self.module).__name__}, {params} parameters, "
                      f"bucket cap {self.bucket_bytes_cap} B")
        r.tell(model=wire.cut(type(self.module).__name__, wire.STR_MED), params=params)

    def user_hook(name):
        @functools.wraps(_ORIG[name])
        def register(self, *args, **kwargs):
            self.__ddptop_user_hook__ = True
            return _ORIG[name](self, *args, **kwargs)
        return register

    orig_backward = torch.autograd.backward

    @functools.wraps(orig_backward)
    def backward(*args, **kwargs):
        if _pending:
            _register_pending()
        try:
            return orig_backward(*args, **kwargs)
        except RuntimeError as e:
            orig = original(e)      # a bucket's failed all-reduce, as bare DDP raises it
            if orig is None:
                raise
            raise orig from None

    torch.autograd.backward = backward
    DDP.__init__ = init
    DDP.register_comm_hook = user_hook("register_comm_hook")
    DDP._register_builtin_comm_hook = user_hook("builtin")
