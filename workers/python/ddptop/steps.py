"""steps.py — one `step` message per optimizer step, and the agreed
commands acted on right after it.

What a step is made of, seen from three hooks: the DataLoader's batches
(samples, and when the forward began), Tensor.backward on a scalar (the
loss; several backwards before one step, as in gradient accumulation of
`loss / K` or a GAN's real and fake halves, report their sum: the
objective whose gradient the step applies; of a closure the step
evaluates several times, as LBFGS does, the first, which step() returns)
and Optimizer.step (its time, the learning rate of the
first parameter group, and the step itself). Optimizer.step is wrapped on
each optimizer class the first time one is built, as torch's own profiler
hook is, so schedulers that wrap an instance's step still see a bound
method; a subclass calling super().step() counts once.
"""
import functools
import threading
import time
import weakref

import torch
from torch.utils.data import dataloader

from . import compat, cxx_hook, lifecycle, sampler, state, wire
from .state import run
from .faults import PLAN
from .steer import STEER, StopTraining

class _Depth(threading.local):
    n = 0       # inside a wrapped step (a subclass's super().step() counts once), per thread


_depth = _Depth()


def _batch_size(b):
    t = type(b)
    if (t is tuple or t is list) and b:      # (inputs, labels): the usual batch, in a few reads
        x = b[0]
        if type(x) is torch.Tensor:
            shape = x.shape
            if shape and shape[0]:
                return shape[0]
    if isinstance(b, torch.Tensor):
        return b.shape[0] if b.dim() else 1
    if isinstance(b, (list, tuple)):
        for x in b:
            n = _batch_size(x)
            if n:
                return n
    if isinstance(b, dict):
        return _batch_size(list(b.values()))
    return 0


def _untrained(r):
    """Batches fetched since the last backward from another DataLoader
    iterator than this batch's were not trained on (a peeked batch, a
    validation pass): samples/s counts training batches only. Batches read
    ahead from one iterator still count, at the step they were read."""
    n, r.unbacked_n = r.unbacked_n, 0
    if not n:
        return
    if r.engine is not None:
        _eng_batch_n(-n)
    else:
        r.batch_samples -= n


def _tell_data(r, it):
    """The first batch's DataLoader: its dataset's class and size, the
    batch size (what ddptop's header shows for the built-in trainer)."""
    r.data_told = True
    ds = getattr(it, "_dataset", None)
    try:
        size = len(ds) if ds is not None else 0
    except TypeError:       # an IterableDataset without __len__
        size = 0
    batch = getattr(getattr(it, "_index_sampler", None), "batch_size", None)
    r.tell(dataset=wire.cut(type(ds).__name__, wire.STR_SHORT) if ds is not None else "",
           dataset_size=size, batch=batch if isinstance(batch, int) else 0)


def _dev_mem(r, now):
    """(used, total) bytes of the rank's GPU as nvidia-smi counts them, at most once a second."""
    if now - r.dev_mem_t >= 1.0:
        r.dev_mem_t = now
        try:
            free, total = torch.cuda.mem_get_info()
            r.dev_mem = (total - free, total)
        except (RuntimeError, AttributeError):
            pass
    return r.dev_mem


def _report(r, opt, opt_s, now):
    """The step's message; now: when the optimizer step returned (monotonic)."""
    r.step += 1
    losses = r.losses
    cuda = bool(losses) and type(losses[0]) is not float
    if cuda:
        loss = torch.stack([x.detach() for x in losses]).float().sum()
    else:
        loss = sum(losses) if losses else float("nan")
    r.samples += r.batch_samples
    lr = float(opt.param_groups[0].get("lr", 0.0)) if opt.param_groups else 0.0
    fwd_s = max(0.0, r.first_bwd_t - r.batch_t) if r.batch_t and r.first_bwd_t else 0.0
    used, total = _dev_mem(r, now) if cuda else (0, 0)
    fields = dict(epoch=r.epoch, step=r.step, loss=float("nan") if cuda else loss, lr=lr, samples=r.samples,
                  step_ms=(now - r.step_t0) * 1e3, fwd_ms=fwd_s * 1e3, bwd_ms=r.bwd_s * 1e3, opt_ms=opt_s * 1e3,
                  comm_ms=r.comm_s * 1e3, exposed_ms=r.exposed_s * 1e3, drops=r.up.drops, dev_mem=used,
                  dev_mem_total=total)
    if cuda:
        r.send_step_later(fields, loss)
    else:
        r.flush_step(collect=False)   # this step's buckets first, as they completed (collected before the step)
        r.up.send("step", fields)
    r.step_t0 = now
    r.losses, r.batch_samples, r.batch_t, r.bwd_s, r.first_bwd_t, r.comm_s, r.exposed_s = [], 0, 0.0, 0.0, 0.0, 0.0, 0.0


def _faults_after_step(r, had_batch):
    """unsafe-stop after the step; kill/stall/slow before the next one when
    no DataLoader batch marks where it begins."""
    if PLAN.unsafe_stop(r):
        reason = f"unsafe stop (fault): rank {r.rank} stops alone, no agreement"
        r.log("info", f"stopping after step {r.step}: {reason}")
        r.set_phase("stopping", reason)
        if not had_batch:
            raise StopTraining(reason, unsafe=True)
    elif not had_batch:
        PLAN.before_step(r)


