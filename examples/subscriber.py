#!/usr/bin/env python3
"""Print per-rank loss live from `ddptop run --publish ENDPOINT`.

    ddptop run --headless --publish ipc:///tmp/ddptop.pub -- --steps 200 &
    python3 examples/subscriber.py ipc:///tmp/ddptop.pub

Every frame on the pub socket is one protocol v1 message: a msgpack map with
string keys, "v" (protocol version) and "k" (kind) first, then "r" (rank) and
"t" (wall-clock ns); docs/PROTOCOL.md lists every kind and key. There is no
topic: subscribe to everything ("") and skip the kinds you do not need.
A "burst" frame carries several messages of one rank, each a whole frame
of its own in the list under "m": unpack them one by one (messages()).

One line per step: rank, epoch, step, loss. A subscriber more than 4,900
frames behind loses frames (docs/RECORDING.md, "The live stream"): a rank's
step numbers that jump ahead say so on stderr ("rank 1: step 7 missing").
Exits 0 once every rank has said
bye (the job's world size comes from the ranks' hello messages, or --world),
or quietly on Ctrl-C. Needs pyzmq and msgpack (Debian: python3-zmq,
python3-msgpack).

A --publish endpoint beyond loopback is a CURVE server (docs/CLUSTER.md,
"Keys"): give the job's key file with --keys FILE (mode 0600, as ddptop
wrote it); the subscriber presents the job's client keys.

    ddptop run --headless --keys job.keys --publish tcp://0.0.0.0:5555 -- --steps 200 &
    python3 examples/subscriber.py --keys job.keys tcp://HOST:5555
"""
import argparse
import os
import signal
import sys
import time

import msgpack
import zmq

PROTO_VERSION = 1
KEYS_MAGIC = "ddptop-keys v1"


def refuse(why):
    """One line naming the problem, exit 2 (a usage error, as ddptop's)."""
    print(f"subscriber.py: {why}", file=sys.stderr)
    sys.exit(2)


