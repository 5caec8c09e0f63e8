"""fake_front.py — a stand-in for ddptop's frontend, for worker scenario tests.

Binds ctl (ROUTER) and tel (PULL) in a private directory, serves the store
(set/get/wait, as tui/run/store.c), launches ddptop-worker ranks with torchrun's
environment, records every message they send, and sends `cmd` messages when
a test asks. It speaks protocol v1 through Python's msgpack, so these tests
also check the worker's wire from the other side.

    from fake_front import Front
    f = Front(worker, world=2, args=[...])
    f.wait_until(lambda f: f.max_step() >= 5, 20)
    f.cmd_all("pause", 1)
    ...
    codes = f.finish(30)
"""
import os
import shutil
import subprocess
import tempfile
import time

import msgpack
import zmq


class Front:
    def __init__(self, worker, world, args, env=None, log_dir=None):
        self.dir = tempfile.mkdtemp(prefix="fake-front-")
        os.chmod(self.dir, 0o700)
        self.ctx = zmq.Context()
        self.ctl = self.ctx.socket(zmq.ROUTER)
        self.tel = self.ctx.socket(zmq.PULL)
        self.ctl.setsockopt(zmq.LINGER, 0)
        self.tel.setsockopt(zmq.LINGER, 0)
        self.ctl.bind(f"ipc://{self.dir}/ctl")
        self.tel.bind(f"ipc://{self.dir}/tel")
        self.store = {}
        self.waiting = []          # (deadline, ident, key, kind)
        self.msgs = []             # every message from the workers, decoded
        self.world = world
        self.procs = []
        self.codes = {}
        self.log_dir = log_dir or self.dir
        job = f"fake-{os.getpid()}-{int(time.time() * 1e6)}"
        for r in range(world):
            e = dict(os.environ)
            e.update(env or {})
            e.update(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world),
                     LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                     MASTER_PORT="29500", DDPTOP_CTL=f"ipc://{self.dir}/ctl",
                     DDPTOP_TEL=f"ipc://{self.dir}/tel", DDPTOP_JOB=job,
                     OPENBLAS_NUM_THREADS="1")
            log = open(os.path.join(self.log_dir, f"rank-{r}.log"), "wb")
            self.procs.append(subprocess.Popen([worker] + list(args), env=e, stdout=log,
                                               stderr=subprocess.STDOUT))

    # ---- the wire ----
    @staticmethod
    def pack(m):
        return msgpack.packb(dict({"v": 1}, **m))

    def reply(self, ident, key, ok, val=b""):
        self.ctl.send_multipart([ident, self.pack({"k": "val", "key": key, "ok": ok, "val": val})])

    def on_ctl(self, ident, m):
        k = m.get("k")
        if k == "set":
            self.store[m["key"]] = m.get("val", b"")
            self.reply(ident, m["key"], True)
            still = []
            for w in self.waiting:
                if w[2] == m["key"]:
                    self.reply(w[1], w[2], True, self.store[w[2]] if w[3] == "get" else b"")
                else:
                    still.append(w)
            self.waiting = still
        elif k in ("get", "wait"):
            key = m["key"]
            if key in self.store:
                self.reply(ident, key, True, self.store[key] if k == "get" else b"")
            else:
                t = m.get("timeout_ms", 0) or 30000
                self.waiting.append((time.monotonic() + t / 1000, ident, key, k))
        else:
            self.msgs.append(m)

    def pump(self, secs):
        """Handle traffic for up to secs seconds."""
        end = time.monotonic() + secs
        poller = zmq.Poller()
        poller.register(self.ctl, zmq.POLLIN)
        poller.register(self.tel, zmq.POLLIN)
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            for s, _ in poller.poll(max(1, int(min(left, 0.05) * 1000))):
                while True:
                    try:
                        if s is self.ctl:
                            ident, frame = self.ctl.recv_multipart(zmq.NOBLOCK)
                            self.on_ctl(ident, msgpack.unpackb(frame, raw=False))
                        else:
                            m = msgpack.unpackb(self.tel.recv(zmq.NOBLOCK), raw=False)
                            # a burst carries whole frames (docs/PROTOCOL.md): take it apart
                            if m.get("k") == "burst":
                                self.msgs.extend(msgpack.unpackb(f, raw=False) for f in m.get("m", []))
                            else:
                                self.msgs.append(m)
                    except zmq.Again:
                        break
            now = time.monotonic()
            for w in [w for w in self.waiting if w[0] <= now]:
                self.reply(w[1], w[2], False)
            self.waiting = [w for w in self.waiting if w[0] > now]
            for r, p in enumerate(self.procs):
                if r not in self.codes and p.poll() is not None:
                    self.codes[r] = p.returncode

    def wait_until(self, pred, secs):
        end = time.monotonic() + secs
        while time.monotonic() < end:
            if pred(self):
                return True
            if len(self.codes) == self.world:
                self.pump(0.1)
                return pred(self)
            self.pump(0.05)
        return pred(self)

    def cmd(self, rank, op, id, arg=0):
        self.ctl.send_multipart([f"rank-{rank}".encode(),
                                 self.pack({"k": "cmd", "id": id, "op": op, "arg": arg})])

    def cmd_all(self, op, id, arg=0):
        for r in range(self.world):
            self.cmd(r, op, id, arg)

    # ---- what the workers said ----
    def of(self, kind, rank=None):
        return [m for m in self.msgs if m.get("k") == kind and (rank is None or m.get("r") == rank)]

    def max_step(self, rank=None):
        s = [m["step"] for m in self.of("step", rank)]
        return max(s) if s else 0

    def phases(self, rank):
        return [m["phase"] for m in self.of("phase", rank)]

    def logs(self):
        out = []
        for r in range(self.world):
            try:
                with open(os.path.join(self.log_dir, f"rank-{r}.log"), "rb") as f:
                    out.append(f"--- rank {r} ---\n" + f.read().decode(errors="replace"))
            except OSError:
                pass
        return "\n".join(out)

    def finish(self, secs):
        """Let the ranks end (they must, by themselves); kill them after secs."""
        self.wait_until(lambda f: len(f.codes) == f.world, secs)
        for r, p in enumerate(self.procs):
            if p.poll() is None:
                p.kill()
                p.wait()
                self.codes.setdefault(r, "killed")
        self.pump(0.05)
        self.ctl.close()
        self.tel.close()
        self.ctx.term()
        if self.log_dir != self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        return [self.codes.get(r) for r in range(self.world)]
