"""sampler.py — DistributedSampler's shard of each epoch as a `shard`
message, and the forgotten set_epoch as a warning.

The shard is the sampler's own list of indices for this rank (its
__iter__, called once, replayed to the DataLoader), so what ddptop shows is
what the script trains on. An epoch is one training pass over the sampler:
a pass counts once an optimizer step is taken while it is being read
(commit(), from steps.py, before the step is reported). A pass dropped
with no step taken meanwhile is no training pass: a batch peeked with
next(iter(loader)) before set_epoch (the PyTorch tutorial series does)
neither counts as an epoch nor trips the lint. A shuffled sampler whose training pass comes again without
set_epoch since the last one gives the same order as the pass before,
which is the classic bug; the epoch reported is then the pass count, so
ddptop sees two epochs with one order. Once some sampler had set_epoch, it
alone says the epoch: another one that never had it sends no shard and
leaves the epoch alone.
"""
import functools

from torch.utils.data.distributed import DistributedSampler

from .faults import PLAN
from .state import run

SHARD_IDX_MAX = 1 << 20


def _commit_pass(r, s, idx, at_epoch):
    """A pass of sampler s (indices idx, read at s.epoch == at_epoch) that
    trains: the epoch it is, the lint, the shard."""
    passes = getattr(s, "__ddptop_passes__", 0)
    explicit = getattr(s, "__ddptop_set__", False)
    last_epoch = getattr(s, "__ddptop_last_epoch__", None)
    s.__ddptop_passes__ = passes + 1
    s.__ddptop_last_epoch__ = at_epoch
    epoch = at_epoch
    if s.shuffle and passes and last_epoch == at_epoch:
        epoch = max(passes, at_epoch + 1)
        if not getattr(s, "__ddptop_warned__", False):
            s.__ddptop_warned__ = True
            r.log("warn", f"DistributedSampler iterated again at epoch {at_epoch} without "
                          f"set_epoch({at_epoch + 1}): every epoch repeats the same sample order "
                          f"(call sampler.set_epoch(epoch) before each epoch)")
    elif not explicit:
        epoch = passes
    if not explicit and r.epoch_set:
        # another sampler has set_epoch (the training one): this one neither
        # says the epoch nor takes the epoch's place in ddptop's shard view
        return
    r.epoch = epoch
    n = len(s.dataset)
    r.send("shard", epoch=epoch, seed=int(s.seed), shuffle=bool(s.shuffle),
           drop_last=bool(s.drop_last), size=n, num_samples=s.num_samples,
           total_size=s.total_size, padding=0 if s.drop_last else s.total_size - n,
           idx=idx[:SHARD_IDX_MAX])


def commit(r):
    """An optimizer step is taken (steps.py, before it is reported): every
    pass being read now trains."""
    passes, r.sampler_passes = r.sampler_passes, {}
    for s, idx, at_epoch in passes.values():
        _commit_pass(r, s, idx, at_epoch)


def _reading(r, s, idx, at_epoch):
    """The pass's indices, one by one. A pass dropped before its end with
    no step taken (a peeked batch) leaves nothing behind; one read to its
    end stays pending until the next step or the sampler's next pass (a
    DataLoader's workers may read a small shard whole before the first
    step)."""
    token = (s, idx, at_epoch)
    r.sampler_passes[id(s)] = token
    ended = False
    try:
        yield from idx
        ended = True
    finally:
        if not ended and r.sampler_passes.get(id(s)) is token:
            del r.sampler_passes[id(s)]


def install():
    orig_iter, orig_set_epoch = DistributedSampler.__iter__, DistributedSampler.set_epoch

    @functools.wraps(orig_set_epoch)
    def set_epoch(self, epoch):
        if PLAN.faults and run() is not None and PLAN.skip_set_epoch(epoch):
            return None     # the skip-set-epoch fault: the script's call is forgotten
        self.__ddptop_set__ = True
        r = run()
        if r is not None:
            r.epoch_set = True
        return orig_set_epoch(self, epoch)

    @functools.wraps(orig_iter)
    def iterate(self):
        r = run()
        if r is None:
            return orig_iter(self)
        return _reading(r, self, list(orig_iter(self)), self.epoch)

    DistributedSampler.__iter__ = iterate
    DistributedSampler.set_epoch = set_epoch