def read_keys(path):
    """The job's key file: {"server-public": Z85, "client-public": ..., ...}.
    Refused in one line, exit 2, when it cannot be used, and when group or
    others can read it, as ddptop refuses it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        refuse(f"cannot open key file {path}: {e.strerror}")
    try:
        if os.fstat(fd).st_mode & 0o077:
            refuse(f"key file {path} is readable by others: chmod 600 it")
        text = os.read(fd, 4096).decode("ascii", "replace")
    finally:
        os.close(fd)
    lines = text.splitlines()
    if not lines or lines[0] != KEYS_MAGIC:
        refuse(f"{path} is not a ddptop key file")
    keys = dict(ln.split(None, 1) for ln in lines[1:] if len(ln.split()) == 2)
    if any(len(keys.get(k, "")) != 40 for k in ("server-public", "client-public", "client-secret")):
        refuse(f"key file {path} is damaged: expected four Z85 keys")
    return keys


def messages(frame):
    """The protocol v1 messages in one frame: itself, or what a burst carries
    (only those of the burst's rank, as ddptop checks them). Anything that is
    not msgpack or not a map is skipped."""
    try:
        m = msgpack.unpackb(frame, raw=False)
    except Exception:
        return []                             # not msgpack: not ours to read
    if not isinstance(m, dict):
        return []
    if m.get("v") != PROTO_VERSION or m.get("k") != "burst":
        return [m]
    out = []
    for inner in m.get("m") or []:
        try:
            im = msgpack.unpackb(inner, raw=False) if isinstance(inner, bytes) else None
        except Exception:
            im = None
        if isinstance(im, dict) and im.get("k") != "burst" and im.get("r") == m.get("r"):
            out.append(im)
    return out


def main():
    ap = argparse.ArgumentParser(description="Print per-rank loss from a ddptop --publish endpoint.")
    ap.add_argument("endpoint", help="the --publish endpoint, e.g. ipc:///tmp/ddptop.pub or tcp://127.0.0.1:5555")
    ap.add_argument("--world", type=int, default=0,
                    help="ranks to wait for (default: the world size the ranks' hello messages give)")
    ap.add_argument("--timeout", type=float, default=0,
                    help="give up (exit 1) after this many seconds without a message (default: wait forever)")
    ap.add_argument("--keys", metavar="FILE",
                    help="the job's key file, for a --publish endpoint that is a CURVE server (tcp:// beyond loopback)")
    args = ap.parse_args()
    keys = read_keys(args.keys) if args.keys else None
    if keys and not zmq.has("curve"):
        refuse("this pyzmq's libzmq has no CURVE: --keys cannot be used")

    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    if keys:                                  # CURVE options go before connect
        sub.setsockopt(zmq.CURVE_SERVERKEY, keys["server-public"].encode())
        sub.setsockopt(zmq.CURVE_PUBLICKEY, keys["client-public"].encode())
        sub.setsockopt(zmq.CURVE_SECRETKEY, keys["client-secret"].encode())
    sub.setsockopt(zmq.SUBSCRIBE, b"")      # no topics: every frame
    # started before ddptop binds, it tries again every 10 ms (ZeroMQ's default
    # is 100): a short job's first frames are gone before a late subscription
    sub.setsockopt(zmq.RECONNECT_IVL, 10)
    sub.connect(args.endpoint)
    print(f"listening on {args.endpoint}", file=sys.stderr, flush=True)

    state = {"world": args.world, "seen": set(), "byes": set(), "warned_version": False, "steps": {}}
    last = time.monotonic()
    poller = zmq.Poller()
    poller.register(sub, zmq.POLLIN)
    try:
        while True:
            # Poll with a timeout so Ctrl-C and --timeout are noticed promptly.
            if not poller.poll(200):
                if args.timeout and time.monotonic() - last > args.timeout:
                    print(f"no message for {args.timeout:g} s; giving up", file=sys.stderr)
                    return 1
                continue
            frame = sub.recv()
            last = time.monotonic()
            for m in messages(frame):
                if show(m, args, state):
                    return 0
    except KeyboardInterrupt:
        return 0
    finally:
        # A second Ctrl-C while closing must not print a traceback either.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sub.close(linger=0)
        ctx.term()


def show(m, args, state):
    """Print one message; True once every rank has said bye."""
    seen, byes = state["seen"], state["byes"]
    if m.get("v") != PROTO_VERSION:
        if not state["warned_version"]:
            print(f"skipping protocol version {m.get('v')} frames (this script reads {PROTO_VERSION})",
                  file=sys.stderr)
            state["warned_version"] = True
        return False
    kind, rank = m.get("k"), m.get("r", -1)
    if not isinstance(rank, int) or rank < 0:
        return False                          # ddptop's own messages (none today)
    if kind == "hello":
        if rank not in seen:
            print(f"rank {rank} hello: {m.get('host', '?')} {m.get('device', '?')} {m.get('backend', '?')}, "
                  f"world {m.get('world', '?')}", flush=True)
        if not args.world and isinstance(m.get("world"), int):
            state["world"] = max(state["world"], m["world"])
        seen.add(rank)
    elif kind == "step":
        seen.add(rank)
        step, last = m.get("step"), state["steps"].get(rank)
        if isinstance(step, int) and isinstance(last, int) and step > last + 1:
            gap = f"step {last + 1}" if step == last + 2 else f"steps {last + 1}-{step - 1}"
            print(f"rank {rank}: {gap} missing (lost on the way: this subscriber fell behind, "
                  f"or the rank dropped them; see its 'drops')", file=sys.stderr, flush=True)
        state["steps"][rank] = step
        print(f"rank {rank}  epoch {m.get('epoch')}  step {m.get('step')}  loss {m.get('loss', float('nan')):.6g}",
              flush=True)
    elif kind == "bye":
        seen.add(rank)
        byes.add(rank)
        print(f"rank {rank} bye (status {m.get('status')}) after step {m.get('step')}", flush=True)
        need = set(range(state["world"])) if state["world"] else seen
        if need <= byes:
            print(f"all {len(need)} rank{'s' if len(need) != 1 else ''} said bye", flush=True)
            return True
    return False


if __name__ == "__main__":
    sys.exit(main())