def _first_step_of(r, opt):
    """An optimizer's first step in this run: it is kept for checkpoints, and
    a script with no process group (world 1) says hello now."""
    opt.__dict__["_ddptop_run"] = r
    first = not r.optimizers
    r.optimizers.append(weakref.ref(opt))
    if not r.hello_sent:
        lifecycle.hello()
        r.set_phase("train")
    if first and r.rank == 0 and r.world > 1 and not r.ddps and not r.colls_begun:
        # nothing joined the ranks' models: not DDP's broadcast, not a gradient all-reduce
        r.log("warn", f"no DistributedDataParallel and no collective before the first optimizer step: "
                      f"each of the {r.world} ranks trains its own model (wrap it in DDP, or average the gradients)")


# The C++ engine's per-step calls (_steps.cpp's eng_*), bound at install
# where the extension loaded; they act on r.engine once cxx_hook.activate ran.
_eng_batch_n = _eng_loss = _eng_bwd_done = _eng_before = _eng_after = None


def _engine_step(r, fn, opt, args, kwargs):
    """The step where the C++ engine keeps the books (cxx_hook.activate):
    the buckets' coll messages and the step message are encoded in C++
    straight into the burst; here only what Python must decide."""
    got = _eng_before()       # the buckets so far (and a new layout, records lost)
    if got is not None:
        cxx_hook.extras(r, got)
    _depth.n = 1
    try:
        out = fn(opt, *args, **kwargs)
    finally:
        _depth.n = 0
    _engine_after(r, opt)
    return out


# Under torch.compile, dynamo traces the step wrapper: each clock, lock or C
# call of the books was a graph break of its own (a compiled Adam step: 13
# or 14 for bare's 2, torch 2.15). Where torch allows (compat.dynamo), the traced wrapper
# keeps its books in two calls around the original step, which dynamo
# traces between them: the step's start (_begin) is an operator in dynamo's
# graph (compat.in_graph: no graph break, run where the graph runs), and
# the rest (_end) a function dynamo does not trace (one graph break, after
# which all the step's updates are done: a checkpoint that `c` asks for
# there saves them). The start cannot go after (opt_ms, the losses a
# closure adds inside the step, a nested step), nor _end into the graph
# (aot_eager and inductor write the step's updates back to the parameters
# after the graph ran: a checkpoint there saved the step before).
# Bare's count + 2: _end's break and one for the wrapper's frame (dynamo
# counts a graph break again in each frame that holds it).
# The traced branch names `torch` (torch.ops): dynamo compiles a frame of
# its own (as it does the wrapper's, called from compiled code) only if it
# names a torch module or holds a tensor, and runs it uncompiled otherwise,
# where the test is False and each callee of the books is compiled alone.
_dynamo_compiling = None      # compat.dynamo(), bound at install
_token = _traced_end = None


def _begin():
    """A traced step begins (run in dynamo's graph): what the wrapper does
    before the original step (the buckets so far); its start and the losses
    so far into r.traced. A step begun while one is open with no loss since
    is inside it (a subclass's super().step(), ZeRO's local optimizer) and
    counts once; with a loss since, the open one raised (a traced step has
    no finally: dynamo does not resume a graph break inside a try block, and
    would run the whole step untraced) and is not reported. (The C++ engine
    keeps no losses in r.losses: there an open step that raised stays open.)"""
    r = state._RUN
    if r is None:
        return
    if r.traced is not None and len(r.losses) == r.traced[0]:
        r.traced_nest += 1
        return
    r.traced_nest = 0
    if r.engine is not None:
        got = _eng_before()
        if got is not None:
            cxx_hook.extras(r, got)
    elif r.collect is not None:
        r.collect(r)
    r.traced = (len(r.losses), time.monotonic())


def _end(opt):
    """After a traced step (dynamo does not trace this): what the wrapper
    does after the original step, on the path (the C++ engine or Python)
    that keeps the books."""
    r = state._RUN
    if r is None or r.traced is None:
        return
    if r.traced_nest:
        r.traced_nest -= 1
        return
    n_losses, t0 = r.traced
    r.traced = None
    if r.engine is not None:
        _engine_after(r, opt)
    else:
        _after(r, opt, n_losses, t0)


def _bind_end(disable):
    global _traced_end
    _traced_end = disable(_end)


def _engine_after(r, opt):
    """The engine's books after the original step (_engine_step's, a traced step's)."""
    if opt.__dict__.get("_ddptop_run") is not r:
        _first_step_of(r, opt)
    faulty = PLAN.faults
    had_batch = bool(r.engine.batch_t) if faulty else True
    if r.sampler_passes:
        sampler.commit(r)
    r.unbacked_n = 0
    r.step, now, ready = _eng_after(opt, r.epoch, r.up.drops)
    if ready:
        r.up.pump()
    STEER.after_step(now)
    if faulty:
        _faults_after_step(r, had_batch)


