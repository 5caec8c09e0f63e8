"""spawn.py — scripts that start their own ranks (torch.multiprocessing.spawn,
start_processes, multiprocessing.Process; spawn or fork), as PyTorch's DDP
tutorial does: the process ddptop launched is then the ranks' launcher,
not a rank, and each process it starts becomes a rank of its own at its
init_process_group.

  into the children  fork children have the hooks already. Spawned ones are
                     fresh interpreters: multiprocessing's command line
                     (multiprocessing.spawn.get_command_line) is given a
                     prelude, `import ddptop.spawn; child()`, which installs
                     the hooks before spawn_main unpickles the target. The
                     script and the interpreter's sitecustomize are left alone.
  becoming a rank    a child (a descendant of the launched process: its
                     DataLoader workers too) is a rank only once it calls
                     init_process_group; its rank and world come from that
                     call's arguments, else from RANK/WORLD_SIZE. It then
                     connects to ddptop as rank-R.PID.NONCE, beats, and says
                     hello, as a launched rank does; ddptop takes the world it
                     declares (tui/run/follow.c). It tells ddptop's store
                     (JOB/py/followed) that the launched process has ranks
                     below it.
  its end            multiprocessing.Process.run is wrapped: a stop from
                     ddptop ends the target as in runner.py (barrier,
                     destroy, bye 0), an exception is the rank's error (its
                     traceback in ddptop's events, bye 1), then bye with the
                     process's exit status.
  the launched one   says nothing as a rank once a child became one (no
                     hello at the end, no bye: its exit is the launcher's,
                     ddptop reports it on its own).
  -n N > 1           the launched process of a job of N ranks that calls
                     mp.spawn or start_processes, or a child of it that calls
                     init_process_group, is refused (Refused): two launched
                     processes would each start a world of their own. A
                     refused child writes why into DDPTOP_SPAWN_REFUSED's
                     file; the launched process says it at its end
                     (refused_below). Either way the rank's bye carries the
                     reason (`refused`) and ddptop ends the job with it, exit
                     2. ddptop refuses it earlier where the script says so
                     plainly (scan(): its check, before anything starts).
"""
import ast
import os
import sys

ENV_FROM = "DDPTOP_SPAWN_FROM"     # "PID:RANK:WORLD" of the launched process, for its descendants
ENV_FAULTS = "DDPTOP_FAULTS"
ENV_REFUSED = "DDPTOP_SPAWN_REFUSED"   # a file a refused descendant writes why into (-n N > 1: refused_below)
_PENDING = False                  # a descendant that may become a rank
_STARTED = []                     # the launched process started a process (not yet known to be a rank)
_ORIG = {}


class Refused(Exception):
    """A script that starts its own ranks, in a job of several launched ranks."""


def refusal(what):
    world = os.environ.get(ENV_FROM, "::").split(":")[2] or "?"
    return (f"ddptop run -n {world}: the script starts its own ranks ({what}), so each of the {world} launched "
            f"processes would start a world of its own: run it once, without -n (ddptop follows the ranks it starts)")


def launched_world():
    try:
        return int(os.environ.get(ENV_FROM, "").split(":")[2])
    except (IndexError, ValueError):
        return 0


def _adapter_dir():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---- the launched process ----

def install(r, timeout_s, plan_specs):
    """In the process ddptop launched: children inherit who launched them
    (ENV_FROM), the faults (DDPTOP_FAULTS) and the hooks (fork) or the
    prelude (spawn)."""
    os.environ[ENV_FROM] = f"{os.getpid()}:{r.rank}:{r.world}"
    os.environ["DDPTOP_SPAWN_TIMEOUT"] = f"{timeout_s:g}"
    if r.world > 1:     # made only by a refused child: nothing is left behind otherwise
        import tempfile
        os.environ[ENV_REFUSED] = os.path.join(tempfile.gettempdir(),
                                               f"ddptop-refused-{os.getpid()}-{os.urandom(4).hex()}")
    if plan_specs:
        old = os.environ.get(ENV_FAULTS, "")
        os.environ[ENV_FAULTS] = ",".join([old] + plan_specs if old else plan_specs)
    _patch_command_line()
    _patch_process()
    _patch_torch_spawn()
    _patch_reap(r)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_forked)


