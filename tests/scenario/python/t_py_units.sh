# The torch adapter's parts without ddptop: its frames and its bursts decode
# in the C codec (tool_wire) and in msgpack, each burst one 50 ms slot of the
# wall clock; its safetensors writer is read by the
# safetensors package; long logs are cut to the field size; and DDP with
# the adapter's comm hook ends with the
# very weights of DDP's default all-reduce (the C++ hook and the Python one
# alike: the same colls and layout logs), and its buckets' coll messages,
# which wait for the script's thread, go out by the next beat when no
# optimizer step comes. The heartbeat thread hands the telemetry stream's
# backlog to its socket between beats (a script blocked in C sends nothing).
# The commands' agreement on ddptop's own group (steer.py): making the
# group costs the default group no collective (its sequence number stays),
# ranks with different step times pick the same agreement points and stop
# after the same step, and a peer that dies turns the commands off without
# raising in place of the script's own error.
. tests/lib.sh
. tests/lib_py.sh
export PYTHONPATH=$PWD/workers/python${PYTHONPATH:+:$PYTHONPATH}
# a file, not stdin: torch.multiprocessing's spawned ranks import it
cat >"$TMP/units.py" <<'PYEOF'
import os, subprocess, sys, tempfile
import msgpack, torch
import torch.distributed as dist
import torch.multiprocessing as mp
from ddptop import safetensors_io, state, wire

class Quiet:
    """The uplink, recording: telemetry in sent, the important messages' text in logs."""
    drops = 0
    def __init__(self): self.sent, self.logs = [], []
    def send(self, kind, fields, t_ns=0): self.sent.append((kind, fields))
    def send_important(self, kind, fields): self.logs.append(fields.get("text", ""))
    def commands(self): return []
    def flush(self): pass


def start(rank, world, hooked, store_path):
    """The group, and with hooked ("cxx" or "python", forced) the adapter's DDP hook."""
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world)
    if hooked:
        if hooked == "python":
            os.environ["DDPTOP_PY_HOOK"] = "python"
        from ddptop import ddp_hook
        state.set_run(state.Run(Quiet(), rank, world, rank, world, 0))
        ddp_hook.install()


# 4. the comm hook keeps DDP's default result, bit for bit; hooked: "cxx" (the C++ hook,
# which must load here: the build made it for this torch) or "python" (forced)
def train(rank, world, hooked, store_path, out):
    start(rank, world, hooked, store_path)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(30, 64), torch.nn.Tanh(), torch.nn.Linear(64, 5)), bucket_cap_mb=0.004)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    for _ in range(5):
        loss = model(torch.randn(8, 30, generator=g)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    extra = None
    if hooked:
        # the buckets' coll messages wait for the script's thread (the step's end, or the beat when
        # no optimizer step is hooked, as here): every bucket of every backward, in order, then the beat
        from ddptop import beat
        r = state.run()
        said = [t for t in r.up.logs if t.startswith("DDP comm hook: ")]
        want = "DDP comm hook: C++" if hooked == "cxx" else "DDP comm hook: Python (DDPTOP_PY_HOOK=python)"
        assert len(said) == 1 and said[0].startswith(want), (hooked, r.up.logs)
        # nothing sent but the model's info (DDP's module and its parameters, for the job line)
        params = sum(p.numel() for p in model.parameters())
        assert r.up.sent == [("info", {"model": "Sequential", "params": params})], r.up.sent
        r.up.sent.clear()
        if hooked == "python":
            assert len(r.later_colls) >= 5, r.later_colls     # 5 backwards
        else:
            assert not r.later_colls and r.collect is not None, r.later_colls  # still in the C++ ring
        beat.beat_once(r)
        kinds = [k for k, _ in r.up.sent]
        colls = [f for k, f in r.up.sent if k == "coll"]
        assert kinds == ["coll"] * len(colls) + ["beat"] and not r.later_colls and len(colls) >= 5, kinds
        assert [c["seq"] for c in colls] == sorted(c["seq"] for c in colls), colls
        assert min(c["bucket"] for c in colls) == 0, colls
        assert all(c["op"] == "allreduce" and c["bytes"] > 0 and c["done"] >= c["start"] for c in colls), colls
        # what the user sees does not depend on the hook: the same buckets, numbers and layout logs
        extra = ([(c["seq"], c["bucket"], c["bytes"], c["step"]) for c in colls],
                 [t for t in r.up.logs if t.startswith("DDP gradient buckets")])
    if rank == 0:
        torch.save(([p.detach() for p in model.parameters()], extra), out)
    dist.barrier()     # no rank tears Gloo down while the other still uses it
    dist.destroy_process_group()


# 6. a failed all-reduce: rank 1 leaves after 2 steps; rank 0's next backward raises the
# all-reduce's error (through either hook), its bucket leaves the flight, no coll for it
def fail(rank, world, hooked, store_path, out):
    start(rank, world, hooked, store_path)
    from ddptop import collectives
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(30, 5))
    for step in range(4):
        if rank == 1 and step == 2:
            os._exit(0)
        try:
            model(torch.randn(8, 30)).sum().backward()
        except RuntimeError as e:
            r = state.run()
            r.flush_step()
            ok = step == 2 and collectives.oldest_in_flight()[0] == -1 if hooked == "cxx" else step == 2
            colls = [f["step"] for k, f in r.up.sent if k == "coll"]
            with open(out, "w") as f:
                f.write(f"raised at {step} ok={ok} colls={colls}: {e}"[:300])
            os._exit(0)
        r = state.run()
        r.flush_step()      # the step's end: its buckets' colls out
        r.step += 1
    with open(out, "w") as f:
        f.write("no error")
    os._exit(0)


