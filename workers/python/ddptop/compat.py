"""compat.py — what a torch offers beyond Debian's 1.13, found by feature
checks (never by version number), so one adapter runs on 1.13 and on 2.x.

  seq   torch 2.x numbers the collectives of a process group from 1 (its
        Flight Recorder's collective_seq_id, the SeqNum of its watchdog's
        messages); 1.13 starts the default group's count at a random
        number. Where the default group counts from 0 right after
        init_process_group, `coll` and `beat` carry torch's number for the
        default group's collectives (so ddptop's desync lint and hang
        verdict speak the numbers torch's own tools print); a collective on
        another group (a count of its own) goes without one (-1). Elsewhere
        the adapter counts the collectives it sees (collectives.py).
  fr    Flight Recorder (2.x records Gloo's collectives itself, 2000 of them
        unless TORCH_FR_BUFFER_SIZE says otherwise): when the main thread
        has sat for FR_AFTER_S in torch.distributed's or DDP's own code
        outside any collective the adapter wrapped (one on the group itself,
        a collective torch makes from C++), the beat names the newest
        collective torch has not retired, if it is the group's latest. A
        dump of a full recorder costs about 0.1 s (1 MB of JSON): it runs
        only then, once per collective.
  exit  A Python callback on a torch Future runs on the thread that
        completes it (Gloo's), which takes the GIL to run it and again to
        drop it. If that comes after the interpreter began to exit, CPython
        ends the thread with pthread_exit, whose unwinding through torch's
        C++ frames is std::terminate: "terminate called without an active
        exception", SIGABRT after a clean run (torch 1.13: 2 to 3 runs in
        100 of examples/ddp_forgot_set_epoch.py on the 2-core VM, the old
        adapter too). The adapter's callbacks are counted (callback) and
        the rank waits for them before it exits (quiesce). Only the
        Python comm hook has one: the script's async collectives get none
        (collectives.track), since one waiting for the GIL deadlocks any
        thread that holds it while the group's last reference goes
        (~ProcessGroupGloo joins Gloo's threads).
  cuda  On a CUDA bucket, CUDA events time the all-reduce on the device
        (NCCL's futures complete at enqueue, so host times say nothing);
        memory comes from torch.cuda.mem_get_info (steps.py).
  dynamo
        torch.compile (2.x) traces what it calls, the Optimizer.step
        wrapper included: where torch has torch.compiler.is_dynamo_compiling
        and torch.library.custom_op (2.4), the wrapper asks it and keeps its
        books in an operator of dynamo's graph before the step and a
        function dynamo does not trace after it (steps.py), made when the
        script first calls torch.compile (when_dynamo).
"""
import functools
import json
import os
import threading
import time

import torch
import torch.distributed.distributed_c10d as c10d

FR_AFTER_S = 2.0
_TORCH_DIRS = tuple(os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), d) + os.sep
                    for d in ("distributed", os.path.join("nn", "parallel")))

_seq_pg = None      # the default group, when its count is torch's numbering


def after_init():
    """Right after init_process_group: use torch's numbering if the default
    group counts from 0 (2.x)."""
    global _seq_pg
    _seq_pg = None
    try:
        pg = c10d._get_default_group()
        if pg._get_sequence_number_for_group() == 0:
            _seq_pg = pg
    except (AttributeError, RuntimeError, ValueError):
        pass


def after_destroy():
    global _seq_pg
    _seq_pg = None


def is_default_group(group):
    """Whether `group` (None: the default) is the default process group."""
    if group is None:
        return True
    try:
        return group is c10d._get_default_group()
    except (AttributeError, RuntimeError, ValueError):
        return True


def torch_numbering():
    return _seq_pg is not None


def next_seq(group=None):
    """torch's number of the next collective on `group` (None: the default
    group), -1 for another group's, or None: the adapter counts."""
    pg = _seq_pg
    if pg is None:
        return None
    if group is not None and group is not pg:
        return -1
    return pg._get_sequence_number_for_group() + 1


_cb_lock = threading.Lock()
_cb = {"pending": 0, "last": 0.0}
CALLBACK_GRACE_S = 0.02     # after the last returned: its thread drops the callable (the GIL again)


def callback(fn):
    """fn as a torch Future callback, counted from now until it returns."""
    with _cb_lock:
        _cb["pending"] += 1

    def counted(f):
        try:
            return fn(f)
        finally:
            with _cb_lock:
                _cb["pending"] -= 1
                _cb["last"] = time.monotonic()
    return counted


def quiesce(limit_s=2.0):
    """Before the rank exits: until no counted callback is pending (one
    whose work never completes is given up on after limit_s) and
    CALLBACK_GRACE_S since the last returned, the GIL free meanwhile."""
    end = time.monotonic() + limit_s
    while True:
        with _cb_lock:
            pending, last = _cb["pending"], _cb["last"]
        now = time.monotonic()
        if now >= end:
            return False
        if pending == 0 and now >= last + CALLBACK_GRACE_S:
            return True
        time.sleep(0.002 if pending else last + CALLBACK_GRACE_S - now)


