"""runner.py — `python -m ddptop [--timeout S] SCRIPT.py ARGS` or
`python -m ddptop [--timeout S] -m MODULE ARGS`: connect to ddptop, install
the hooks, run the script as __main__ (runpy: the script sees its own
sys.argv and sys.path[0], and the interpreter's sitecustomize, if any, has
run as usual), and turn how it ended into ddptop's terms:

  returned / sys.exit(n)   bye with that status, exit with it;
  StopTraining (a stop)    barrier with a timeout, destroy the process
                           group if the script did not, bye 0, exit 0;
  any other exception      phase error, the traceback as log lines, one a
                           frame (the whole one on stderr), bye 1, exit 1;
  spawn.Refused            (-n N with a script that starts its own ranks,
                           here or in a process it started) phase error
                           with its line, bye 2 with the reason as
                           `refused` (ddptop ends the job with it, exit 2),
                           exit 2.

A script whose children became ranks (spawn.py: mp.spawn and friends) ends
without a word as a rank: the launched process was their launcher.

--timeout S is what `ddptop run` gives every worker: the default timeout of
the script's process group. With DDPTOP_CHECK_ARGS set (ddptop checks a
worker's options before launching anything) it only checks that the
script exists and prints the device line ddptop reads (with `spawns
WHAT:LINE` for a script that starts its own ranks).
"""
import importlib.util
import os
import runpy
import sys
import traceback
import zipfile

from . import env as envmod
from . import faults

USAGE = "usage: python -m ddptop [--timeout S] [--fault SPEC]... (SCRIPT.py | -m MODULE) [ARGS...]"


def parse(argv):
    """(timeout_s, module or None, script or None, script argv, faults)."""
    timeout_s = 0.0
    found = []
    i = 0
    while i < len(argv) and argv[i] in ("--timeout", "--fault"):
        if i + 1 >= len(argv):
            raise envmod.EnvError(f"{argv[i]}: missing value")
        if argv[i] == "--fault":
            try:
                found.append(faults.parse(argv[i + 1]))
            except faults.FaultError as e:
                raise envmod.EnvError(str(e)) from None
            i += 2
            continue
        try:
            timeout_s = float(argv[i + 1])
        except ValueError:
            raise envmod.EnvError(f'--timeout: expected seconds, got "{argv[i + 1]}"') from None
        i += 2
    if i < len(argv) and argv[i] == "--":
        i += 1
    if i >= len(argv):
        raise envmod.EnvError(USAGE)
    if argv[i] == "-m":
        if i + 1 >= len(argv):
            raise envmod.EnvError("-m: missing module name")
        return timeout_s, argv[i + 1], None, argv[i + 1:], found
    return timeout_s, None, argv[i], argv[i:], found


class NoTorch(Exception):
    """The check's interpreter has no torch: exit NO_TORCH, so ddptop can
    name interpreters that have it (tui/cmd/run_target.c)."""


NO_TORCH = 3


def _nvidia_gpus():
    """Whether the NVIDIA driver shows a GPU (CUDA_VISIBLE_DEVICES may hide them all)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    try:
        return bool(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return os.path.exists("/dev/nvidia0")


def check(module, script, env, spawns=None):
    """DDPTOP_CHECK_ARGS: the script is there, and (unless the script runs
    bare, DDPTOP_NO_INJECT) what the adapter needs; the device line for
    ddptop. find_spec finds a package without importing it (torch takes a
    second or more to import)."""
    if script is not None and os.path.isdir(script):
        if not os.path.isfile(os.path.join(script, "__main__.py")):
            raise envmod.EnvError(f"{script}: a directory without __main__.py (python runs only such a one)")
    elif script is not None and not os.path.isfile(script):
        raise envmod.EnvError(f"{script}: no such script")
    if module is not None:
        sys.path.insert(0, os.getcwd())      # where run_script looks for it
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):    # a parent package that is not there
            found = False
        if not found:
            raise envmod.EnvError(f"-m {module}: no such module")
    if not env.get("DDPTOP_NO_INJECT"):
        # torch is all the adapter asks of the interpreter (ZeroMQ is ddptop's
        # libzmq, msgpack its own codec where the packages are not there)
        if importlib.util.find_spec("torch") is None:
            raise NoTorch(f"{sys.executable} (Python {sys.version.split()[0]}) cannot import torch: pick the "
                          f"interpreter that runs your script with --python PATH (or run it bare with --no-inject)")
        from . import uplink
        try:
            uplink.zmq_for(bool(env.get("DDPTOP_KEYS")))
        except uplink.TransportError as e:
            raise envmod.EnvError(str(e)) from None
    device = env.get("DDPTOP_DEVICE") or "auto"
    gpus = 0
    # torch takes a second to import: not asked at all where no NVIDIA GPU is
    if device == "cuda" or (device == "auto" and _nvidia_gpus()):
        import torch
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if device == "cuda" and not gpus:
            raise envmod.EnvError("no usable CUDA GPU: use --device cpu")
    device = "cuda" if gpus and device != "cpu" else "cpu"
    # spawns WHAT:LINE: the script starts its own ranks (spawn.scan): ddptop runs it once
    more = f" spawns {spawns[0]}:{spawns[1]}" if spawns else ""
    print(f"device {device} backend {'nccl' if device == 'cuda' else 'gloo'} gpus {gpus}{more}")


def script_traceback(e, most=8):
    """The traceback as short lines, one a frame, for ddptop's events (which
    keep about 200 characters a line): the script's frames (not runpy's nor
    the adapter's), the innermost `most`, then the exception."""
    here = os.path.dirname(os.path.abspath(__file__))
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if not f.filename.startswith(here) and "runpy" not in os.path.basename(f.filename)]
    lines = [f"{f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}" for f in frames[-most:]]
    head = "Traceback (most recent call last)" + (f", {len(frames) - most} frames left out" if len(frames) > most else "")
    return [head] + lines + ["".join(traceback.format_exception_only(type(e), e)).strip()]


