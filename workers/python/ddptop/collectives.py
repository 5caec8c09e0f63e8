"""collectives.py — every collective as a `coll` message, and the one in
flight for the heartbeat.

The user's own `dist.*` calls (barrier, broadcast, all_reduce, ...) are
wrapped in torch.distributed's namespace and in distributed_c10d's (where
torch's own helpers look them up), and so is `dist._broadcast_coalesced`,
DDP's broadcast of the model at construction and of its buffers before
each forward (broadcast_buffers); DDP's gradient buckets come through
ddp_hook.py, which calls begin/end directly. Sequence numbers count calls in
the order this rank makes them, so the same call has the same seq on every
rank and a rank whose seq stays put names itself in a hang; a collective
on another group than the default (dist.new_group), made by its members
only, goes without a number (-1), as torch 2.x's numbering has it. A call made
inside another wrapped call (all_gather_object's all_gather) is not counted
twice. Where torch numbers its collectives (2.x, compat.py), `seq` is
torch's number instead. Bandwidths follow nccl-tests.
"""
import functools
import inspect
import itertools
import sys
import threading

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from . import compat, wire
from .state import run

# function name -> (op on the wire, bus bandwidth factor of (n-1)/n terms)
WRAPPED = {
    "all_reduce": ("allreduce", 2), "broadcast": ("broadcast", 0), "barrier": ("barrier", 0),
    "monitored_barrier": ("barrier", 0), "all_gather": ("allgather", 1),
    "all_gather_into_tensor": ("allgather", 1), "_all_gather_base": ("allgather", 1),
    "reduce_scatter": ("reducescatter", 1), "reduce_scatter_tensor": ("reducescatter", 1),
    "_reduce_scatter_base": ("reducescatter", 1), "reduce": ("reduce", 0), "gather": ("gather", 0),
    "scatter": ("scatter", 0), "all_to_all": ("alltoall", 1), "all_to_all_single": ("alltoall", 1),
    "all_gather_object": ("allgather", 1), "broadcast_object_list": ("broadcast", 0),
    # DDP's own broadcasts: the model's state at construction, and the buffers
    # (BatchNorm's running stats) before every forward with broadcast_buffers
    "_broadcast_coalesced": ("broadcast", 0),
}
# where a function that signature() cannot read (torch's C++ bindings) takes its group
GROUP_AT = {"_broadcast_coalesced": 0}
# made of send/recv, which torch's collective count skips: no torch number (compat.py)
UNNUMBERED = {"monitored_barrier"}
_depth = threading.local()
ORIG = {}      # name -> torch's own function, for the adapter's own collectives
_counter = None     # the C++ hook's counter, shared with its buckets (cxx_hook.py); None: the Run's
_cxx_oldest = None  # the C++ hook's oldest bucket in flight
_other_keys = itertools.count(-1, -1)     # in_flight keys of collectives on another group (seq -1)


def use_counter(next_key, oldest):
    """Number collectives with the C++ hook's counter, and see its buckets in flight."""
    global _counter, _cxx_oldest
    _counter, _cxx_oldest = next_key, oldest


def begin(op, group=None, numbered=True, bucket=-1, count=-1, dtype=""):
    """A collective on `group` starts (a DDP bucket's all-reduce names its
    bucket; count and dtype its payload, -1 and "" unknown): its key for
    end(), and it is in flight from now.
    numbered=False: torch gives it no number of its own."""
    r = run()
    tseq = compat.next_seq(group)
    if tseq is not None and not numbered:
        tseq = -1
    with r.coll_lock:
        r.colls_begun += 1
        if tseq is None and not compat.is_default_group(group):
            # the adapter counts the default group's collectives only: another
            # group's are made by its members alone, and counted in with the
            # rest they would part the ranks' numbers (a false desync)
            key, tseq = next(_other_keys), -1
        elif _counter is None:
            r.coll_seq += 1
            key = r.coll_seq
        else:
            key = _counter()
        r.in_flight[key] = (op, wire.wall_ns(), key if tseq is None else tseq, bucket, count, dtype)
    return key


