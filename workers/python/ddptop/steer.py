"""steer.py — ddptop's commands, acted on at the same step by every rank.

A rank never acts on a command alone (workers/train/trainer.c, "command
agreement"): each rank puts its view of the commands in five numbers, the
process group sums them, and the sums decide. The numbers ride at the end
of the first gradient bucket's all-reduce (ddp_hook.py; the C++ hook,
cxx_hook.py, gets them from arm_next at the end of the step before), so with DDP the
agreement costs no extra collective; without DDP a five-float all-reduce
is started before the optimizer step and waited for after it. Either way
every rank acts right after the same optimizer step (steps.py calls
after_step).

Not every step agrees: copying the first bucket to append the flags costs
about as much as the rest of the hook, so the ranks agree about every
AGREE_S of training. The fifth number is each rank's proposal for the
number of steps to the next agreement (AGREE_S over its step time); the
sum is the same on every rank, so every rank picks the same next step
without a word more. A command waits AGREE_S more at most; the step it is
acted on is still the same everywhere.

  ckpt  rank 0 writes CKPT_DIR/step-NNNNNNNN (ckpt.py), everyone goes on;
  stop  rank 0 writes the final checkpoint of that step (ckpt.final),
        then every rank raises StopTraining (a SystemExit, so the script's
        finally blocks run); runner.py then meets the others at a barrier
        with a timeout, destroys the process group and exits 0;
  pause every rank waits, agreeing every PAUSE_ROUND_S on the flags alone,
        until a round where nobody wants the pause (or a stop, or a ckpt,
        written at once). `pause` n and `resume` n pair up by id.

Inside torch's Join context (uneven inputs) the ranks do not agree at all:
a rank that has joined takes no optimizer steps, so the ranks' step counts
part, and DDP shadows the others' bucket all-reduces with buckets of its
own: flags carried by one rank and not by another paired buckets of
different sizes (Gloo aborted). Commands wait; when the context ends,
together on every rank, the next step agrees.
"""
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
    """DDPTOP_AGREE_STEPS=N (1..64), for measurements only: propose N steps
    between agreements whatever the step's time. Under valgrind a step is ~50x
    slower and every step would agree; bench_torch.py --instructions pins the
    period a run at full speed has."""
    v = os.environ.get("DDPTOP_AGREE_STEPS", "")
    if not v:
        return 0
    if v.isdigit() and 1 <= int(v) <= AGREE_MAX_STEPS:
        return int(v)
    sys.stderr.write(f"ddptop-py: DDPTOP_AGREE_STEPS={v!r} ignored: expected 1..{AGREE_MAX_STEPS}\n")
    return 0


