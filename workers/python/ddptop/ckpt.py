"""ckpt.py — checkpoints ddptop asked for, and the script's own torch.save.

`ckpt` (agreed by steer.py): rank 0 writes CKPT_DIR/step-NNNNNNNN/ with
model.safetensors (the DDP module's state_dict under PyTorch's own names,
"module." stripped) and trainer.safetensors (optimizer state as
"state.<param>.<buffer>" tensors, the rest as metadata); a script with
several DDP modules or optimizers gets model-1, trainer-1, ... for the
others (_write_files). The same scheme as
workers/ckpt/ckpt.c: built in a temp dir, files and dir fsynced, renamed
into place, then `latest` (a symlink) swapped by rename. Callbacks from
ddptop.on_checkpoint(fn) run with the temp dir before the rename, so what
they write is part of the same atomic checkpoint (their own torch.save
there is no checkpoint of the script's). Where (where()): DDPTOP_CKPT_DIR
when it is set; else, once rank 0's script saved to a file, that file's
directory, as DIR/ddptop-step-NNNNNNNN/ and DIR/ddptop-latest, names no
script file is replaced by (a plain file or a symlink where the step
directory goes fails the checkpoint; a `ddptop-latest` that is no symlink
is left alone, with a warning); before that ./checkpoints. Rank 0 alone
decides and writes, so every rank's checkpoint is that one directory. A
failure is reported, not fatal. Files get the user's umask (the
safetensors package creates them 0600).

Sharded optimizers: ZeroRedundancyOptimizer holds each rank's shard of the
state, and its state_dict() raises until consolidate_state_dict(to=0) ran on
every rank. prepare() runs on every rank at the agreed step, before rank 0
writes (the ranks are at the same point of the script there, so this
collective of the optimizer's meets its peers). An optimizer whose state
still cannot be taken leaves its trainer file out; the model files are
written and the event and a warning say what was left out.

torch.save from the script to a file is reported as phase checkpoint +
`ckpt`, and its directory kept for where(); into a buffer (Lightning's and
ZeRO's internal saves) it is no checkpoint and is not reported.
"""
import functools
import json
import os
import shutil
import time

import torch

from . import safetensors_io, wire
from .state import run

_ORIG_SAVE = torch.save


def _umask():
    m = os.umask(0o022)
    os.umask(m)
    return m


_FILE_MODE = 0o666 & ~_umask()


def _fsync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _optimizer_tensors(opt, names):
    """Optimizer state as tensors "state.<param>.<buffer>", the rest as metadata."""
    sd = opt.state_dict()
    params = [p for g in opt.param_groups for p in g["params"]]
    index_name = {i: names.get(id(p), f"param{i}") for i, p in enumerate(params)}
    tensors, scalars = {}, {}
    for i, st in sd["state"].items():
        for buf, v in st.items():
            key = f"state.{index_name[i]}.{buf}"
            if isinstance(v, torch.Tensor):
                tensors[key] = v
            else:
                scalars[key] = v
    groups = [{k: (v if k != "params" else [index_name[i] for i in v]) for k, v in g.items()}
              for g in sd["param_groups"]]
    return tensors, {"optimizer": type(opt).__name__, "param_groups": json.dumps(groups, default=str),
                     "scalars": json.dumps(scalars, default=str)}


def numbered(name, i):
    """model.safetensors, model-1.safetensors, ...: the i-th of its kind."""
    return f"{name}.safetensors" if i == 0 else f"{name}-{i}.safetensors"


def _write_files(d, r):
    """Every live DDP module (in the order they were built: a GAN's
    generator and discriminator) and every optimizer that stepped (in the
    order they first stepped), one file each: model.safetensors and
    trainer.safetensors for the first, model-1 / trainer-1 for the next."""
    ddps = [m for m in (w() for w in r.ddps) if m is not None]
    names = {id(p): n for m in ddps for n, p in m.module.named_parameters()}
    models = []
    for i, ddp in enumerate(ddps):
        model = {k[len("module."):] if k.startswith("module.") else k: v for k, v in ddp.state_dict().items()}
        if model:
            safetensors_io.save(model, os.path.join(d, numbered("model", i)), {"format": "pt"})
            models.append([numbered("model", i), type(ddp.module).__name__])
    opts = [o for o in (w() for w in r.optimizers) if o is not None] or [None]
    left_out = []
    for i, opt in enumerate(opts):
        try:
            opt_t, meta = _optimizer_tensors(opt, names) if opt is not None else ({}, {})
        except Exception as e:      # a sharded optimizer not consolidated, a custom one: the models still count
            left_out.append(f"{numbered('trainer', i)} ({type(opt).__name__}'s state: {type(e).__name__}: {e})")
            continue
        meta.update(format="ddptop-py-trainer-1", step=r.step, epoch=r.epoch, samples=r.samples_done(),
                    world_size=r.world, torch=torch.__version__, models=json.dumps(models))
        safetensors_io.save(opt_t, os.path.join(d, numbered("trainer", i)), meta)
    for fn in r.ckpt_callbacks:
        fn(d)
    total = 0
    for f in os.listdir(d):
        p = os.path.join(d, f)
        if os.path.isfile(p):
            os.chmod(p, _FILE_MODE)
            total += os.path.getsize(p)
            _fsync(p)
    return total, left_out