def _after(r, opt, n_losses, t0):
    """The Python path's books after the original step (the wrapper's, a
    traced step's): n_losses, t0 as the step began."""
    if len(r.losses) > n_losses + 1:
        # a closure evaluated several times inside the step (LBFGS): the
        # step's loss is its first evaluation, the one step() returns
        del r.losses[n_losses + 1:]
    if opt.__dict__.get("_ddptop_run") is not r:     # its first step in this run
        _first_step_of(r, opt)
    had_batch = bool(r.batch_t)
    if r.sampler_passes:
        sampler.commit(r)
    r.unbacked_n = 0
    now = time.monotonic()
    _report(r, opt, now - t0, now)
    if r.engine_next:       # a DDP got the C++ hook during this step: the engine from the next
        cxx_hook.activate(r)
    STEER.after_step(now)
    if PLAN.faults:
        _faults_after_step(r, had_batch)


def _wrap_step(fn):
    @functools.wraps(fn)    # copies torch's "hooked" mark: its profiler hook does not wrap us again
    def step(self, *args, **kwargs):
        r = state._RUN
        if r is None or _depth.n:
            return fn(self, *args, **kwargs)
        if _dynamo_compiling is not None and _dynamo_compiling():
            if _traced_end is None:     # traced without torch.compile (compat.when_dynamo): no books
                return fn(self, *args, **kwargs)
            torch.ops.ddptop.step_begins(_token)
            out = fn(self, *args, **kwargs)
            _traced_end(self)
            return out
        if r.engine is not None:
            return _engine_step(r, fn, self, args, kwargs)
        if r.collect is not None:     # the C++ hook's buckets: the step's times
            r.collect(r)
        _depth.n = 1
        n_losses = len(r.losses)
        t0 = time.monotonic()
        try:
            out = fn(self, *args, **kwargs)
        finally:
            _depth.n = 0
        _after(r, self, n_losses, t0)
        return out
    step.__ddptop_wrapped__ = True
    return step


def install():
    orig_opt_init = torch.optim.Optimizer.__init__

    @functools.wraps(orig_opt_init)
    def opt_init(self, *args, **kwargs):
        orig_opt_init(self, *args, **kwargs)
        cls = type(self)
        if not getattr(cls.step, "__ddptop_wrapped__", False):
            cls.step = _wrap_step(cls.step)

    global _eng_batch_n, _eng_loss, _eng_bwd_done, _eng_before, _eng_after
    global _dynamo_compiling, _token, _traced_end
    _dynamo_compiling = compat.dynamo()
    if _dynamo_compiling is not None:
        _token = compat.in_graph("step_begins", _begin)
        compat.when_dynamo(_bind_end)
    m = cxx_hook.fast()
    if m is not None:
        _eng_batch_n, _eng_loss = m.eng_batch_n, m.eng_loss
        _eng_bwd_done, _eng_before, _eng_after = m.eng_bwd_done, m.eng_before, m.eng_after
    orig_backward = torch.Tensor.backward

    @functools.wraps(orig_backward)
    def backward(self, gradient=None, *args, **kwargs):
        r = state._RUN
        if r is None or gradient is not None:
            return orig_backward(self, gradient, *args, **kwargs)
        # the engine: a CPU scalar's value and times kept in C++ (False: not
        # a CPU scalar, and the Python path below decides)
        if r.engine is not None and _eng_loss(self):
            r.unbacked_n = 0
            try:
                return orig_backward(self, gradient, *args, **kwargs)
            finally:
                _eng_bwd_done()
        if self.numel() != 1:
            return orig_backward(self, gradient, *args, **kwargs)
        r.unbacked_n = 0
        t0 = time.monotonic()
        if not r.first_bwd_t:
            r.first_bwd_t = t0
        # on CUDA the loss stays on the device: no wait for it every step (state.py sends it a step late)
        r.losses.append(self if self.is_cuda else float(self.detach()))
        try:
            return orig_backward(self, gradient, *args, **kwargs)
        finally:
            r.bwd_s += time.monotonic() - t0

    orig_next = dataloader._BaseDataLoaderIter.__next__

    @functools.wraps(orig_next)
    def next_batch(self):
        r = state._RUN
        if r is not None and PLAN.faults:
            if PLAN.dry:        # unsafe-stop: this rank's loops end here
                raise StopIteration
            if not (r.engine.batch_t if r.engine is not None else r.batch_t):
                PLAN.before_step(r)
        b = orig_next(self)
        if r is not None:
            if not r.data_told:
                _tell_data(r, self)
            if r.fetch_it is None or r.fetch_it() is not self:   # a weakref: a peeked iterator's id is soon reused
                _untrained(r)
                r.fetch_it = weakref.ref(self)
            n = _batch_size(b)
            r.unbacked_n += n
            if r.engine is not None:
                _eng_batch_n(n)
            else:
                r.batch_samples += n
                if not r.batch_t:      # the step's first batch: its forward starts now
                    r.batch_t = time.monotonic()
        return b

    torch.optim.Optimizer.__init__ = opt_init
    torch.Tensor.backward = backward
    dataloader._BaseDataLoaderIter.__next__ = next_batch
