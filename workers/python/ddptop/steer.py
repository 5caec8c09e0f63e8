"""steer.py — ddptop's commands, acted on at the same step by every rank.

A rank never acts on a command alone (workers/train/trainer.c, "command
agreement"): each rank puts its view of the commands in five numbers, the
ranks sum them, and the sums decide. The sum is an all-reduce on ddptop's
own Gloo process group (lifecycle.agreement_group: made inside the wrapped
init_process_group, over every rank, Gloo even when the script uses NCCL;
its own connections, its own worker thread), never on the script's groups
and never inside the script's gradient buckets: a collective of ddptop's
cannot pair with one of the script's, whatever order the script's come in
(issue 30: on the default group, the flags' all-reduce met the script's
bucket all-reduce once an unused parameter or a desync parted the ranks'
sequences, and Gloo aborted where torch raises DDP's own error). All its
collectives are five float64s, so even two of its own that met out of
order could not abort.

The agreement is a pipeline that costs the script no wait: at an
agreement point (the end of an agreeing optimizer step, steps.py calls
after_step) the rank takes the result of the all-reduce it started at the
point before, acts on it, and starts the next one with its view now. The
one it takes was started a whole period earlier on every rank, so with any
collective of the script's in between (a DDP backward) it is done; a rank
that comes to a point before a peer started the matching all-reduce (a
script without collectives whose ranks drift apart) waits for it there,
named in the beat as an all-reduce of another group (seq -1).

Not every step agrees: the ranks agree about every AGREE_S of training.
The fifth number is each rank's proposal for the number of steps to the
next agreement point (AGREE_S over its step time); the sum is the same on
every rank, so every rank picks the same next point without a word more.
A command waits two periods at most; the step it is acted on is the same
everywhere.

  ckpt  rank 0 writes CKPT_DIR/step-NNNNNNNN (ckpt.py), everyone goes on;
  stop  rank 0 writes the final checkpoint of that step (ckpt.final),
        then every rank raises StopTraining (a SystemExit, so the script's
        finally blocks run); runner.py then meets the others at a barrier
        on ddptop's group with a timeout, destroys the process group and
        exits 0;
  pause every rank waits, agreeing every PAUSE_ROUND_S on the flags alone,
        until a round where nobody wants the pause (or a stop, or a ckpt,
        written at once). `pause` n and `resume` n pair up by id.

A failed agreement (a peer that raised or died closes ddptop's connections
with its own) never raises in place of the script's own failure: the
rank says once that ddptop's commands are off, and goes on into the
script's own collective, which fails as it would without ddptop.

Inside torch's Join context (uneven inputs) the ranks do not agree: a rank
that has joined takes no optimizer steps, so the ranks' step counts part.
Commands wait; when the context ends, together on every rank, the next
step is an agreement point.
"""
import atexit
import ctypes
import datetime
import math
import os
import sys
import time

import torch
import torch.distributed as dist

from . import collectives, faults
from .state import run

FL_CKPT_ID, FL_CKPT_PENDING, FL_STOP, FL_PAUSE, FL_EVERY, FL_COUNT = 0, 1, 2, 3, 4, 5
PAUSE_ROUND_S = 0.02
AGREE_S = 0.05          # training time between two agreements
AGREE_MAX_STEPS = 64    # ... but at least every this many steps


def _agree_steps():
    """DDPTOP_AGREE_STEPS=N (1..64), for measurements and tests only: propose N
    steps between agreements whatever the step's time (1: every step, the
    worst case). Under valgrind a step is ~50x slower and every step would
    agree; bench_torch.py --instructions pins the period a run at full speed
    has."""
    v = os.environ.get("DDPTOP_AGREE_STEPS", "")
    if not v:
        return 0
    if v.isdigit() and 1 <= int(v) <= AGREE_MAX_STEPS:
        return int(v)
    sys.stderr.write(f"ddptop-py: DDPTOP_AGREE_STEPS={v!r} ignored: expected 1..{AGREE_MAX_STEPS}\n")
    return 0


