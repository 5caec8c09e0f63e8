"""lifecycle.py — the process group's life as phases: init_process_group
(hello, init, rendezvous, then train; and ddptop's own Gloo group for the
commands' agreement: agreement_group) and destroy_process_group
(destroying, destroyed; after a stop from ddptop, a bounded barrier on
ddptop's group first: stop_barrier).

The hello goes out at init_process_group, when the backend and device are
known (a script that fails before that still says hello, from runner.py).
Its model fields stay empty: the model is only known once DDP wraps it,
and ddp_hook.py says it then as a log.

MASTER_PORT: `ddptop run` passes a free port (node 0's --rdzv PORT+2 on
several nodes) and DDPTOP_PY_KEEP_PORT=1, which keeps it. A frontend that
passes a fixed port without it (DDPTOP_CTL set, every rank on this node:
tests/tools/fake_front.py) gets one from rank 0, which takes a free port and
hands it to the others through ddptop's store before the script runs.
"""
import datetime
import functools
import inspect
import os
import platform
import socket
import time
import urllib.parse

import torch
import torch.distributed as dist

from . import compat, spawn, steer
from .state import run

VERSION = "0.1.0"
STOP_BARRIER_S = 10.0
STORE_PROBE_S = 0.005           # between connects while rank 0's store does not listen yet
STORE_PROBE_MAX_S = 30.0        # (or the group's timeout) then torch's own retries: a second late matters little by then
_ORIG = {}


def agree_master_port(r, env=None):
    env = os.environ if env is None else env
    if not env.get("DDPTOP_CTL") or r.world != r.local_world or env.get("DDPTOP_PY_KEEP_PORT") == "1":
        return
    key = f"{env.get('DDPTOP_JOB', 'ddptop')}/py/master_port"
    if r.rank == 0:
        with socket.socket() as s:
            s.bind((env.get("MASTER_ADDR") or "127.0.0.1", 0))
            port = s.getsockname()[1]
        r.up.store_set(key, str(port).encode())
    else:
        port = int(r.up.store_get(key, r.timeout_s or 300))
    env["MASTER_PORT"] = str(port)


def hello(backend=""):
    r = run()
    if r.hello_sent:
        return
    r.hello_sent = True
    if not backend:
        backend = "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    r.backend = str(backend).lower()
    if "nccl" in r.backend and torch.cuda.is_available():
        r.device = f"cuda:{torch.cuda.current_device()}"
    r.important("hello", local_rank=r.local_rank, world=r.world, local_world=r.local_world, pid=os.getpid(),
                host=os.environ.get("DDPTOP_HOST") or socket.gethostname(), device=r.device, backend=r.backend,
                version=f"ddptop-py {VERSION} torch {torch.__version__} python {platform.python_version()}",
                dataset="", model="", params=0, batch=0, max_steps=0, steps_per_epoch=0, dataset_size=0)
    from . import beat
    beat.beat_once(r)     # the first beat at once: a short script may not live a second


def store_addr(args, kwargs, env=None):
    """(host, port) of the TCPStore init_process_group(*args, **kwargs) will
    reach through env:// (the default) or tcp://; None for a store passed in,
    file:// and anything else."""
    env = os.environ if env is None else env
    if kwargs.get("store") is not None or len(args) > 5:
        return None
    url = kwargs.get("init_method", args[1] if len(args) > 1 else None)
    if url in (None, "env://"):
        host, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    elif isinstance(url, str) and url.startswith("tcp://"):
        u = urllib.parse.urlparse(url)
        try:
            host, port = u.hostname, u.port
        except ValueError:
            return None
    else:
        return None
    try:
        return (host, int(port)) if host and port else None
    except ValueError:
        return None


def wait_for_store(addr, limit_s):
    """Until rank 0's TCPStore accepts a connection (at most limit_s):
    torch's store client, refused, sleeps a whole second before it tries
    again (1.13; 2.x similar), so a rank that reaches init_process_group
    before rank 0's store listens would start its first step about a second
    late. A refused connect here costs microseconds; the probe's connection
    is closed at once, which the store takes as a client that left."""
    end = time.monotonic() + limit_s
    while True:
        try:
            with socket.create_connection(addr, timeout=1.0):
                return True
        except socket.gaierror:     # a name that does not resolve: torch's own error says so at once
            return False
        except OSError:
            if time.monotonic() >= end:
                return False
            time.sleep(STORE_PROBE_S)


def follow_identity(init_sig, args, kwargs, env=None):
    """(rank, world) of a process the script started (spawn.py), from its
    init_process_group call (rank=, world_size=), else RANK and WORLD_SIZE
    as torch's env:// reads them."""
    env = os.environ if env is None else env
    bound = kwargs
    if init_sig is not None:
        try:
            bound = init_sig.bind(*args, **kwargs).arguments
        except TypeError:
            pass
    rank, world = bound.get("rank", -1), bound.get("world_size", -1)
    try:
        rank = int(env.get("RANK", 0)) if rank is None or int(rank) < 0 else int(rank)
        world = int(env.get("WORLD_SIZE", 1)) if world is None or int(world) < 0 else int(world)
    except (TypeError, ValueError):
        rank, world = 0, 1
    return rank, world


