"""sampler.py — DistributedSampler's shard of each epoch as a `shard`
message, and the forgotten set_epoch as a warning.

The shard is the sampler's own list of indices for this rank (its
__iter__, called once, replayed to the DataLoader), so what ddptop shows is
what the script trains on. An epoch is one pass over the sampler: a
shuffled sampler iterated again without set_epoch in between gives the same
order as the pass before, which is the classic bug; the epoch reported is
then the pass count, so ddptop sees two epochs with one order. Once some
sampler had set_epoch, it alone says the epoch: another one that never
had it (a validation set's, shuffle=False) sends no shard and leaves the
epoch alone, so evaluating mid-epoch does not move the steps' epoch nor
put the validation set in the epoch's shard view.
"""
import functools

from torch.utils.data.distributed import DistributedSampler

from .faults import PLAN
from .state import run

SHARD_IDX_MAX = 1 << 20


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
        idx = list(orig_iter(self))
        passes = getattr(self, "__ddptop_passes__", 0)
        explicit = getattr(self, "__ddptop_set__", False)
        last_epoch = getattr(self, "__ddptop_last_epoch__", None)
        self.__ddptop_passes__ = passes + 1
        self.__ddptop_last_epoch__ = self.epoch
        epoch = self.epoch
        if self.shuffle and passes and last_epoch == self.epoch:
            epoch = max(passes, self.epoch + 1)
            if not getattr(self, "__ddptop_warned__", False):
                self.__ddptop_warned__ = True
                r.log("warn", f"DistributedSampler iterated again at epoch {self.epoch} without "
                              f"set_epoch({self.epoch + 1}): every epoch repeats the same sample order "
                              f"(call sampler.set_epoch(epoch) before each epoch)")
        elif not explicit:
            epoch = passes
        if not explicit and r.epoch_set:
            # another sampler has set_epoch (the training one): this one (a
            # validation set's, iterated mid-epoch) neither says the epoch
            # nor takes the epoch's place in ddptop's shard view
            return iter(idx)
        r.epoch = epoch
        n = len(self.dataset)
        r.send("shard", epoch=epoch, seed=int(self.seed), shuffle=bool(self.shuffle),
               drop_last=bool(self.drop_last), size=n, num_samples=self.num_samples,
               total_size=self.total_size, padding=0 if self.drop_last else self.total_size - n,
               idx=idx[:SHARD_IDX_MAX])
        return iter(idx)

    DistributedSampler.__iter__ = iterate
    DistributedSampler.set_epoch = set_epoch