# 7. the agreement on ddptop's own group (steer.py, lifecycle.agreement_group)
def agree(rank, world, store_path, out):
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world)
    from ddptop import lifecycle, steer
    r = state.Run(Quiet(), rank, world, rank, world, 0)
    state.set_run(r)
    pg = dist.distributed_c10d._get_default_group()
    seq = pg._get_sequence_number_for_group()
    lifecycle.agreement_group()
    S = steer.STEER
    assert S.group is not None, "no agreement group"
    points, stopped, now = [], None, 0.0
    for step in range(1, 400):
        now += 0.001 if rank == 0 else 0.004     # different step times: different proposals
        if rank == 1 and step == 150:
            S.stop_seen = True                    # one rank's view: a stop
        r.step = step
        at = S.next_at
        try:
            S.after_step(now)
        except steer.StopTraining:
            stopped = step
            break
        if r.step == at:
            points.append(step)
    S.barrier(10)       # the stop's barrier, on ddptop's group
    # the group, its agreements, the stop and its barrier: no collective of the default group's
    assert pg._get_sequence_number_for_group() == seq, "ddptop's agreement took collectives of the default group"
    assert not [t for t in r.up.logs if "barrier" in t], r.up.logs
    torch.save((points, stopped), f"{out}.{rank}")
    # a peer that dies: the agreement fails, nothing raises, the commands are off (said once)
    lifecycle.agreement_group()
    if rank == 1:
        os._exit(0)
    S.stop_seen = False
    for step in range(r.step + 1, r.step + 400):
        r.step, now = step, now + 0.001
        S.after_step(now)
        if S.off:
            break
    off = [t for t in r.up.logs if "commands are off" in t]
    torch.save((S.off != "", len(off)), f"{out}.off")
    os._exit(0)