def _patch_reap(r):
    """Each child's exit status as the launched process reaps it, into
    ddptop's store (JOB/py/exit/PID, as waitpid reports it): a rank killed
    without a word (SIGKILL, the OOM killer) is gone before ddptop can read
    its status (not ddptop's child), but its launcher's is."""
    import multiprocessing.popen_fork as pf
    if "poll" in _ORIG:
        return
    _ORIG["poll"] = orig = pf.Popen.poll
    me, told = os.getpid(), set()
    key = f"{os.environ.get('DDPTOP_JOB', 'ddptop')}/py/exit/"

    def poll(self, flag=os.WNOHANG):
        code = orig(self, flag)
        if code is None or os.getpid() != me or self.pid in told:
            return code
        told.add(self.pid)
        from . import state
        if state.run() is r and _STARTED:
            try:
                r.up.store_set(key + str(self.pid), str(-code if code < 0 else (code & 0xFF) << 8).encode())
            except Exception:       # ddptop gone: nobody to tell
                pass
        return code

    pf.Popen.poll = poll


def _forked():
    global _PENDING
    _PENDING = os.environ.get(ENV_FROM) is not None


def _patch_command_line():
    import multiprocessing.spawn as mps
    if "cmdline" in _ORIG:
        return
    _ORIG["cmdline"] = orig = mps.get_command_line
    prelude = (f"import sys; sys.path.insert(0, {_adapter_dir()!r}); "
               f"import ddptop.spawn as _ddptop_spawn; _ddptop_spawn.child(); ")

    def get_command_line(**kwds):
        cmd = orig(**kwds)
        try:
            i = cmd.index("-c")
        except ValueError:       # a frozen interpreter: left as it is
            return cmd
        return cmd[:i + 1] + [prelude + cmd[i + 1]] + cmd[i + 2:]

    mps.get_command_line = get_command_line


def _patch_torch_spawn():
    """mp.spawn and start_processes in a job of several launched ranks: refused at once."""
    try:
        import torch.multiprocessing as tmp
    except ImportError:
        return
    # the submodule by its name: torch.multiprocessing.spawn, the attribute, is the function
    tsp = sys.modules.get("torch.multiprocessing.spawn")
    if tsp is None:
        return
    for name in ("spawn", "start_processes"):
        orig = getattr(tsp, name, None)
        if orig is None or name in _ORIG:
            continue
        _ORIG[name] = orig

        def wrapped(*args, _orig=orig, _name=name, **kwargs):
            from . import state
            r = state.run()
            if r is not None and r.world > 1:
                raise Refused(refusal(f"torch.multiprocessing.{_name}"))
            return _orig(*args, **kwargs)

        wrapped.__wrapped__ = orig
        wrapped.__name__, wrapped.__doc__ = orig.__name__, orig.__doc__
        for mod in (tsp, tmp):
            if getattr(mod, name, None) is orig:
                setattr(mod, name, wrapped)


def _patch_process():
    """Process.run in a child: the rank's end (finish)."""
    import multiprocessing.process as mpp
    if "run" in _ORIG:
        return
    _ORIG["run"] = orig = mpp.BaseProcess.run
    _ORIG["start"] = orig_start = mpp.BaseProcess.start

    def start(self):
        from . import state
        if state.run() is not None:
            _STARTED.append(1)
        return orig_start(self)

    def run(self):
        if not _PENDING:
            return orig(self)
        _guard_target(self)
        status = 0
        try:
            orig(self)
        except SystemExit as e:
            from .runner import exit_status
            status = exit_status(e.code)
            raise
        except BaseException:
            status = 1
            raise
        finally:
            finish(status)

    mpp.BaseProcess.run = run
    mpp.BaseProcess.start = start


def _guard_target(proc):
    """The function the child runs, guarded as runner.py guards a script:
    torch's _wrap(fn, i, args, error_queue) catches fn's exceptions itself,
    so its fn is the one guarded."""
    target = getattr(proc, "_target", None)
    if target is None:
        return
    if getattr(target, "__module__", "") == "torch.multiprocessing.spawn" and target.__name__ == "_wrap" \
            and proc._args:
        proc._args = (_guarded(proc._args[0]),) + tuple(proc._args[1:])
    else:
        proc._target = _guarded(target)


def _guarded(fn):
    def guarded(*args, **kwargs):
        from . import state
        from .steer import StopTraining
        try:
            return fn(*args, **kwargs)
        except StopTraining as e:
            r = state.run()
            if r is None:
                raise
            from .runner import orderly_stop
            orderly_stop(r, e.unsafe)
            if _BEATER and _BEATER.front_gone():
                print(f"ddptop-py rank {r.rank}: ddptop is gone: stopped after step {r.step}; exit 1",
                      file=sys.stderr, flush=True)
                raise SystemExit(1)
            return None
        except SystemExit:
            raise
        except BaseException as e:
            r = state.run()
            if r is not None:
                report_error(r, e)
            _print_as_bare(e)
            raise
    guarded.__wrapped__ = fn
    return guarded


