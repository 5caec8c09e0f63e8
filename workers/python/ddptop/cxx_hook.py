"""cxx_hook.py — DDP's comm hook in C++ (_hook.cpp), where it fits this torch.

torch 1.13 calls a Python comm hook through the GIL on the script's thread
and its callback through the GIL on Gloo's thread, for every bucket: a
two-line Python hook alone cost +171 us of CPU a step over DDP's default
(docs/BENCHMARKS.md). The extension does the Python hook's work
(ddp_hook.py) without the GIL: the multiply by 1/world, the all-reduce (the
bucket alone: the commands' agreement has a group of its own, steer.py),
each bucket's record in a lock-free ring, the buckets in flight for the
beat, the layout.

It is built for one torch (mk/pyhook.mk records torch.__version__): it is
used only when it imports, its version is this torch's, and the model's
buckets are on the CPU (CUDA buckets are timed by CUDA events, in Python).
Otherwise, or with DDPTOP_PY_HOOK=python (a debugging switch), DDP gets the
Python hook. Which one runs is said once in the rank's log.

collect() is the one call a step (before the optimizer step, steps.py; in
any flush before a message; by the beat): the finished buckets' coll
messages go out from there, on the script's thread as the Python hook's do
(sending them there rather than queueing them for the step's end took
about 5 us off the step's pieces, docs/BENCHMARKS.md).

Where the hook runs, the extension also takes the rank's telemetry burst
(attach: _hook.Burst, filled by uplink.py) and each step's bookkeeping and
messages (register: _hook.Steps, r.engine, which steps.py's wrappers feed
and which encodes the buckets' coll messages and the step message with
transport/wire's codec straight into the burst, _steps.cpp): the ~1000
Python bytecodes a step cost the script's thread become a few calls.
"""
import os
import sys

from . import collectives, compat
from .state import run

_MOD = None         # the extension, once load() accepted it
_WHY = ""           # why not, when not
_SAID = False


def load(env=None):
    """The extension if it fits this torch, else None (why(): the reason).
    Its collective counter becomes the adapter's (collectives.py)."""
    global _MOD, _WHY
    env = os.environ if env is None else env
    _MOD = None
    if (env.get("DDPTOP_PY_HOOK") or "").lower() == "python":
        _WHY = "DDPTOP_PY_HOOK=python"
        return None
    import torch
    try:        # before the import: one built for another torch would load a second libtorch
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "_hook.torch-version")) as f:
            built_for = f.read().strip()
    except OSError:
        _WHY = "the C++ hook is not built (make builds it where libtorch-dev and pybind11-dev are)"
        return None
    if built_for != torch.__version__:
        _WHY = f"the C++ hook was built for torch {built_for}, not {torch.__version__}"
        return None
    try:
        from . import _hook
    except ImportError as e:
        _WHY = f"the C++ hook does not load ({e})"
        return None
    if _hook.TORCH_VERSION != torch.__version__:
        _WHY = f"the C++ hook was built for torch {_hook.TORCH_VERSION}, not {torch.__version__}"
        return None
    _MOD = _hook
    collectives.use_counter(_hook.next_key, _hook.oldest)
    return _MOD


def why():
    return _WHY


def fast():
    """The extension's eng_* calls (steps.py binds them once), or None."""
    return _MOD


def attach(up):
    """The rank's telemetry burst in C++, where the extension loaded."""
    if _MOD is not None:
        up.use_burst(_MOD.Burst(up.rank))


def _say(text):
    """Once a process: in ddptop's events and in the rank's own log."""
    global _SAID
    if not _SAID:
        _SAID = True
        r = run()
        sys.stderr.write(f"ddptop-py rank {r.rank}: {text}\n")
        r.log("info", text)


def register(ddp):
    """The C++ hook on ddp when it fits (True), else False: the caller
    registers the Python one. Says once which one runs."""
    if _MOD is None or any(p.is_cuda for p in ddp.module.parameters()):
        _say(f"DDP comm hook: Python ({_WHY or 'CUDA buckets are timed in Python'})")
        return False
    pg = ddp.process_group
    numbering = 0
    if compat.torch_numbering():
        numbering = 1 if compat.next_seq(pg) != -1 else 2
    _MOD.register(ddp.reducer, pg, numbering)
    r = run()
    # the step engine takes over at the end of the step in progress (this
    # forward may be inside it: LBFGS's closure), so that no step is kept by
    # halves in Python and in C++ (activate)
    r.engine_next = getattr(r.up, "cburst", None) is not None and r.engine is None
    if r.engine is None:
        r.collect = collect
    _say(f"DDP comm hook: C++ (ddptop._hook for torch {_MOD.TORCH_VERSION})")
    return True


def activate(r):
    """At a step's end (steps.py), once a DDP got the C++ hook: the step
    engine keeps the books from the next step on."""
    r.engine_next = False
    r.engine = _MOD.Steps(r.up.cburst, r.rank, r.world, r.step, r.samples, r.step_t0)
    r.engine.activate()         # the module's eng_* calls (steps.py) act on it
    r.collect = collect_engine
    # the rank's log only (not an event): which path kept the books is a debugging question
    sys.stderr.write(f"ddptop-py rank {r.rank}: steps kept in C++ from step {r.step + 1}\n")


def extras(r, got):
    """What a step engine's drain brought besides its buckets: (a new layout
    or None, records lost)."""
    layout, dropped = got
    if layout is not None:
        parts = ", ".join(f"{i}: {b} B ({n} tensors)" for i, (b, n) in enumerate(layout))
        r.log("info", f"DDP gradient buckets from step {r.step + 1}: {len(layout)} buckets; {parts}")
    if dropped:
        r.log("warn", f"DDP comm hook: {dropped} bucket records lost (the ring was full)")


def collect_engine(r):
    """collect() where the step engine runs: the buckets done so far go into
    the burst as coll messages (the beat, a flush; the step wrapper drains
    them itself with Steps.before)."""
    r.engine.drain()
    r.up.pump()


def collect(r):
    """The buckets done since the last call as coll messages (queued
    behind any that wait, else sent now, on the script's thread before its
    optimizer step, or by the beat), their time into the step's comm and
    exposed time; a new layout to the log."""
    recs, layout, dropped = _MOD.drain()
    if recs:
        step = r.step + 1       # the step whose backward they belong to
        comm = exposed = 0.0
        out = []
        for _key, seq, bucket, nbytes, start, done, exp_ns, err, count, dtype in recs:
            if err:             # DDP raises the all-reduce's error in the script
                continue
            out.append((seq, "allreduce", nbytes, bucket, step, 2, start, done, count, dtype))
            comm += (done - start) / 1e9
            if exp_ns >= 0:
                exposed += exp_ns / 1e9
        r.comm_s += comm
        r.exposed_s += exposed
        if r.later_colls:       # colls that wait go first (collectives.send_later)
            with r.coll_lock:
                r.later_colls += [(None, c) for c in out]
        else:
            for c in out:
                collectives.send(r, *c)
    if layout is not None:
        parts = ", ".join(f"{i}: {b} B ({n} tensors)" for i, (b, n) in enumerate(layout))
        r.log("info", f"DDP gradient buckets from step {r.step + 1}: {len(layout)} buckets; {parts}")
    if dropped:
        r.log("warn", f"DDP comm hook: {dropped} bucket records lost (the ring was full)")