def announce(key):
    """The script's own collective `key` has begun: a beat that says so,
    with its payload, goes out at once with what waited before it. A rank
    can die inside a collective before any beat or its queued messages
    leave (Gloo aborts the rank whose peer sent more than it expects: a
    shape desync), and then only this tells ddptop what it passed. One small
    frame and a flush a call; DDP's buckets do not come here."""
    r = run()
    with r.coll_lock:
        f = r.in_flight.get(key)
    if f is None or f[2] < 0:
        return
    op, since, seq, bucket, count, dtype = f
    from . import beat      # beat imports this module
    r.send("beat", step=r.step, phase=r.phase, seq=seq, op=op, since=since, where=beat.where(r, sys._getframe(1)),
           bucket=bucket, count=count, dtype=dtype)
    r.up.flush()


def end(key, op, nbytes, bucket=-1, step=None, factor=2, timer=None, defer=False, count=-1, dtype=""):
    """It completed: out of flight, and a coll message (count and dtype: the
    payload's elements and torch's dtype name, -1 and "" unknown). With a CUDA timer
    it is sent once the device time is known (state.py); with defer (a DDP
    bucket's callback, on Gloo's thread) it waits for the script's thread,
    which sends it before its step (send_later) where encoding it is
    cheaper. Returns host seconds taken."""
    r = run()
    done = wire.wall_ns()
    with r.coll_lock:
        _, start, seq, *_ = r.in_flight.pop(key, (op, done, key, bucket))
        if timer is not None or defer:
            r.later_colls.append((timer, (seq, op, nbytes, bucket, r.step if step is None else step, factor, start,
                                          done, count, dtype)))
            return (done - start) / 1e9
    send(r, seq, op, nbytes, bucket, r.step if step is None else step, factor, start, done, count, dtype)
    return (done - start) / 1e9


def send(r, seq, op, nbytes, bucket, step, factor, start, done, count=-1, dtype=""):
    """One coll message (bandwidths from bytes and time, nccl-tests' factors;
    the payload's shape, so ddptop can name ranks that disagree on it)."""
    n = max(r.world, 1)
    dt = done - start
    alg = nbytes / dt if dt > 0 and op != "barrier" else 0.0
    bus = alg * factor * (n - 1) / n if factor else alg
    r.up.send("coll", dict(seq=seq, op=op, bucket=bucket, step=step, bytes=nbytes, enq=start, start=start, done=done,
                           algbw=alg, busbw=bus, count=count, dtype=dtype))


def send_later(r, keep_step=None, host_only=False):
    """The colls that waited (end with defer or a timer), in the order they
    completed, but CUDA-timed ones of keep_step (the step just done: a step
    old they are done, or nearly) and, with host_only (the heartbeat
    thread, which must not wait for the device), every CUDA-timed one. A
    timed one's start is when the host enqueued it, done start + the
    device's time."""
    with r.coll_lock:
        later, r.later_colls = r.later_colls, []
    keep = []
    for timer, c in later:
        step, start = c[4], c[6]
        if timer is None:
            send(r, *c)
        elif host_only or step == keep_step:
            keep.append((timer, c))
        else:
            send(r, *c[:7], start + int(timer.wait_ms() * 1e6), *c[8:])
    if keep:
        with r.coll_lock:
            r.later_colls[:0] = keep


def track(r, work, coll):
    """The script's async collective `work` (coll: its key and end()'s
    fields, the step it was started in) stays in flight until a sweep sees
    it completed. No callback on
    its Future: that would run on Gloo's worker thread and take the GIL,
    and a thread that holds the GIL while the group's last reference goes
    (DDP's Reducer freed by the garbage collector after
    destroy_process_group: ~ProcessGroupGloo joins those threads) would
    wait for it forever (the Join hang, docs/DECISIONS.md)."""
    with r.coll_lock:
        r.async_works.append((work, coll))


