"""ddptop — any torch DDP script watched and steered by ddptop, unchanged.

`python -m ddptop train.py ARGS` (what `ddptop run` starts per rank) hooks
torch.distributed, DDP, DistributedSampler, backward, Optimizer.step and
torch.save, and reports them over ddptop's wire (docs/PROTOCOL.md).
Scripts need not import this; the few calls below are for those who want
more than the hooks see. Each does nothing when the script runs without
ddptop. workers/python/README.md has the whole story.
"""
import sys

__version__ = "0.1.0"


def _run():
    # only `python -m ddptop` imports the state (and with it the sockets):
    # a script run bare gets the no-ops
    state = sys.modules.get(__name__ + ".state")
    return state.run() if state is not None else None


def log(level="info", **kv):
    """A line in ddptop's events: log(loss=0.3, acc=0.91) -> "loss=0.3 acc=0.91"."""
    r = _run()
    if r is not None:
        r.log(level, " ".join(f"{k}={v}" for k, v in kv.items()))


def on_checkpoint(fn):
    """fn(directory) runs on rank 0 while a checkpoint ddptop asked for is
    written, before it is renamed into place: what fn writes there is part
    of it. Returns fn (usable as a decorator)."""
    r = _run()
    if r is not None:
        r.ckpt_callbacks.append(fn)
    return fn


def should_stop():
    """True once the ranks agreed to stop. A script that asks at least once
    stops by itself: no StopTraining is raised from its optimizer step."""
    r = _run()
    if r is None:
        return False
    r.polls_stop = True
    return r.stop_asked