def main():
    tmp, tool, hooks = sys.argv[1], sys.argv[2], sys.argv[3].split()
    # 1. frames: msgpack and the C decoder read what the adapter writes
    samples = {
        "hello": dict(local_rank=1, world=2, local_world=2, pid=7, host="h\u00f4te", device="cpu", backend="gloo",
                      version="ddptop-py 0.1.0", dataset="", model="", params=0, batch=0, max_steps=0,
                      steps_per_epoch=0, dataset_size=0),
        "step": dict(epoch=1, step=12, loss=0.25, lr=0.05, samples=768, step_ms=1.5, fwd_ms=0.5, bwd_ms=0.5,
                     opt_ms=0.25, comm_ms=0.125, exposed_ms=0.0625, drops=0, dev_mem=0, dev_mem_total=0),
        "coll": dict(seq=5, op="allreduce", bucket=0, step=12, bytes=407080, enq=1, start=1, done=2, algbw=1.5, busbw=1.5),
        "shard": dict(epoch=0, seed=0, shuffle=True, drop_last=False, size=5, num_samples=3, total_size=6, padding=1,
                      idx=[4, 0, 2]),
        "beat": dict(step=3, phase="train", seq=9, op="allreduce", since=11, where="train.py:88 main", bucket=2),
        "log": dict(level="warn", text=wire.cut("\u00e9" * 400, wire.STR_LONG)),
        "phase": dict(phase="paused", detail="paused after step 3"),
        "ckpt": dict(step=3, epoch=0, ok=True, path="/x/step-00000003", bytes=10, ms=1.0, error=""),
        "bye": dict(status=0, step=3),
    }
    for kind, fields in samples.items():
        frame = wire.encode(kind, 1, fields, t_ns=1700000000123456789)
        m = msgpack.unpackb(frame, raw=False)
        assert list(m)[:4] == ["v", "k", "r", "t"] and m["v"] == 1 and m["k"] == kind, m
        assert {k: m[k] for k in fields} == fields, (kind, m)
        path = os.path.join(tmp, kind + ".bin")
        open(path, "wb").write(frame)
        out = subprocess.run([tool, "decode", path], capture_output=True, text=True)
        assert out.returncode == 0, (kind, out.stderr)
        got = dict(l.split("=", 1) for l in out.stdout.splitlines())
        assert got["k"] == kind and got["r"] == "1", got
    # the adapter's burst: the C decoder takes it apart, every message whole and in order
    kinds = ["coll", "step", "beat", "shard"]
    path = os.path.join(tmp, "burst.bin")
    open(path, "wb").write(wire.burst(1, [wire.encode(k, 1, samples[k]) for k in kinds]))
    out = subprocess.run([tool, "decode", path], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    got = dict(l.split("=", 1) for l in out.stdout.splitlines())
    assert got["k"] == "burst" and got["n"] == "4", got
    assert [got[f"m{i}"] for i in range(4)] == ["0"] * 4 and [got[f"m{i}.k"] for i in range(4)] == kinds, got
    assert got["m1.step"] == "12" and got["m2.where"] == "train.py:88 main" and got["m2.bucket"] == "2", got
    assert len(wire.cut("\u00e9" * 400, wire.STR_LONG).encode()) <= wire.STR_LONG - 1
    assert wire.decode(msgpack.packb({"v": 2, "k": "cmd"})) is None and wire.decode(b"\xc1") is None

    # 2. long log text: pieces that fit the field, lines kept whole where they fit
    text = "\n".join(f"line {i} " + "x" * 90 for i in range(30))
    parts = state._chunks(text, wire.STR_LONG - 1)
    assert all(len(p.encode()) <= wire.STR_LONG - 1 for p in parts) and "\n".join(parts) == text, parts

    # 3. the safetensors writer, read by the safetensors package
    from safetensors.torch import load as st_load
    from safetensors import safe_open
    ts = {"a.weight": torch.randn(3, 4), "b": torch.arange(6, dtype=torch.int64).reshape(2, 3),
          "h": torch.randn(5).to(torch.bfloat16), "m": torch.tensor([True, False]), "s": torch.tensor(2.5)}
    raw = safetensors_io.encode(ts, {"format": "pt", "step": "3"})
    back = st_load(raw)
    assert back.keys() == ts.keys() and all(torch.equal(back[k], ts[k]) for k in ts), back
    open(os.path.join(tmp, "t.safetensors"), "wb").write(raw)
    with safe_open(os.path.join(tmp, "t.safetensors"), "pt") as f:
        assert f.metadata() == {"format": "pt", "step": "3"}

    # a rank waits for the torch callbacks still pending before it exits (compat.quiesce): one
    # taking the GIL after the interpreter began to exit aborts the process (std::terminate)
    import threading, time
    from ddptop import compat
    fut = torch.futures.Future()
    ran = []
    chained = fut.then(compat.callback(lambda f: ran.append(f.value())))
    assert compat.quiesce(0.05) is False, "quiesce did not wait for a pending callback"
    threading.Timer(0.1, lambda: fut.set_result(7)).start()
    t0 = time.monotonic()
    assert compat.quiesce(5.0) is True and ran == [7], ran
    assert time.monotonic() - t0 >= 0.1 + compat.CALLBACK_GRACE_S - 0.01, "quiesce returned before the grace"
    chained.wait()

    # the store a rank waits for before init_process_group (lifecycle.store_addr)
    from ddptop import lifecycle
    env = {"MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "29511"}
    sa = lambda *a, **k: lifecycle.store_addr(a, k, env)
    assert sa("gloo") == ("10.0.0.7", 29511) and sa("gloo", "env://") == ("10.0.0.7", 29511)
    assert sa(backend="gloo", init_method="tcp://h1:1234") == ("h1", 1234)
    assert sa("gloo", "tcp://h1:notaport") is None and sa("gloo", "file:///tmp/x") is None
    assert sa("gloo", store=object()) is None and sa("gloo", None, None, 2, 0, object()) is None
    assert lifecycle.store_addr(("gloo",), {}, {"MASTER_ADDR": "h"}) is None
    t0 = time.monotonic()   # a name that does not resolve is not waited for
    assert lifecycle.wait_for_store(("no-such-host.invalid", 29500), 30) is False and time.monotonic() - t0 < 10

    # 5. bursts: one 50 ms slot of the wall clock each, sent at the next mark
    # (every rank's at the same marks), nothing lost or reordered
    import time, zmq
    from ddptop import uplink
    ctx = zmq.Context()
    pull, router = ctx.socket(zmq.PULL), ctx.socket(zmq.ROUTER)
    pull.bind(f"ipc://{tmp}/tel"); router.bind(f"ipc://{tmp}/ctl")
    pull.setsockopt(zmq.RCVTIMEO, 2000)
    up = uplink.Uplink(f"ipc://{tmp}/ctl", f"ipc://{tmp}/tel", 3)
    time.sleep(0.1)           # let ipc connect (telemetry before that is lost by design)
    for i in range(150):
        up.send("step", dict(step=i))
        time.sleep(0.002)
    up.close()
    got, bursts = [], []
    while True:
        try:
            m = msgpack.unpackb(pull.recv(), raw=False)
        except zmq.Again:
            break
        # a slot's lone message travels as itself, without a burst's send time
        items = [msgpack.unpackb(f, raw=False) for f in m["m"]] if m["k"] == "burst" else [m]
        slots = {x["t"] // uplink.BURST_NS for x in items}
        assert len(slots) == 1, ("a burst over several slots", [x["t"] for x in items])
        bursts.append((slots.pop(), m["t"] // uplink.BURST_NS if m["k"] == "burst" else None))
        got += [x["step"] for x in items]
    assert got == list(range(150)), got
    assert len(bursts) >= 6 and all(a[0] < b[0] for a, b in zip(bursts, bursts[1:])), bursts
    assert all(sent is None or sent > slot for slot, sent in bursts[:-1]), ("a burst sent inside its slot", bursts)
    pull.close(0); router.close(0); ctx.term()

    # 5b. a script blocked in C after ddptop fell behind: the heartbeat thread hands the
    # telemetry stream's backlog to the socket every PUMP_S between beats, not one
    # socket-full a beat (what ddptop showed of such a rank was seconds old)
    import socket as so, threading
    from ddptop import beat
    srv = so.socket(so.AF_UNIX, so.SOCK_STREAM)
    srv.bind(os.path.join(tmp, "s.sock"))
    srv.listen(1)
    st = uplink.Stream(os.path.join(tmp, "s.sock"))
    conn, _ = srv.accept()
    frame = b"x" * 60000
    while not st.q:
        st.send(frame)
    for _ in range(20):
        st.send(frame)
    assert len(st.q) >= 20 * 60000, len(st.q)

    class BlockedUp:        # the uplink's lock and stream, and the two methods under test
        lock, stream = threading.Lock(), st
        backlog, write_backlog = uplink.Uplink.backlog, uplink.Uplink.write_backlog

    class Blocked:
        up, hello_sent = BlockedUp(), False
    got = []
    reader = threading.Thread(target=lambda: [got.append(len(b)) for b in iter(lambda: conn.recv(1 << 20), b"")])
    reader.start()
    stop = threading.Event()
    beats = threading.Thread(target=beat._loop, args=(Blocked(), stop, 0, None))
    beats.start()
    t0 = time.monotonic()
    while st.q and time.monotonic() - t0 < 0.6:       # within the first beat (BEAT_S)
        time.sleep(0.01)
    left = len(st.q)
    stop.set()
    beats.join()
    assert left == 0, f"{left} bytes still queued {time.monotonic() - t0:.2f} s in: the beat thread did not pump"
    st.sock.close()
    reader.join()
    conn.close()
    srv.close()

    # 7. the C++ hook only for the torch it was built for: another (2.x on the GPU machine)
    # gets the Python hook, decided before the extension is imported (a second libtorch)
    from ddptop import cxx_hook
    real = torch.__version__
    torch.__version__ = "2.11.0+cu130"
    try:
        assert cxx_hook.load({}) is None and "ddptop._hook" not in sys.modules, cxx_hook.why()
        assert "cxx" not in hooks or cxx_hook.why().endswith(", not 2.11.0+cu130"), cxx_hook.why()
    finally:
        torch.__version__ = real
    assert cxx_hook.load({"DDPTOP_PY_HOOK": "python"}) is None and cxx_hook.why() == "DDPTOP_PY_HOOK=python"
    assert ("cxx" in hooks) == (cxx_hook.load({}) is not None), (hooks, cxx_hook.why())

    # at 2 ranks and at 3 (1/3 is not exact: DDP's default multiplies by it as it fills the bucket)
    for world in (2, 3):
        res = {}
        for hooked in [""] + hooks:
            out = os.path.join(tmp, f"w{world}{hooked}.pt")
            mp.spawn(train, args=(world, hooked, os.path.join(tmp, f"store{world}{hooked}"), out), nprocs=world)
            res[hooked] = torch.load(out)
        for hooked in hooks:
            assert all(torch.equal(a, b) for a, b in zip(res[""][0], res[hooked][0])), \
                f"the {hooked} hook changed the weights ({world} ranks)"
        assert all(res[h][1] == res["python"][1] for h in hooks), ("the hooks differ", [res[h][1] for h in hooks])
        assert len(res["python"][1][1]) >= 1, res["python"][1]
    for hooked in hooks:
        out = os.path.join(tmp, f"fail{hooked}.txt")
        ps = [mp.get_context("spawn").Process(target=fail, args=(r, 2, hooked, os.path.join(tmp, f"fs{hooked}"), out))
              for r in range(2)]
        for p in ps:
            p.start()
        for p in ps:
            p.join(60)
        said = open(out).read() if os.path.exists(out) else "rank 0 wrote nothing"
        assert said.startswith("raised at 2 ok=True colls=[1, 2]: "), (hooked, said)
    out = os.path.join(tmp, "agree")
    ps = [mp.get_context("spawn").Process(target=agree, args=(r, 2, os.path.join(tmp, "fsagree"), out))
          for r in range(2)]
    for p in ps:
        p.start()
    for p in ps:
        p.join(60)
    got = [torch.load(f"{out}.{r}") for r in range(2)]
    assert got[0] == got[1], ("the ranks agreed at different steps", got)
    points, stopped = got[0]
    assert stopped is not None and 150 < stopped <= 150 + 2 * 64, got
    assert len(points) >= 4 and any(b - a > 1 for a, b in zip(points, points[1:])), points
    off = torch.load(f"{out}.off") if os.path.exists(f"{out}.off") else "rank 0 wrote nothing"
    assert off == (True, 1), ("rank 0: the commands are not off, once, after its peer died", off)
    print("PASS: frames, chunks, safetensors, bursts on the 50 ms grid, comm hook == DDP default "
          "(C++ and Python hooks alike), the agreement on ddptop's group")


if __name__ == "__main__":
    main()
PYEOF
"$PY" "$TMP/units.py" "$TMP" "$BUILD/tests/tool_wire" "$(py_hooks)" || die "adapter units"
echo "PASS: adapter units"