AGREE_STEPS = _agree_steps()


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
        self.agreed = None       # the step's reduced flags (a list, or on CUDA (host tensor, event)), once known
        self.pending = None      # (work, tensor) of the flags-only all-reduce in flight
        self.late = None         # CUDA: the last step's flags, decided on after the next step
        self.next_at = 1         # the step whose backward (or optimizer step) agrees next; 0: not known yet
        self.step_s = 0.0        # this rank's step time (moving average), for its FL_EVERY proposal
        self.step_end = 0.0
        self.arm = None          # the C++ comm hook's arm(flags): its next first bucket carries them (cxx_hook.py)
        self.in_join = 0         # depth of torch Join contexts: no agreement inside one

    def agrees(self, step):
        """Whether step `step` carries the agreement (the same answer on every rank)."""
        return step == self.next_at and not self.in_join

    def join_enter(self):
        """A Join context begins (at the same point on every rank): nothing
        carried from now on, an armed carry taken back."""
        self.in_join += 1
        if self.in_join == 1:
            if self.arm is not None:
                self.arm(None)
            run().log("info", "Join: the ranks' steps may part; ddptop's commands wait for the end of the Join context")

    def join_exit(self):
        """The Join context ended, together on every rank (every rank has
        joined): the next step agrees, whatever each rank's step count."""
        self.in_join = max(0, self.in_join - 1)
        if not self.in_join:
            self.agreed = None
            self.next_at = run().step + 1
            if self.arm is not None:
                self.arm_next()

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

    def flags(self, dtype=torch.float32, device="cpu"):
        """view() as a tensor."""
        return torch.tensor(self.view(), dtype=dtype, device=device)

    def arm_next(self):
        """With the C++ comm hook: when the next step agrees, its first
        bucket carries this rank's view (taken now, at the end of the step
        before, where the Python hook takes it in the backward)."""
        if self.arm is not None and self.agrees(run().step + 1):
            self.arm(self.view())

    def _decide(self, fl):
        """Sums, identical on every rank, into (ckpt, stop, pause); and the
        step of the next agreement: the proposals' mean, rounded down."""
        ckpt = fl[FL_CKPT_PENDING] > 0.5
        if ckpt:
            # ceiling of the proposers' mean id: every rank stores the same acted id
            self.ckpt_acted = max(self.ckpt_acted, int(math.ceil(fl[FL_CKPT_ID] / fl[FL_CKPT_PENDING] - 1e-6)))
        world = max(run().world, 1)
        self.next_at = run().step + max(1, min(AGREE_MAX_STEPS, int(fl[FL_EVERY] / world + 1e-6)))
        return ckpt, fl[FL_STOP] > 0.5, fl[FL_PAUSE] > 0.5

    def carried(self, t):
        """The reduced flags a DDP bucket carried (comm hook callback). On
        CUDA they are copied to the host without waiting for the device."""
        if t.is_cuda:
            host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
            host.copy_(t, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record()
            self.agreed = (host, ev)
        else:
            self.agreed = t.tolist()

    def _reduce_now(self):
        t = self.flags()
        collectives.orig("all_reduce")(t)
        return t.tolist()

    def before_step(self):
        """No DDP bucket carried the flags of an agreeing step: start their own all-reduce."""
        r = run()
        if r.step + 1 != self.next_at or self.in_join:     # not agrees(): most steps, one comparison
            return
        if self.agreed is None and self.pending is None and r.world > 1 and dist.is_initialized():
            t = self.flags()
            self.pending = (collectives.orig("all_reduce")(t, async_op=True), t)

    def after_step(self, now):
        """Act on what the ranks agreed for the step just finished (steps.py
        calls it after every optimizer step, `now` when the step returned;
        most have nothing to read: they leave at the first test, and the
        next step's carry is armed when it agrees, as arm_next does)."""
        if self.step_end:      # this rank's step time (a moving average), for its FL_EVERY proposal
            dt = now - self.step_end
            self.step_s = dt if self.step_s <= 0.0 else 0.8 * self.step_s + 0.2 * dt
        self.step_end = now
        if self.pending is None and self.agreed is None and self.late is None:
            r = run()
            step = r.step
            if step != self.next_at or self.in_join or (r.world > 1 and dist.is_initialized()):
                if self.arm is not None and step + 1 == self.next_at and not self.in_join:
                    self.arm(self.view())
                return
        self._after_step()
        if self.arm is not None:
            self.arm_next()

    def _after_step(self):
        if self.pending is not None:
            work, t = self.pending
            work.wait()
            self.agreed, self.pending = t.tolist(), None
        fl, self.agreed = self.agreed, None
        if isinstance(fl, tuple):
            # CUDA: reading them now would wait for the whole step; every rank
            # decides on them after the next step instead, the same step everywhere
            fl, self.late = self.late, fl
            self.next_at = 0      # known once they are read
            if fl is None:
                return
            fl[1].synchronize()
            fl = fl[0].tolist()
        elif self.late is not None:   # CUDA, the step after an agreement
            fl, self.late = self.late, None
            fl[1].synchronize()
            fl = fl[0].tolist()
        elif fl is None:
            r = run()
            if not self.agrees(r.step) or (r.world > 1 and dist.is_initialized()):
                return            # not an agreeing step
            fl = self.flags().tolist()   # one process, no process group: this rank's view is the job's
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
        r.stop_asked = True
        r.log("info", f"stopping after step {r.step}: {reason}")
        r.set_phase("stopping", reason)
        ck.final(reason)
        if not r.polls_stop:
            raise StopTraining(reason)

    def _pause_loop(self):
        r = run()
        detail = f"paused after step {r.step}"
        r.set_phase("paused", detail)
        while True:
            time.sleep(PAUSE_ROUND_S)
            fl = self._reduce_now() if dist.is_initialized() and r.world > 1 else self.flags().tolist()
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


STEER = Steer()


def install():
    """torch's Join context manager (torch.distributed.algorithms.join),
    seen entering and leaving: no agreement inside it (module docstring)."""
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