def exit_status(code):
    """The process's exit status for sys.exit(code), as Python computes it:
    None 0, an int (True 1) modulo 256, anything else (a message) 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return int(code) & 0xFF
    return 1


def child_status(e):
    """A process the script forked (os.fork) got to the end of the script:
    it is not the rank, so it ends as bare Python would, saying nothing to
    ddptop (the rank's sockets are its parent's)."""
    if isinstance(e, SystemExit):
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr, flush=True)
        return exit_status(e.code)
    if e is not None:
        print_uncaught(e)
    return 1


_ADAPTER = os.path.dirname(os.path.abspath(__file__))


def _adapters(tb):
    name = tb.tb_frame.f_code.co_filename
    return os.path.dirname(os.path.abspath(name)) == _ADAPTER or name == os.path.abspath(runpy.__file__) \
        or name.startswith("<frozen runpy")


def without_adapter(tb):
    """Traceback tb as bare Python shows it: without this adapter's frames
    (run_script's and runpy's above the script's first frame, spawn.py's
    wrappers around mp.spawn and around a spawned rank's function) and
    without runpy's; the frame that raised stays, whoever's. The entries
    are unlinked in place (tb_next); returns the new first one."""
    while tb is not None and tb.tb_next is not None and _adapters(tb):
        tb = tb.tb_next
    at = tb
    while at is not None and at.tb_next is not None:
        if at.tb_next.tb_next is not None and _adapters(at.tb_next):
            at.tb_next = at.tb_next.tb_next
        else:
            at = at.tb_next
    return tb


def print_uncaught(e):
    """What Python prints for an exception the script did not catch: through
    sys.excepthook (torch 2.x's init_process_group installs one that puts
    "[rankN]: " before every line), the traceback from the script's own
    first frame as bare `python script.py` shows it (without run_script's
    and runpy's frames above it)."""
    tb = without_adapter(e.__traceback__)
    e.__traceback__ = tb        # Python's own hook prints the exception's traceback, not its argument
    try:
        sys.excepthook(type(e), e, tb)
    except Exception:       # a broken hook of the script's: Python's own words instead
        traceback.print_exception(type(e), e, tb)
    sys.stderr.flush()


def orderly_stop(r, unsafe=False):
    """After a stop raised from the optimizer step: the script's finally
    blocks have run; meet the others and destroy, unless the script did."""
    import torch.distributed as dist
    from . import lifecycle
    if not dist.is_initialized():
        return
    lifecycle.stop_barrier(r, unsafe)
    r.set_phase("destroying")
    lifecycle.destroy()
    r.set_phase("destroyed")


def refuse(r, why):
    """This rank refuses to run as launched (spawn.Refused, here or in a
    process it started): one line, the reason in its error phase and its
    bye (ddptop ends the job with it, exit 2). Returns the status, 2."""
    from . import lifecycle
    print(f"ddptop-py: {why}", file=sys.stderr, flush=True)
    r.refused = why
    lifecycle.hello()
    r.set_phase("error", why)
    return 2


def run_script(module, script, argv):
    sys.argv = list(argv)
    # a rank's stdout is its log file, not the terminal torchrun's children
    # print to: line-buffered as on a terminal, so a print before a hang or a
    # kill is in the log (and ddptop's log tail) instead of lost in the buffer
    try:
        if not sys.stdout.isatty():
            sys.stdout.reconfigure(line_buffering=True)
    except (AttributeError, OSError, ValueError):
        pass
    if module is not None:
        sys.path.insert(0, os.getcwd())
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        # python's sys.path[0]: the script's directory, or for a directory or
        # zip file with a __main__.py (as `python DIR` runs one) the path itself
        whole = os.path.isdir(script) or zipfile.is_zipfile(script)
        sys.path[0] = os.path.abspath(script) if whole else os.path.dirname(os.path.abspath(script))
        runpy.run_path(script, run_name="__main__")


def main(argv):
    env = os.environ
    try:
        timeout_s, module, script, sargv, plan = parse(argv)
        plan += faults.from_env(env)
        if env.get("DDPTOP_CHECK_ARGS"):
            from . import spawn
            spawns = spawn.scan_target(module, script)
            # a script that starts its own ranks has the world they declare, not -n's
            if env.get("WORLD_SIZE", "").isdigit() and not spawns:
                faults.check_ranks(plan, int(env["WORLD_SIZE"]))
            try:
                check(module, script, env, spawns)
            except NoTorch as e:
                print(f"ddptop-py: {e}", file=sys.stderr)
                return NO_TORCH
            return 0
        ctl, tel, keys_path = envmod.endpoints(env)
        keys = envmod.read_keys(keys_path) if keys_path else None
        rank, world, local_rank, local_world = envmod.identity(env)
        from . import spawn
        if not spawn.scan_target(module, script):     # else the world its ranks declare
            faults.check_ranks(plan, world)
    except (envmod.EnvError, faults.FaultError) as e:
        print(f"ddptop-py: {e}", file=sys.stderr)
        return 2

    from . import beat, collectives, ckpt, compat, cxx_hook, ddp_hook, lifecycle, linger, sampler, spawn, state, steer, steps
    from .steer import StopTraining
    from .uplink import Uplink, StoreError, TransportError

    try:
        up = Uplink(ctl, tel, rank, keys)
    except TransportError as e:
        print(f"ddptop-py: {e}", file=sys.stderr)
        return 2
    r = state.Run(up, rank, world, local_rank, local_world, timeout_s)
    state.set_run(r)
    for m in (collectives, ddp_hook, sampler, steps, steer, ckpt, lifecycle):
        m.install()
    cxx_hook.attach(up)
    spawn.install(r, timeout_s, spawn.fault_specs(argv))
    for f in faults.drop_spent(plan, env):
        faults.PLAN.add(f, rank)
    status = 0
    forked = False
    beater = beat.start(env)
    known = []

    def launcher():
        if not known:
            known.append(spawn.followed(r))
        return known[0]

    try:
        lifecycle.agree_master_port(r, env)
        try:
            run_script(module, script, sargv)
        except BaseException as e:
            if state.run() is r:
                raise
            forked, status = True, child_status(e)
        else:
            forked = state.run() is not r
    except StopTraining as e:
        orderly_stop(r, e.unsafe)
        if beater.front_gone():      # saved and torn down cleanly, but nobody watched the end
            status = 1
            ck = " with a final checkpoint" if r.ckpt_step == r.step else ""
            print(f"ddptop-py rank {r.rank}: ddptop is gone: stopped after step {r.step}{ck}; exit 1",
                  file=sys.stderr, flush=True)
    except SystemExit as e:
        status = exit_status(e.code)
        if e.code is not None and not isinstance(e.code, int):
            # what Python prints for sys.exit("message"): the rank's log, and ddptop's events
            print(e.code, file=sys.stderr, flush=True)
            if not launcher():
                lifecycle.hello()
                r.set_phase("error", f"sys.exit: {e.code}")
    except spawn.Refused as e:
        # -n N with a script that starts its own ranks: one line, exit 2; the bye says why (ddptop exits 2)
        status = refuse(r, str(e))
    except BaseException as e:        # KeyboardInterrupt too: the job must hear why
        status = 1
        print_uncaught(e)
        if not launcher():            # the ranks it started say what went wrong themselves
            lifecycle.hello()
            what = f"{type(e).__name__}: {e}" if not isinstance(e, StoreError) else str(e)
            r.set_phase("error", what)
            for line in script_traceback(e):
                r.log("error", line)
    finally:
        if not forked and launcher():
            # it started the ranks (spawn.py): not a rank itself, no word as one;
            # ddptop reports the launcher's exit
            beater.stop()
            up.close(500)
            state.set_run(None)
        elif not forked:
            below = spawn.refused_below()
            if below and not r.refused:     # a process it started was refused (spawn.become_rank)
                status = refuse(r, below)
            # no torch callback left to take the GIL as the interpreter exits (after an
            # error a collective may never complete: its callback is not waited for long)
            compat.quiesce(2.0 if status == 0 else 0.5)
            lifecycle.hello()
            said_bye = linger.wait(r, status)
            beater.stop()
            if not said_bye:
                r.bye(status)
            up.close(2000)
            state.set_run(None)
    return status
