"""state.py — what the hooks share about this rank's run.

One Run per process, made by runner.py before the script starts; hooks
read `run()` and do nothing when it is None (the package imported without
`python -m ddptop`, or a process the script forked: a DataLoader worker). Counters written by
the script's thread, read by the heartbeat thread: plain attributes, whose
reads and writes are atomic under the GIL.
"""
import os
import threading
import time

from . import wire

_RUN = None


def run():
    return _RUN


def set_run(r):
    global _RUN
    _RUN = r


def _forked_child():
    # a process the script forks (a DataLoader worker, multiprocessing's fork,
    # os.fork) is not the rank: its hooks do nothing, it sends nothing (the
    # rank's sockets and locks are the parent's), and runner.py leaves its end alone
    set_run(None)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked_child)


class Run:
    def __init__(self, up, rank, world, local_rank, local_world, timeout_s):
        self.up = up
        self.rank, self.world = rank, world
        self.local_rank, self.local_world = local_rank, local_world
        self.timeout_s = timeout_s      # ddptop's --timeout: collectives' default
        self.phase = "init"
        self.hello_sent = False
        self.backend, self.device = "", "cpu"
        self.step = 0                   # optimizer steps done
        self.epoch = 0
        self.epoch_set = False          # a DistributedSampler had set_epoch: only such a one says the epoch
        self.samples = 0
        # the step in progress
        self.step_t0 = time.monotonic()
        self.batch_t = 0.0              # when the DataLoader gave the last batch
        self.batch_samples = 0
        self.sampler_passes = {}        # id(sampler) -> the pass being read, until a step commits it (sampler.py)
        self.fetch_it = None            # weakref to the DataLoader iterator of the last batch
        self.unbacked_n = 0             # samples fetched since the last backward (not trained on yet)
        self.losses = []
        self.bwd_s = 0.0
        self.first_bwd_t = 0.0
        self.comm_s = 0.0
        self.exposed_s = 0.0
        # collectives: seq -> (op, enqueued wall ns)
        self.coll_seq = 0
        self.in_flight = {}
        self.coll_lock = threading.Lock()
        self.main_thread = threading.main_thread().ident
        self.lingering = None           # the non-daemon threads the finished script's process waits for (linger.py)
        self.ddps = []                  # weakrefs to the DistributedDataParallels built, in order
        self.colls_begun = 0            # collectives begun on any group (collectives.begin)
        self.optimizers = []            # weakrefs, in the order they stepped
        self.ckpt_callbacks = []
        self.ckpt_dir = "checkpoints"       # ddptop's checkpoints when DDPTOP_CKPT_DIR is unset and the script saved nothing
        self.save_dir = ""              # the directory of the script's last torch.save to a file (ckpt.where)
        self.ckpt_writing = False       # ddptop writes a checkpoint: a callback's torch.save is part of it
        self.refused = ""               # why this rank refuses to run as launched (spawn.Refused): its bye says so, exit 2
        self.stop_asked = False         # agreed: the explicit API's should_stop()
        self.polls_stop = False         # the script asks should_stop(): it stops by itself
        self.stop_barrier_done = False  # lifecycle.stop_barrier ran
        self.front_gone = False         # ddptop is gone (front.py): stop with a final checkpoint, exit 1
        self.ckpt_step = -1             # the step of the last checkpoint ddptop asked for (rank 0)
        self.ckpt_agreed = -1           # the step of the last checkpoint the ranks agreed on (every rank)
        self.deferred = None            # CUDA: (fields, t_ns, host loss, event) of the last step
        self.later_colls = []           # (CudaTimer or None, coll fields) of colls not sent yet (collectives.end)
        self.async_works = []           # (Work, coll fields) of the script's async collectives in flight (collectives.track)
        self.collect = None             # the C++ comm hook's drain into later_colls (cxx_hook.collect), if it runs
        self.traced = None              # the open step that dynamo traces: (len(losses), start) (steps._begin)
        self.traced_nest = 0            # steps begun inside it
        self.engine = None              # the C++ step engine (_hook.Steps, cxx_hook.activate), if it runs
        self.engine_next = False        # it takes over at the end of the step in progress
        self.dev_mem, self.dev_mem_t = (0, 0), -1.0
        self.info = {}                  # the job's fields learned after hello (tell)
        self.data_told = False          # the first batch's dataset told

    def samples_done(self):
        """Samples this rank has trained on (the step engine's count where it runs)."""
        return self.engine.samples if self.engine is not None else self.samples

    def tell(self, **fields):
        """hello's job fields learned later (a script's model at DDP, its
        data at the first batch) as an `info` message; each one carries all
        this rank knows, so the last is the whole picture."""
        new = {k: v for k, v in fields.items() if v and self.info.get(k) != v}
        if new:
            self.info.update(new)
            self.send("info", **self.info)

    # ---- messages ----
    def send(self, kind, **fields):
        self.up.send(kind, fields)

    def important(self, kind, **fields):
        self.flush_step()
        self.up.send_important(kind, fields)

    def bye(self, status):
        """The rank's last message: its exit status, and a refusal's reason
        (ddptop ends the job with it, exit 2)."""
        extra = {"refused": wire.cut(self.refused, wire.STR_LONG)} if self.refused else {}
        self.important("bye", status=status, step=self.step, **extra)

    def send_step_later(self, fields, loss):
        """CUDA: the step's message once its loss (a device tensor) is on the
        host, copied without waiting; sent at the next step, or before
        anything important, so the order of messages holds."""
        import torch
        self.flush_step(keep_step=fields["step"])
        host = torch.empty((), dtype=torch.float32, pin_memory=True)
        host.copy_(loss, non_blocking=True)
        ev = torch.cuda.Event()
        ev.record()
        self.deferred = (fields, wire.wall_ns(), host, ev)

    def flush_step(self, keep_step=None, collect=True):
        """The colls that waited and the deferred step out (CUDA-timed colls
        of keep_step stay: waiting for them would wait for the device);
        collect=False: the C++ hook's buckets were just collected."""
        if collect and self.collect is not None:
            self.collect(self)
        if self.async_works:
            from . import collectives
            collectives.sweep(self)
        if self.later_colls:
            from . import collectives
            collectives.send_later(self, keep_step)
        d, self.deferred = self.deferred, None
        if d is not None:
            fields, t_ns, host, ev = d
            ev.synchronize()      # a step old: done, or nearly
            fields["loss"] = float(host)
            self.up.send("step", fields, t_ns)

    def set_phase(self, phase, detail=""):
        self.phase = phase
        self.important("phase", phase=phase, detail=wire.cut(detail, wire.STR_LONG))

    def log(self, level, text):
        """A line for the user; long text goes as several logs of whole lines."""
        for chunk in _chunks(str(text), wire.STR_LONG - 1):
            self.important("log", level=level, text=chunk)


def _chunks(text, size):
    """text in pieces of at most `size` UTF-8 bytes, cut at newlines where
    possible (a traceback stays readable line by line)."""
    out, cur = [], ""
    for line in text.rstrip("\n").split("\n"):
        while len(line.encode()) > size:
            head = wire.cut(line, size + 1)
            if cur:
                out.append(cur)
                cur = ""
            out.append(head)
            line = line[len(head):]
        if cur and len((cur + "\n" + line).encode()) > size:
            out.append(cur)
            cur = line
        else:
            cur = cur + "\n" + line if cur else line
    if cur:
        out.append(cur)
    return out