def _print_as_bare(e):
    """What the child's launcher prints of e, as bare: torch's _wrap sends
    traceback.format_exc() to the parent (which raises it in
    ProcessRaisedException), multiprocessing's _bootstrap prints
    traceback.print_exc(); either, once, sees the traceback without this
    adapter's frames (runner.without_adapter: the same as the launched
    process prints its own uncaught exception)."""
    import traceback
    from .runner import without_adapter

    def once(name):
        orig = getattr(traceback, name)

        def call(*args, **kwargs):
            setattr(traceback, name, orig)
            got = sys.exc_info()[1]
            if got is e:
                e.__traceback__ = without_adapter(e.__traceback__)
            return orig(*args, **kwargs)
        setattr(traceback, name, call)
    once("format_exc")
    once("print_exc")


def report_error(r, e):
    """An exception that ends a rank: phase error and the traceback as log lines (runner.py's words)."""
    from . import lifecycle
    from .runner import script_traceback
    from .uplink import StoreError
    lifecycle.hello()
    what = f"{type(e).__name__}: {e}" if not isinstance(e, StoreError) else str(e)
    r.set_phase("error", what)
    for line in script_traceback(e):
        r.log("error", line)


_BEATER = None


def finish(status):
    """The rank's bye, once, as runner.py ends a launched one."""
    global _BEATER
    from . import compat, lifecycle, state
    r = state.run()
    if r is None:
        return
    if r.stop_asked and status == 0:
        from .runner import orderly_stop
        orderly_stop(r)
    compat.quiesce(2.0 if status == 0 else 0.5)
    if _BEATER:
        _BEATER.stop()
    lifecycle.hello()
    r.bye(status)
    r.up.close(2000)
    state.set_run(None)
    _BEATER = None


# ---- a spawned child ----

def child():
    """The prelude of a spawned child: the hooks, before the target is unpickled."""
    global _PENDING
    if os.environ.get(ENV_FROM) is None:
        return
    _PENDING = True
    from . import ckpt, collectives, ddp_hook, lifecycle, sampler, steer, steps
    for m in (collectives, ddp_hook, sampler, steps, steer, ckpt, lifecycle):
        m.install()
    _patch_process()
    _patch_command_line()       # its own children (a rank's spawned DataLoader workers) are followed too
    _patch_torch_spawn()
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_forked)


def refused_below():
    """In the launched process, at its end: why a process it started was
    refused (become_rank), "" when none; the file is removed."""
    path = os.environ.get(ENV_REFUSED, "")
    if not path:
        return ""
    try:
        with open(path) as f:
            why = f.read().strip()
        os.unlink(path)
    except OSError:         # none was refused
        return ""
    return why


def pending():
    """A descendant of the launched process that is not a rank yet."""
    from . import state
    return _PENDING and state.run() is None


def become_rank(rank, world):
    """init_process_group in a descendant: connect as rank `rank` of `world`
    and start beating; the Run (None when ddptop cannot be reached: the child
    then trains unwatched, as it would bare). Raises Refused in a job of
    several launched ranks."""
    global _BEATER
    from . import beat, cxx_hook, env as envmod, faults, state
    from .uplink import Uplink
    if launched_world() > 1:
        why = refusal("a process it started called init_process_group")
        try:        # the launched process says it for it (refused_below): this one is no rank
            with open(os.environ[ENV_REFUSED], "x") as f:
                f.write(why)
        except (KeyError, OSError):
            pass
        raise Refused(why)
    env = os.environ
    try:
        ctl, tel, keys_path = envmod.endpoints(env)
        keys = envmod.read_keys(keys_path) if keys_path else None
        plan = faults.drop_spent(faults.from_env(env), env)
    except (envmod.EnvError, faults.FaultError) as e:
        print(f"ddptop-py: {e}", file=sys.stderr, flush=True)
        return None
    _set_parent_death()
    up = Uplink(ctl, tel, rank, keys)
    timeout_s = _timeout_s(env)
    r = state.Run(up, rank, world, rank, world, timeout_s)
    state.set_run(r)
    cxx_hook.attach(up)
    faults.PLAN.__init__()
    for f in plan:
        faults.PLAN.add(f, rank)
    # the launched process blocks the stack signal in its script's thread (beat._only_here), and a
    # child, forked or exec'd from it, inherits that mask: open it, so the beat thread starts with it
    import signal
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {getattr(signal, env.get("DDPTOP_STACK_SIGNAL") or "SIGUSR1",
                                                            signal.SIGUSR1)})
    except (AttributeError, OSError, ValueError):
        pass
    _BEATER = beat.start(env)
    _ANNOUNCE.append(r)
    return r