AGREE_STEPS = _agree_steps()
_KEPT = []      # groups let go of with an all-reduce unfinished (drop_group)
DROP_WAIT_S = 2.0   # how long drop_group waits for the last agreement's all-reduce


def _keep(pg):
    """pg is never destroyed, not even as the interpreter exits."""
    _KEPT.append(pg)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(pg))


class StopTraining(SystemExit):
    """Raised from the optimizer step when the ranks agreed to stop (or,
    unsafe, when one rank stops alone: the unsafe-stop fault)."""

    def __init__(self, reason, unsafe=False):
        super().__init__(0)
        self.reason, self.unsafe = reason, unsafe


class Steer:
    def __init__(self):
        self.ckpt_seen = self.ckpt_acted = 0
        self.stop_seen = False
        self.pause_seen = self.resume_seen = 0
        self.group = None        # ddptop's Gloo group (lifecycle.agreement_group); None: one process
        self.pending = None      # (work, tensor): the all-reduce started at the last agreement point
        self.next_at = 1         # the step after which the ranks agree next
        self.off = ""            # why the agreement failed for good: commands are ignored from then on
        self.stopped = False     # an agreed stop: nothing more to agree on
        self.step_s = 0.0        # this rank's step time (moving average), for its FL_EVERY proposal
        self.step_end = 0.0
        self.in_join = 0         # depth of torch Join contexts: no agreement inside one

    def use_group(self, pg):
        """A process group began (lifecycle.py): ddptop's group for it, or
        None (one process); the next step is an agreement point."""
        self.drop_group()
        self.group, self.off, self.stopped = pg, "", False
        self.next_at = run().step + 1

    def drop_group(self):
        """The script's process group goes (destroy_process_group): so does
        ddptop's. One with an all-reduce a peer never joined is kept alive
        for good: its destructor would wait for that all-reduce (up to the
        group's timeout) where the script would not wait at all."""
        pg, pend = self.group, self.pending
        self.group = self.pending = None
        if pg is None or pend is None:
            return
        # every rank started that all-reduce at the same step, so a peer a
        # little behind joins it soon: wait for that (DROP_WAIT_S at most)
        # rather than keep the group with its threads running into the
        # interpreter's exit, where a rank once ended in std::terminate
        end = time.monotonic() + DROP_WAIT_S
        while not pend[0].is_completed() and time.monotonic() < end:
            time.sleep(0.002)
        if not pend[0].is_completed():
            _keep(pg)

    def forget(self):
        """In a process the script forked (a DataLoader worker): the group's
        threads are the parent's, so its destructor must never run here."""
        if self.group is not None:
            _keep(self.group)
        self.group = self.pending = None

    def no_group(self, why):
        """ddptop's group could not be made (lifecycle.py): commands are off."""
        self.drop_group()
        self._off(why)

    def join_enter(self):
        """A Join context begins (at the same point on every rank): no agreement until it ends."""
        self.in_join += 1
        if self.in_join == 1:
            run().log("info", "Join: the ranks' steps may part; ddptop's commands wait for the end of the Join context")

    def join_exit(self):
        """The Join context ended, together on every rank (every rank has
        joined): the next step is an agreement point, whatever each rank's
        step count. What was started before the context is taken there."""
        self.in_join = max(0, self.in_join - 1)
        if not self.in_join:
            self.next_at = run().step + 1

    def _every(self):
        """This rank's proposal: steps to the next agreement."""
        if AGREE_STEPS:
            return float(AGREE_STEPS)
        if self.step_s <= 0.0:
            return 1.0
        return float(max(1, min(AGREE_MAX_STEPS, int(AGREE_S / self.step_s))))

    def poll(self):
        """ddptop's commands into this rank's view."""
        for c in run().up.commands():
            op, cid = c.get("op"), int(c.get("id", 0) or 0)
            if op == "ckpt":
                self.ckpt_seen = max(self.ckpt_seen, cid)
            elif op == "stop":
                self.stop_seen = True
            elif op == "pause":
                self.pause_seen = max(self.pause_seen, cid)
            elif op == "resume":
                self.resume_seen = max(self.resume_seen, cid)
            elif op == "fault":
                f = faults.unpack(c.get("arg", 0) or 0)
                if f is not None:
                    faults.PLAN.add(f, run().rank)

    def front_gone(self):
        """ddptop is gone (front.py, from the heartbeat thread): this rank
        asks for a checkpoint and a stop, agreed as ddptop's would be."""
        self.ckpt_seen = max(self.ckpt_seen, self.ckpt_acted + 1)
        self.stop_seen = True

    def view(self):
        """This rank's view, to be summed over ranks: FL_COUNT floats."""
        self.poll()
        pending = self.ckpt_seen > self.ckpt_acted
        return [float(self.ckpt_seen) if pending else 0.0, 1.0 if pending else 0.0,
                1.0 if self.stop_seen else 0.0, 1.0 if self.pause_seen > self.resume_seen else 0.0, self._every()]

    def _decide(self, fl):
        """Sums, identical on every rank, into (ckpt, stop, pause); and the
        step of the next agreement: the proposals' mean, rounded down."""
        ckpt = fl[FL_CKPT_PENDING] > 0.5
        if ckpt:
            # ceiling of the proposers' mean id: every rank stores the same acted id
            self.ckpt_acted = max(self.ckpt_acted, int(math.ceil(fl[FL_CKPT_ID] / fl[FL_CKPT_PENDING] - 1e-6)))
        world = max(self.group.size() if self.group is not None else 1, 1)
        self.next_at = run().step + max(1, min(AGREE_MAX_STEPS, int(fl[FL_EVERY] / world + 1e-6)))
        return ckpt, fl[FL_STOP] > 0.5, fl[FL_PAUSE] > 0.5

    def _off(self, why):
        if self.off:
            return
        self.off = why
        self.pending = None
        r = run()
        text = (f"ddptop's commands are off from step {r.step}: {why}; "
                f"the script runs on as it would without ddptop")
        sys.stderr.write(f"ddptop-py rank {r.rank}: {text}\n")
        r.log("warn", text)

    def _start(self):
        """This rank's view into ddptop's group, not waited for."""
        t = torch.tensor(self.view(), dtype=torch.float64)
        try:
            self.pending = (self.group.allreduce([t]), t)
        except Exception as e:      # noqa: BLE001 -- whatever Gloo raises, the script's own failure comes first
            self._off(f"the ranks' agreement could not start ({e})")

    def _wait(self, work, t, timeout_s=None):
        """The reduced flags of `work`, or None when it failed (commands
        off, unless timeout_s: then it only says so). A wait that blocks is
        in flight for the beat, as an all-reduce of another group."""
        r = run()
        key = None
        try:
            if not work.is_completed():
                key = collectives.begin("allreduce", self.group)
            if timeout_s is None:
                work.wait()
            else:
                work.wait(timeout=datetime.timedelta(seconds=timeout_s))
            return t.tolist()
        except Exception as e:      # noqa: BLE001 -- never raise in place of the script's own error
            if timeout_s is None:
                self._off(f"the ranks' agreement failed ({e})")
            else:
                r.log("warn", f"stop: the barrier did not complete within {timeout_s:g} s ({e}); destroying anyway")
            return None
        finally:
            if key is not None:
                with r.coll_lock:
                    r.in_flight.pop(key, None)

    def after_step(self, now):
        """At the end of every optimizer step (steps.py; `now`: when it
        returned). Most steps leave at the first test; an agreement point
        takes the last all-reduce's sums, acts on them and starts the next."""
        if self.step_end:      # this rank's step time (a moving average), for its FL_EVERY proposal
            dt = now - self.step_end
            self.step_s = dt if self.step_s <= 0.0 else 0.8 * self.step_s + 0.2 * dt
        self.step_end = now
        r = run()
        if r.step < self.next_at or self.in_join or self.stopped or self.off:
            return
        if self.group is None:
            if r.world > 1 and dist.is_initialized():
                return          # a group of several processes without ddptop's (lifecycle made none): no agreement
            self._act(self.view())      # one process: this rank's view is the job's
            return
        if self.pending is None:
            self.next_at = r.step + 1   # the first point: the same next point on every rank
        else:
            work, t = self.pending
            self.pending = None
            fl = self._wait(work, t)
            if fl is None:
                return
            self._act(fl)
        if not self.stopped and not self.off and self.group is not None:
            self._start()

    def _act(self, fl):
        ckpt, stop, pause = self._decide(fl)
        gone = run().front_gone
        if ckpt:
            from . import ckpt as ck
            ck.agreed("final: ddptop is gone" if gone else "requested", "train")
        if stop:
            self._stop("ddptop is gone" if gone else "stop requested by ddptop")
        if pause:
            self._pause_loop()

    def _stop(self, reason):
        """The agreed stop, on every rank after the same step: the final
        checkpoint (ckpt.final: rank 0 writes it, as the built-in trainer
        does), then StopTraining unless the script polls should_stop()."""
        from . import ckpt as ck
        r = run()
        self.stopped = True
        r.stop_asked = True
        r.log("info", f"stopping after step {r.step}: {reason}")
        r.set_phase("stopping", reason)
        ck.final(reason)
        if not r.polls_stop:
            raise StopTraining(reason)

    def _round(self):
        """One pause round: every rank's view now, summed at once."""
        if self.group is None:
            return self.view()
        t = torch.tensor(self.view(), dtype=torch.float64)
        try:
            work = self.group.allreduce([t])
        except Exception as e:      # noqa: BLE001
            self._off(f"the ranks' agreement could not start ({e})")
            return None
        return self._wait(work, t)

    def _pause_loop(self):
        r = run()
        detail = f"paused after step {r.step}"
        r.set_phase("paused", detail)
        while True:
            time.sleep(PAUSE_ROUND_S)
            fl = self._round()
            if fl is None:          # a peer failed the round: on with the script, as without ddptop
                r.set_phase("train", "resumed: ddptop's agreement failed")
                return
            ckpt, stop, pause = self._decide(fl)
            if ckpt:
                from . import ckpt as ck
                ck.agreed("requested while paused", "paused", detail)
            if stop:
                self._stop("stop requested by ddptop (while paused)")
            if not pause:
                r.set_phase("train", "resumed")
                r.step_t0 = time.monotonic()
                if r.engine is not None:
                    r.engine.reset_t0(r.step_t0)
                return

    def barrier(self, timeout_s):
        """After an agreed stop (lifecycle.stop_barrier): every rank meets on
        ddptop's group, at most timeout_s, before the script's group goes."""
        if self.group is None or self.off:
            return
        t = torch.zeros(FL_COUNT, dtype=torch.float64)
        try:
            work = self.group.allreduce([t])
        except Exception as e:      # noqa: BLE001
            run().log("warn", f"stop: no barrier ({e}); destroying anyway")
            return
        self._wait(work, t, timeout_s)

    def at_exit(self):
        """The interpreter exits: ddptop's group goes first (drop_group),
        before module teardown could run its destructor at a worse time."""
        self.drop_group()


STEER = Steer()


def install():
    """ddptop's group let go of at exit (Steer.at_exit); torch's Join context
    manager (torch.distributed.algorithms.join) seen entering and leaving: no
    agreement inside it (module docstring)."""
    atexit.register(STEER.at_exit)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=STEER.forget)
    try:
        from torch.distributed.algorithms.join import Join
    except ImportError:
        return
    if getattr(Join, "__ddptop_wrapped__", False):
        return
    orig_enter, orig_exit = Join.__enter__, Join.__exit__

    def enter(self):
        out = orig_enter(self)
        if run() is not None:
            STEER.join_enter()
        return out

    def exit_(self, *exc):
        try:
            return orig_exit(self, *exc)
        finally:
            if run() is not None:
                STEER.join_exit()

    Join.__enter__, Join.__exit__ = enter, exit_
    Join.__ddptop_wrapped__ = True
