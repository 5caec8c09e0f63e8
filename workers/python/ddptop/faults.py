"""faults.py — the teaching faults of transport/wire/fault.h, in a torch script.

The same specs as the C trainer's `--fault` (kill:R@S, stall:R@S,
slow:R:MS[ms], skip-set-epoch, unsafe-stop[@S], no-barrier), from
`python -m ddptop --fault SPEC ... SCRIPT.py` (options before the script are
the adapter's, as they are the trainer's before `--` ends them) and from
DDPTOP_FAULTS (specs separated by commas or spaces, for launchers that
cannot put options before the script), and live from ddptop's `f` menu as a
`cmd` with op "fault" and arg = fault_pack(). A live fault replaces one of
the same kind for the same ranks. Each says fault_explain's sentence once,
as a warn log (a fault of every rank by rank 0 alone), when it fires.

Where they act, as in workers/train/trainer.c:
  kill, stall, slow  before a step: at the step's first DataLoader batch
                     (after the optimizer step, for a script without one),
                     once the rank has done S steps;
  skip-set-epoch     DistributedSampler.set_epoch does nothing, so every
                     epoch repeats the order of the epoch it came in;
  unsafe-stop        after step S + rank (a live one naming a rank: that
                     rank after step S), this rank alone stops: its
                     DataLoaders run dry, as a loop that breaks on a local
                     condition (StopTraining without one), without the flags;
  no-barrier         an agreed stop destroys the group without its barrier.
Without faults the hooks cost one test of an empty list.
"""
import os
import re
import signal
import sys
import time

from .state import run

KILL, STALL, SLOW, SKIP_SET_EPOCH, UNSAFE_STOP, NO_BARRIER = 1, 2, 3, 4, 5, 6
NAMES = {KILL: "kill", STALL: "stall", SLOW: "slow", SKIP_SET_EPOCH: "skip-set-epoch",
         UNSAFE_STOP: "unsafe-stop", NO_BARRIER: "no-barrier"}
ALL = -1
SYNTAX = "kill:R@S, stall:R@S, slow:R:MSms, skip-set-epoch, unsafe-stop[@S], no-barrier"


class FaultError(ValueError):
    """A spec that cannot be read, or names a rank that does not exist."""


class Fault:
    def __init__(self, kind, rank=ALL, step=0, ms=0):
        self.kind, self.rank, self.step, self.ms = kind, rank, step, ms

    def __eq__(self, o):
        return isinstance(o, Fault) and vars(self) == vars(o)

    def __repr__(self):
        return f"Fault({NAMES[self.kind]}, rank={self.rank}, step={self.step}, ms={self.ms})"


def parse(spec):
    """One spec as fault.c's fault_parse reads it."""
    m = re.fullmatch(r"(kill|stall):(\d+)@(\d+)", spec)
    if m:
        f = Fault(KILL if m[1] == "kill" else STALL, int(m[2]), int(m[3]))
        if f.rank <= 1 << 20 and f.step <= 1 << 40:
            return f
    m = re.fullmatch(r"slow:(\d+):(\d+)(ms)?", spec)
    if m and int(m[1]) <= 1 << 20 and 1 <= int(m[2]) <= 600000:
        return Fault(SLOW, int(m[1]), ms=int(m[2]))
    if spec == "skip-set-epoch":
        return Fault(SKIP_SET_EPOCH)
    m = re.fullmatch(r"unsafe-stop(@(\d+))?", spec)
    if m and int(m[2] or 0) <= 1 << 40:
        return Fault(UNSAFE_STOP, step=int(m[2] or 0))
    if spec == "no-barrier":
        return Fault(NO_BARRIER)
    raise FaultError(f'--fault: cannot read "{spec}" ({SYNTAX})')


def check_ranks(faults, world):
    for f in faults:
        if f.rank >= world:
            raise FaultError(f"--fault {NAMES[f.kind]}: rank {f.rank} does not exist (ranks 0..{world - 1})")


def from_env(env):
    """DDPTOP_FAULTS's specs."""
    return [parse(s) for s in re.split(r"[,\s]+", env.get("DDPTOP_FAULTS") or "") if s]


def unpack(arg):
    """fault_unpack: kind 4 bits | rank 20 bits | value 39 bits. None if no fault."""
    a = int(arg) & ((1 << 64) - 1)
    kind = a >> 59
    if kind not in NAMES:
        return None
    r, v = (a >> 39) & 0xFFFFF, a & ((1 << 39) - 1)
    return Fault(kind, ALL if r == 0xFFFFF else r, 0 if kind == SLOW else v, v if kind == SLOW else 0)


