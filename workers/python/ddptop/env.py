"""env.py — who this rank is and where ddptop listens, from the environment.

The same variables the C worker reads (workers/link/identity.c): torchrun's
RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (Slurm's SLURM_PROCID and
friends when those are absent), and ddptop's: DDPTOP_CTL + DDPTOP_TEL (ipc
endpoints set by `ddptop run`), else DDPTOP_CONNECT=tcp://HOST:PORT (or
ipc://PATH) with the telemetry endpoint beside it, and DDPTOP_KEYS, the
job's CURVE key file, which tcp:// requires. Errors are one line naming the
variable, as the C worker's are.
"""
import os
import stat

KEYS_MAGIC = "ddptop-keys v1"


class EnvError(Exception):
    """A variable is missing or malformed; the message names it."""


def _get(name, env):
    v = env.get(name)
    return v if v else None      # set but empty counts as unset, as in C


def _int(name, env, lo, hi, default):
    v = _get(name, env)
    if v is None:
        return default
    try:
        n = int(v, 10)
    except ValueError:
        n = None
    if n is None or n < lo or n > hi:
        raise EnvError(f'{name}="{v}" is not an integer in [{lo}, {hi}]')
    return n


def identity(env=None):
    """(rank, world, local_rank, local_world): torchrun's names, else Slurm's."""
    env = os.environ if env is None else env
    big = 1 << 20
    if _get("RANK", env) or _get("WORLD_SIZE", env):
        names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    elif _get("SLURM_PROCID", env) or _get("SLURM_NTASKS", env):
        names = ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE")
    else:
        raise EnvError("RANK and WORLD_SIZE are not set (start workers with ddptop run, torchrun or srun)")
    r, w, lr, lw = names
    if not _get(r, env) or not _get(w, env):
        raise EnvError(f"{r if _get(r, env) else w} is set but {w if _get(r, env) else r} is not (set both)")
    world = _int(w, env, 1, big, 1)
    rank = _int(r, env, 0, world - 1, 0)
    local_world = _int(lw, env, 1, world, world)
    local_rank = _int(lr, env, 0, local_world - 1, rank)
    if local_rank >= local_world:
        raise EnvError(f"{lr} is not set and {r}={rank} is not below {local_world} ranks on this node")
    return rank, world, local_rank, local_world


def tel_beside(ctl):
    """ddptop's telemetry endpoint beside its control one: tcp://H:P ->
    tcp://H:P+1, ipc://DIR/ctl -> ipc://DIR/tel, ipc://PATH -> ipc://PATH.tel
    (transport/net/curve.c keys_tel_endpoint)."""
    if ctl.startswith("tcp://"):
        host, _, port = ctl[6:].rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65535:
            return None
        return f"tcp://{host}:{int(port) + 1}"
    if ctl.startswith("ipc://"):
        return ctl[:-4] + "/tel" if ctl.endswith("/ctl") else ctl + ".tel"
    return None


def endpoints(env=None):
    """(ctl, tel, keys_path or None). tcp:// without DDPTOP_KEYS is refused:
    ddptop lets only the job's key holders in there."""
    env = os.environ if env is None else env
    c, t = _get("DDPTOP_CTL", env), _get("DDPTOP_TEL", env)
    conn, keys = _get("DDPTOP_CONNECT", env), _get("DDPTOP_KEYS", env)
    if c or t:
        if not (c and t):
            raise EnvError(f"{'DDPTOP_CTL' if c else 'DDPTOP_TEL'} is set but "
                           f"{'DDPTOP_TEL' if c else 'DDPTOP_CTL'} is not (ddptop run sets both)")
        named = "DDPTOP_CTL"
    elif conn:
        c, t = conn, tel_beside(conn)
        if t is None:
            raise EnvError(f"DDPTOP_CONNECT={conn} is not tcp://HOST:PORT or ipc://PATH")
        named = "DDPTOP_CONNECT"
    else:
        raise EnvError("DDPTOP_CONNECT is not set (start workers with ddptop run, or point them at ddptop: "
                       "DDPTOP_CONNECT=tcp://HOST:PORT DDPTOP_KEYS=FILE)")
    tcp = c.startswith("tcp://") or t.startswith("tcp://")
    if tcp and not keys:
        raise EnvError(f"{named}={c} needs the job's key file: set DDPTOP_KEYS=FILE (ddptop wrote it)")
    return c, t, keys if tcp else None


def read_keys(path):
    """The job's key file: {"server-public": Z85, ..., "client-secret": Z85}.
    Refused when group or others can read it, as the C reader does."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise EnvError(f"DDPTOP_KEYS: cannot open key file {path}: {e.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if mode & 0o077:
            raise EnvError(f"DDPTOP_KEYS: key file {path} is readable by others "
                           f"(mode {stat.S_IMODE(mode):03o}): chmod 600 it")
        text = os.read(fd, 1024).decode("ascii", "replace")
    finally:
        os.close(fd)
    lines = text.splitlines()
    if not lines or lines[0] != KEYS_MAGIC:
        raise EnvError(f"DDPTOP_KEYS: {path} is not a ddptop key file")
    keys = dict(ln.split(None, 1) for ln in lines[1:] if len(ln.split()) == 2)
    want = ("server-public", "client-public", "client-secret")
    if any(len(keys.get(k, "")) != 40 for k in want):
        raise EnvError(f"DDPTOP_KEYS: key file {path} is damaged: expected four Z85 keys")
    return keys