def sweep(r):
    """The tracked async collectives that have completed (or failed): out of
    flight, each a coll message of the step it was started in, done when
    this rank saw it (its next wrapped collective, important message or
    beat, or a step's end on the Python step path). Cheap when there are
    none."""
    if not r.async_works:
        return
    with r.coll_lock:
        done = [w for w in r.async_works if w[0].is_completed()]
        if done:
            r.async_works = [w for w in r.async_works if not any(w is d for d in done)]
    for _work, (key, op, nbytes, factor, count, dtype, step) in done:
        end(key, op, nbytes, step=step, factor=factor, count=count, dtype=dtype)


def oldest_in_flight():
    """(seq, op, since_ns, bucket, count, dtype) of the oldest collective in
    flight (bucket -1 outside DDP's buckets; count -1 and dtype "" unknown,
    the C++ hook's buckets), or (-1, "", 0, -1, -1, ""): the wrapped calls',
    and the C++ hook's buckets, by the number they were started with."""
    r = run()
    sweep(r)
    cxx = _cxx_oldest() if _cxx_oldest is not None else None
    with r.coll_lock:
        key = min(r.in_flight) if r.in_flight else None
        if key is not None and (cxx is None or key < cxx[0]):
            op, since, seq, bucket, count, dtype = r.in_flight[key]
            return seq, op, since, bucket, count, dtype
    if cxx is None:
        return -1, "", 0, -1, -1, ""
    _, seq, since, bucket = cxx
    return seq, "allreduce", since, bucket, -1, ""


def dtype_name(dtype):
    """torch.float32 -> "float32": the wire's dtype names."""
    return str(dtype).rpartition(".")[2]


def tensor_shape(args, kwargs):
    """Payload per rank: (bytes, elements, dtype name) of the first tensor
    (or list of tensors: their sums, the first one's dtype) among the
    arguments; (0, 0, "") without one (a barrier, an object list)."""
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.Tensor):
            return a.numel() * a.element_size(), a.numel(), dtype_name(a.dtype)
        if isinstance(a, (list, tuple)) and a and all(isinstance(t, torch.Tensor) for t in a):
            return (sum(t.numel() * t.element_size() for t in a), sum(t.numel() for t in a),
                    dtype_name(a[0].dtype))
    return 0, 0, ""


def _group_at(fn):
    """Where fn takes its `group` among the positional arguments, or None."""
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None
    return names.index("group") if "group" in names else None


def _wrap(name, fn, op, factor):
    at = GROUP_AT.get(name, _group_at(fn))
    numbered = name not in UNNUMBERED

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if run() is None or getattr(_depth, "n", 0) or not dist.is_initialized():
            return fn(*args, **kwargs)
        sweep(run())
        group = kwargs.get("group", args[at] if at is not None and at < len(args) else None)
        nbytes, count, dtype = tensor_shape(args, kwargs)
        seq = begin(op, group, numbered, count=count, dtype=dtype)
        announce(seq)
        _depth.n = 1
        try:
            out = fn(*args, **kwargs)
        except BaseException:
            with run().coll_lock:
                run().in_flight.pop(seq, None)
            raise
        finally:
            _depth.n = 0
        if kwargs.get("async_op") and out is not None and hasattr(out, "is_completed"):
            track(run(), out, (seq, op, nbytes, factor, count, dtype, run().step))
        else:
            end(seq, op, nbytes, factor=factor, count=count, dtype=dtype)
        return out
    wrapper.__ddptop_wrapped__ = True
    return wrapper


def install():
    for name, (op, factor) in WRAPPED.items():
        fn = getattr(c10d, name, None) or getattr(dist, name, None)     # _broadcast_coalesced: dist's only
        if fn is None or getattr(fn, "__ddptop_wrapped__", False):
            continue
        ORIG[name] = fn
        w = _wrap(name, fn, op, factor)
        for mod in (c10d, dist):
            if getattr(mod, name, None) is fn:
                setattr(mod, name, w)


def orig(name):
    """torch's own function: the adapter's collectives are not the script's."""
    return ORIG.get(name) or getattr(c10d, name)