def drop_spent(faults, env):
    """fault_drop_spent: on a restart (--max-restarts), DDPTOP_FAULTS_SPENT is the
    furthest step an earlier generation reached; the faults of a step at or
    below it fired already and do not fire again."""
    spent = env.get("DDPTOP_FAULTS_SPENT", "")
    if not re.fullmatch(r"-?\d+", spent):
        return faults
    return [f for f in faults if f.kind not in (KILL, STALL, UNSAFE_STOP) or f.step > int(spent)]


def explain(f):
    """fault_explain's sentence (transport/wire/fault.c), word for word."""
    if f.kind == KILL:
        return (f"fault: rank {f.rank} kills itself at step {f.step} - the others will fail in their next "
                f"all-reduce, and ddptop stops the job (torchrun's rule)")
    if f.kind == STALL:
        return (f"fault: rank {f.rank} stops stepping at step {f.step} but keeps its sockets - the others wait in "
                f"their next all-reduce until the timeout")
    if f.kind == SLOW:
        return (f"fault: rank {f.rank} sleeps {f.ms} ms every step - a straggler: every other rank waits for it "
                f"in each all-reduce")
    if f.kind == SKIP_SET_EPOCH:
        return ("fault: set_epoch is skipped - every epoch repeats the first epoch's order (the sampler panel "
                "shows the repeat)")
    if f.kind == UNSAFE_STOP and f.rank != ALL:
        return (f"fault: unsafe stop - rank {f.rank} stops alone at step {f.step} without agreeing, so the others "
                f"wait forever in an all-reduce it never joins")
    if f.kind == UNSAFE_STOP:
        return ("fault: unsafe stop - each rank stops at its own step without agreeing, so the ranks that "
                "go on wait forever in an all-reduce the others never join")
    return ("fault: no barrier before destroy - a rank may tear down its connections while a peer "
            "still uses them")


class Plan:
    def __init__(self):
        self.faults = []        # those that apply to this rank
        self.said = set()       # indexes whose sentence went out
        self.checked = -1       # the step before which kill/stall/slow were last looked at
        self.dry = False        # unsafe-stop fired: this rank's DataLoaders give nothing more

    def add(self, f, rank):
        """f joins the plan if it applies to `rank`; it replaces one of the same kind for the same ranks."""
        if f.rank not in (ALL, rank):
            return
        for i, g in enumerate(self.faults):
            if g.kind == f.kind and g.rank == f.rank:
                self.faults[i] = f
                self.said.discard(i)
                return
        self.faults.append(f)

    def find(self, kind):
        for f in self.faults:
            if f.kind == kind:
                return f
        return None

    def fired(self, f):
        i = self.faults.index(f)
        if i in self.said:
            return
        self.said.add(i)
        r = run()
        at = Fault(f.kind, f.rank, r.step if f.kind in (KILL, STALL, UNSAFE_STOP) else f.step, f.ms)
        text = explain(at)      # the step it fires at (a live fault's is 0: "at the next step")
        sys.stderr.write(f"ddptop-py rank {r.rank}: {text}\n")
        if f.rank != ALL or r.rank == 0:
            r.log("warn", text)

    def before_step(self, r):
        """kill, stall, slow: once per step, before it."""
        if self.checked == r.step:
            return
        self.checked = r.step
        f = self.find(KILL)
        if f and r.step >= f.step:
            self.fired(f)
            r.up.flush_wait(0.2)    # SIGKILL leaves nothing queued a chance: let the sentence go first
            os.kill(os.getpid(), signal.SIGKILL)
        f = self.find(STALL)
        if f and r.step >= f.step:
            self.fired(f)
            r.up.flush()
            # alive, sockets open, no steps: the peers wait in their next
            # all-reduce; the heartbeat thread still reads ddptop's pings,
            # says where this rank is and flushes what waits (the sentence
            # too, when ddptop was behind), so ddptop's ladder (or death) ends it
            while True:
                time.sleep(0.2)
        f = self.find(SLOW)
        if f:
            self.fired(f)
            time.sleep(f.ms / 1e3)

    def skip_set_epoch(self, epoch):
        """True when set_epoch(epoch) is to be forgotten."""
        f = self.find(SKIP_SET_EPOCH)
        if f is None:
            return False
        if epoch > 0:
            self.fired(f)
        return True

    def unsafe_stop(self, r):
        """After a step: True when this rank stops alone now."""
        f = self.find(UNSAFE_STOP)
        # every rank's: after S + rank; one rank's (the f menu's u): it alone, after S
        if f is None or self.dry or r.step < f.step + (0 if f.rank != ALL else r.rank):
            return False
        self.fired(f)
        self.dry = True
        return True

    def no_barrier(self):
        f = self.find(NO_BARRIER)
        if f:
            self.fired(f)
        return f is not None


PLAN = Plan()