_ANNOUNCE = []


def announce():
    """Right after a followed rank's hello: a store round trip through
    ddptop (JOB/py/followed, which tells the launched process it launched
    ranks). Its answer comes once ddptop has read the hello before it on
    ctl, so the rank's telemetry after it (phases, steps), on another socket,
    does not reach ddptop before the hello that makes it follow this world."""
    if not _ANNOUNCE:
        return
    r = _ANNOUNCE.pop()
    try:
        r.up.store_set(f"{os.environ.get('DDPTOP_JOB', 'ddptop')}/py/followed", str(os.getpid()).encode())
    except Exception as e:      # the store is a courtesy, not the rank's business
        print(f"ddptop-py rank {r.rank}: {e}", file=sys.stderr, flush=True)


def _timeout_s(env):
    try:
        return float(env.get("DDPTOP_SPAWN_TIMEOUT") or 0)
    except ValueError:
        return 0.0


def _set_parent_death():
    """The rank dies with its parent, as a launched rank with ddptop
    (front.py takes the signal back and watches the parent instead: a
    parent gone is a stop with a final checkpoint)."""
    try:
        import ctypes
        import signal
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def followed(r):
    """In the launched process, at its end: did a process it started
    become a rank? Then it is the ranks' launcher and says nothing as rank."""
    if r.hello_sent or not os.environ.get(ENV_FROM) or not _STARTED:
        return False
    from .uplink import StoreError
    try:
        r.up.store_get(f"{os.environ.get('DDPTOP_JOB', 'ddptop')}/py/followed", 0.5)
        return True
    except StoreError:
        return False


def fault_specs(argv):
    """The --fault SPECs before the script in the launched process's argv (runner.parse's order)."""
    out, i = [], 0
    while i + 1 < len(argv) and argv[i] in ("--timeout", "--fault"):
        if argv[i] == "--fault":
            out.append(argv[i + 1])
        i += 2
    return out


# ---- ddptop's check: does the script start its own ranks? ----

_MP_MODULES = ("torch.multiprocessing", "multiprocessing")


def scan_target(module, script):
    """scan() of the script, or of the module's file (found, not imported)."""
    path = script
    if module is not None:
        import importlib.util
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            spec = importlib.util.find_spec(module)
            path = spec.origin if spec is not None else None
            if spec is not None and spec.submodule_search_locations:     # a package: python -m runs its __main__
                path = os.path.join(list(spec.submodule_search_locations)[0], "__main__.py")
        except (ImportError, ValueError):
            path = None
    elif path is not None and os.path.isdir(path):
        path = os.path.join(path, "__main__.py")
    return scan(path) if path and os.path.isfile(path) else None


def scan(path):
    """"(what, line)" when the script plainly starts its own ranks:
    torch.multiprocessing's spawn or start_processes, or a multiprocessing
    Process whose target (a function of the script) reaches
    init_process_group; None otherwise (or when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    mods, names = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in _MP_MODULES:
                    mods.add(a.asname or a.name)
                elif a.name == "torch" and a.asname is None:
                    mods.add("torch.multiprocessing")
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if node.module in _MP_MODULES and a.name in ("spawn", "start_processes", "Process"):
                    names[a.asname or a.name] = a.name
                elif node.module == "torch" and a.name == "multiprocessing":
                    mods.add(a.asname or a.name)
    funcs = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def called(node):
        """Names of the functions node calls (f(...) and x.f(...))."""
        out = set()
        for c in ast.walk(node):
            if isinstance(c, ast.Call):
                f = c.func
                out.add(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "")
        return out

    def reaches_init(name, seen):
        if name in seen or name not in funcs:
            return False
        seen.add(name)
        calls = called(funcs[name])
        return "init_process_group" in calls or any(reaches_init(c, seen) for c in calls)

    def what(call):
        f = call.func
        if isinstance(f, ast.Attribute):
            base = ast.unparse(f.value)
            if base in mods or any(base.endswith(m) for m in ("torch.multiprocessing",)):
                return f.attr
            if f.attr == "Process":     # a start method's context: mp.get_context("fork").Process
                return "Process"
            return None
        if isinstance(f, ast.Name):
            return names.get(f.id)
        return None

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        w = what(node)
        if w in ("spawn", "start_processes"):
            return f"torch.multiprocessing.{w}", node.lineno
        if w == "Process":
            target = next((k.value for k in node.keywords if k.arg == "target"), None)
            if isinstance(target, ast.Name) and reaches_init(target.id, set()):
                return "multiprocessing.Process", node.lineno
    return None