def prepare():
    """Every rank, at the agreed step, before rank 0 writes: sharded
    optimizers gather their state on rank 0 (module docstring). Never
    raises: what fails shows in rank 0's write as state left out."""
    r = run()
    for opt in [o for o in (w() for w in r.optimizers) if o is not None]:
        consolidate = getattr(opt, "consolidate_state_dict", None)
        if callable(consolidate):
            try:
                consolidate(to=0)
            except Exception as e:
                r.log("warn", f"checkpoint: {type(opt).__name__}.consolidate_state_dict(to=0) failed on rank "
                              f"{r.rank}: {type(e).__name__}: {e}")


def agreed(why, after, after_detail=""):
    """The checkpoint the ranks agreed on, called on every rank at the same
    step: prepare() everywhere, then rank 0 writes (write()). Rank 0 keeps
    its step as the run's last checkpoint ddptop asked for."""
    run().ckpt_agreed = run().step
    prepare()
    d = write(why, after, after_detail)
    if d:
        run().ckpt_step = run().step
    return d


def final(reason):
    """The agreed stop's final checkpoint, on every rank, unless this step's
    was just written (a `c` with the `d`, ddptop gone: both asked at once)."""
    r = run()
    if r.ckpt_agreed == r.step:     # the same answer on every rank
        return
    agreed(f"final: {reason}", "stopping", reason)


def where(r):
    """(directory, name prefix) of ddptop's checkpoints on rank 0 (module
    docstring): DDPTOP_CKPT_DIR as set; else the directory the script last
    saved a file into, with names of ddptop's own; else ./checkpoints."""
    if os.environ.get("DDPTOP_CKPT_DIR"):
        return os.environ["DDPTOP_CKPT_DIR"], ""
    if r.save_dir:
        return r.save_dir, "ddptop-"
    return r.ckpt_dir, ""


def write(why, after, after_detail=""):
    """Rank 0 writes a checkpoint of this step; every rank then reports
    phase `after`. Returns the directory or None."""
    r = run()
    if r.rank != 0:
        return None
    r.set_phase("checkpoint", why)
    t0 = time.monotonic()
    top, prefix = where(r)
    final = os.path.join(top, f"{prefix}step-{r.step:08d}")
    tmp = os.path.join(top, f".{prefix}tmp-step-{r.step:08d}-{os.getpid()}")
    latest = os.path.join(top, f"{prefix}latest")
    err, nbytes, left_out = "", 0, []
    r.ckpt_writing = True
    try:
        if os.path.lexists(final) and (os.path.islink(final) or not os.path.isdir(final)):
            raise FileExistsError(f"{os.path.abspath(final)} exists and is no checkpoint directory: not replaced")
        os.makedirs(tmp, exist_ok=True)
        nbytes, left_out = _write_files(tmp, r)
        _fsync(tmp)
        if os.path.isdir(final):      # the same step again: the new one wins
            os.rename(final, tmp + ".old")
        os.rename(tmp, final)
        _fsync(top)
        if os.path.lexists(latest) and not os.path.islink(latest):
            left_out.append(f"{prefix}latest (a file of that name that is no symlink is there: left as it is)")
        else:
            link = os.path.join(top, f".{prefix}latest-{os.getpid()}")
            if os.path.lexists(link):
                os.unlink(link)
            os.symlink(os.path.basename(final), link)
            os.rename(link, latest)
            _fsync(top)
        shutil.rmtree(tmp + ".old", ignore_errors=True)
    except Exception as e:      # reported, not fatal: earlier checkpoints are untouched
        err = f"{type(e).__name__}: {e}"
    finally:
        r.ckpt_writing = False
    r.important("ckpt", step=r.step, epoch=r.epoch, ok=not err, path=wire.cut(os.path.abspath(final), wire.STR_LONG),
                bytes=nbytes, ms=(time.monotonic() - t0) * 1e3, error=wire.cut(err, wire.STR_MED))
    if err:
        r.log("error", f"checkpoint failed: {err}")
    elif left_out:
        r.log("warn", f"checkpoint step {r.step} at {os.path.abspath(final)}: the model written, left out: "
                      + "; ".join(left_out))
    r.set_phase(after, after_detail)
    return None if err else final


def install():
    @functools.wraps(_ORIG_SAVE)
    def save(obj, f, *args, **kwargs):
        r = run()
        path = os.fspath(f) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", "")
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if r is None or not isinstance(path, str) or not path or r.ckpt_writing:
            # no run, or into a buffer (io.BytesIO: Lightning's, ZeRO's own exchanges), or an
            # on_checkpoint callback's file inside ddptop's checkpoint: not a checkpoint of the script's
            return _ORIG_SAVE(obj, f, *args, **kwargs)
        before = r.phase
        r.set_phase("checkpoint", f"torch.save {path}")
        t0 = time.monotonic()
        err = ""
        try:
            return _ORIG_SAVE(obj, f, *args, **kwargs)
        except Exception as e:
            err = f"{type(e).__name__}: {e}"
            raise
        finally:
            size = os.path.getsize(path) if path and os.path.isfile(str(path)) else 0
            if not err and os.path.isfile(path):    # where ddptop's own checkpoints go from now on (where())
                r.save_dir = os.path.dirname(os.path.abspath(path))
            r.important("ckpt", step=r.step, epoch=r.epoch, ok=not err,
                        path=wire.cut(os.path.abspath(path) if path else "", wire.STR_LONG), bytes=size,
                        ms=(time.monotonic() - t0) * 1e3, error=wire.cut(err, wire.STR_MED))
            r.set_phase(before)

    torch.save = save