def dynamo():
    """torch.compiler.is_dynamo_compiling (False, and True where dynamo
    traces it) where torch also lets a call of ours into dynamo's graph
    (torch.library.custom_op): torch 2.4 and later; else None."""
    f = getattr(getattr(torch, "compiler", None), "is_dynamo_compiling", None)
    return f if callable(f) and callable(getattr(torch.library, "custom_op", None)) else None


_in_graph = {}


def in_graph(name, fn):
    """fn() as the operator torch.ops.ddptop.<name>(token), which dynamo
    puts into its graph (no graph break) and which runs where the graph
    runs, in its order; made once a process, only where dynamo(). Returns
    the token, a tensor the operator mutates: one with no output and no
    effect would be dropped from the graph (aot_eager, inductor)."""
    if name not in _in_graph:
        def impl(token: torch.Tensor) -> None:
            fn()

        op = torch.library.custom_op(f"ddptop::{name}", impl, mutates_args=("token",))
        op.register_fake(lambda token: None)
        _in_graph[name] = torch.empty(0)
    return _in_graph[name]


_dynamo_wait = []    # what when_dynamo() keeps until torch.compile is first called


def when_dynamo(fn):
    """fn(torch._dynamo.disable) once dynamo is loaded: now if it is, else
    when the script first calls torch.compile (which loads it, before
    dynamo traces anything). Not at install: importing torch._dynamo costs
    seconds (3.4 s after torch on the loaded 2-core VM), which a script
    that never loads it would pay before its first step (torch 2.15's DDP
    and optimizers load it themselves by their first step). Only where
    dynamo()."""
    import sys
    if "torch._dynamo" in sys.modules:
        fn(sys.modules["torch._dynamo"].disable)
        return
    if not _dynamo_wait:
        orig = torch.compile

        @functools.wraps(orig)
        def compile(*args, **kwargs):
            if _dynamo_wait:
                import torch._dynamo as dynamo
                for f in _dynamo_wait:
                    f(dynamo.disable)
                _dynamo_wait.clear()
            return orig(*args, **kwargs)
        torch.compile = compile
    _dynamo_wait.append(fn)


def _op(profiling_name):
    """"gloo:all_reduce" -> "allreduce", as the wrappers name ops."""
    name = profiling_name.rpartition(":")[2].replace("_", "")
    for suffix in ("base", "coalesced", "intotensor", "tensor"):
        if name.endswith(suffix) and name != suffix:
            name = name[:-len(suffix)]
    return {"allgatherinto": "allgather"}.get(name, name)


class FlightRecorder:
    """The beat's view of Flight Recorder: (seq, op, since_ns) of the
    collective the main thread waits in, when the wrappers do not see it."""

    def __init__(self):
        dump = getattr(torch._C._distributed_c10d, "_dump_fr_trace_json", None)
        self.dump = dump
        self.where_key, self.where_t = None, 0.0
        self.asked_seq, self.found = None, None

    def in_flight(self, frame, now=None):
        pg = _seq_pg
        if self.dump is None or pg is None:
            return None
        now = time.monotonic() if now is None else now
        f = frame
        if f is None or not f.f_code.co_filename.startswith(_TORCH_DIRS):
            self.where_key = None
            return None
        key = (f.f_code.co_filename, f.f_lineno, id(f))
        if key != self.where_key:
            self.where_key, self.where_t = key, now
        if now - self.where_t < FR_AFTER_S:
            return None
        seq = pg._get_sequence_number_for_group()
        if seq != self.asked_seq:     # once per collective: a full dump is not cheap
            self.asked_seq, self.found = seq, self._newest_active(seq)
        return self.found

    def _newest_active(self, seq):
        try:
            entries = json.loads(self.dump(includeCollectives=True, onlyActive=True)).get("entries", [])
        except Exception:       # a recorder that is off, or another shape: no answer
            return None
        for e in reversed(entries):
            if e.get("collective_seq_id") == seq and not e.get("retired", True) and \
                    str(e.get("pg_id", 0)) == "0" and not e.get("is_p2p", False):
                return seq, _op(str(e.get("profiling_name", ""))), int(e.get("time_created_ns", 0))
        return None


class CudaTimer:
    """Device time of one collective on the current stream: start() before
    it is issued, stop() where its result is used (a Future's callback,
    which runs ordered after the collective); wait_ms() waits for it."""

    def __init__(self):
        self.a = torch.cuda.Event(enable_timing=True)
        self.b = torch.cuda.Event(enable_timing=True)

    def start(self):
        self.a.record()

    def stop(self):
        self.b.record()

    def wait_ms(self):
        self.b.synchronize()
        return self.a.elapsed_time(self.b)