def install():
    _ORIG.update(init=dist.init_process_group, destroy=dist.destroy_process_group)

    try:
        init_sig = inspect.signature(_ORIG["init"])
    except (TypeError, ValueError):
        init_sig = None
    if init_sig is not None and any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in init_sig.parameters.values()):
        init_sig = None     # bound arguments would not pass back as keywords: the call goes as it came

    @functools.wraps(_ORIG["init"])
    def init_process_group(*args, **kwargs):
        r = run()
        if r is None and spawn.pending():      # a process the script started: a rank from now on
            r = spawn.become_rank(*follow_identity(init_sig, args, kwargs))
        if r is None:
            return _ORIG["init"](*args, **kwargs)
        # the call as torch reads it, whichever arguments came by position; a
        # call torch refuses (a missing backend in 1.13) fails here at once, as
        # it would bare, not after waiting for a store no rank may ever start
        if init_sig is not None:
            try:
                kwargs, args = dict(init_sig.bind(*args, **kwargs).arguments), ()
            except TypeError:
                return _ORIG["init"](*args, **kwargs)
        hello(kwargs.get("backend", args[0] if args else "") or "")
        spawn.announce()
        r.set_phase("init")
        if kwargs.get("timeout") is None and len(args) <= 2 and r.timeout_s:
            kwargs["timeout"] = datetime.timedelta(seconds=r.timeout_s)
        r.set_phase("rendezvous")
        addr = store_addr(args, kwargs) if r.rank != 0 else None
        if addr:
            timeout = kwargs.get("timeout", args[2] if len(args) > 2 else None)
            limit = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else STORE_PROBE_MAX_S
            wait_for_store(addr, min(STORE_PROBE_MAX_S, limit))
        out = _ORIG["init"](*args, **kwargs)
        compat.after_init()
        agreement_group(kwargs.get("timeout", args[2] if len(args) > 2 else None))
        r.set_phase("train")
        return out

    @functools.wraps(_ORIG["destroy"])
    def destroy_process_group(*args, **kwargs):
        r = run()
        if r is None or (args or kwargs.get("group")) or not dist.is_initialized():
            return _ORIG["destroy"](*args, **kwargs)
        if r.stop_asked:        # a finally block after an agreed stop: meet the others first
            stop_barrier(r)
        r.set_phase("destroying")
        steer.STEER.drop_group()
        out = _ORIG["destroy"](*args, **kwargs)
        compat.after_destroy()
        r.set_phase("destroyed")
        return out

    for mod in (dist, dist.distributed_c10d):
        mod.init_process_group = init_process_group
        mod.destroy_process_group = destroy_process_group


# ---- ddptop's own process group, for the agreement (steer.py) ----
_agree_gen = 0      # process groups begun in this process: each agreement group's store prefix


def agreement_group(timeout=None):
    """Right after the script's init_process_group, on every rank: ddptop's
    own Gloo group over every rank for the commands' agreement (steer.py),
    so that no collective of ddptop's can pair with one of the script's.
    Made as torch makes a Gloo group (the default group's store under a
    prefix of ddptop's; GLOO_SOCKET_IFNAME honoured), but not through dist.new_group:
    it takes no number among the script's groups and no store barrier, and
    it costs the default group no collective and no sequence number. Its
    timeout is the script's group's (timeout, else torch's default). A
    world of one needs none. Failing to make it turns ddptop's commands
    off (said once); it never fails the script's init."""
    global _agree_gen
    _agree_gen += 1
    try:
        world, rank = dist.get_world_size(), dist.get_rank()
    except (RuntimeError, ValueError):
        world, rank = 1, 0
    if world <= 1:
        steer.STEER.use_group(None)
        return
    try:
        from torch.distributed.distributed_c10d import _get_default_store
        store = dist.PrefixStore(f"ddptop/agree/{_agree_gen}", _get_default_store())
        if not isinstance(timeout, datetime.timedelta):
            timeout = getattr(dist.distributed_c10d, "default_pg_timeout", datetime.timedelta(minutes=30))
        # torch's own constructor: its devices as torch's groups get them (GLOO_SOCKET_IFNAME, else the host's name)
        pg = dist.ProcessGroupGloo(store, rank, world, timeout)
    except Exception as e:      # noqa: BLE001 -- the script's init succeeded: it goes on, without commands
        steer.STEER.no_group(f"ddptop's agreement group could not be made ({e})")
        return
    steer.STEER.use_group(pg)


def stop_barrier(r, unsafe=False):
    """Once, after a stop: a barrier before the group goes, so no rank tears
    its connections down while a peer still uses them. After an agreed stop
    it is on ddptop's group (steer.Steer.barrier: it cannot meet a
    collective of the script's finally blocks) and waits STOP_BARRIER_S at
    most (a rank that never comes must not hold the others); after the
    unsafe-stop fault's lone stop it is a barrier of the default group, as
    long as a script's own barrier would wait, the group's timeout: the
    shutdown hang the fault shows. None with the no-barrier fault."""
    if r.stop_barrier_done:
        return
    r.stop_barrier_done = True
    from . import faults
    # what ddptop sent before the stop (the f menu's no-barrier, then d) is
    # in effect here even on a rank that last read its commands before it
    # came: the stop was agreed on a peer's reading
    steer.STEER.poll()
    if faults.PLAN.no_barrier():
        return
    if unsafe:
        dist.barrier()      # wrapped: the heartbeat names it in flight
        return
    steer.STEER.barrier(STOP_BARRIER_S)     # ddptop's group: it cannot meet a collective of the script's


def destroy():
    """torch's own destroy, for runner.py's orderly stop."""
    steer.STEER.drop_group()
    compat.after_destroy()
    return (_ORIG.get("destroy") or dist.destroy_process_group)()
