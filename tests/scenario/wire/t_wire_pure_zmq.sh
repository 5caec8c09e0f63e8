#!/usr/bin/env bash
# t_wire_pure_zmq.sh — the adapter's ZeroMQ without pyzmq (workers/python/
# ddptop/_zmq.py: ctypes on ddptop's libzmq) against pyzmq peers, as ddptop's
# sockets: a DEALER's routing id and frames both ways through a ROUTER,
# poll and EVENTS saying what waits (and nothing when nothing does), a PUSH
# that drops with Again at its high-water mark instead of waiting, a CURVE
# client that reaches a CURVE server with the right key and never with a
# wrong one, close and term without hanging. And which file it loads: the
# very libzmq its parent process has mapped (a copy in a directory the
# loader does not search), DDPTOP_LIBZMQ when set, and an OSError naming the
# file when that cannot be loaded.
# Env: PY (python with pyzmq, the peer). Exit 0 pass, 77 skip, else fail.
set -u
PY=${PY:-python3}
if ! "$PY" -c 'import zmq' 2>/dev/null; then
    echo "skip: $PY cannot import zmq (the peer)"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_wire_pure_zmq.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
PYTHONPATH=workers/python timeout 120 "$PY" - "$tmp" <<'PYEOF' || { echo "FAIL: the adapter's ZeroMQ"; exit 1; }
import os, shutil, subprocess, sys, time
import zmq
from ddptop import _zmq as Z

tmp = sys.argv[1]
failures = []
def check(cond, what):
    if not cond:
        failures.append(what)

ctx = zmq.Context()
# DEALER <-> ROUTER over ipc: routing id, both ways, poll and EVENTS
router = ctx.socket(zmq.ROUTER)
router.bind(f"ipc://{tmp}/ctl")
zc = Z.Context()
dealer = zc.socket(Z.DEALER)
dealer.setsockopt(Z.ROUTING_ID, b"rank-1.42.abcd")
dealer.setsockopt(Z.LINGER, 0)
dealer.connect(f"ipc://{tmp}/ctl")
check(dealer.getsockopt(Z.LINGER) == 0, "LINGER read back")
check(not dealer.getsockopt(Z.EVENTS) & Z.POLLIN and dealer.poll(50) == 0, "something to read before anything came")
try:
    dealer.recv(Z.DONTWAIT)
    check(False, "recv with nothing there did not raise Again")
except Z.Again:
    pass
dealer.send(b"hello \x00 bytes")
check(router.poll(5000), "the ROUTER heard nothing")
ident, frame = router.recv_multipart()
check(ident == b"rank-1.42.abcd" and frame == b"hello \x00 bytes", f"ROUTER got {ident!r} {frame!r}")
big = os.urandom(3 << 20)
router.send_multipart([ident, big])
check(dealer.poll(5000) & Z.POLLIN, "poll did not see the reply")
check(dealer.getsockopt(Z.EVENTS) & Z.POLLIN, "EVENTS did not see the reply")
check(dealer.recv(Z.DONTWAIT) == big, "a 3 MiB frame came back otherwise")

# PUSH with nobody pulling: DONTWAIT raises Again at the high-water mark, never waits
push = zc.socket(Z.PUSH)
push.setsockopt(Z.SNDHWM, 10)
push.setsockopt(Z.LINGER, 0)
push.connect(f"ipc://{tmp}/nobody")
t0 = time.monotonic()
sent = 0
try:
    for _ in range(100):
        push.send(b"x", Z.DONTWAIT)
        sent += 1
    check(False, "100 frames into a PUSH of HWM 10 with no peer: no Again")
except Z.Again:
    pass
check(sent <= 20 and time.monotonic() - t0 < 1, f"sent {sent} before Again, {time.monotonic() - t0:.2f} s")
pull = ctx.socket(zmq.PULL)
pull.bind(f"ipc://{tmp}/tel")
push2 = zc.socket(Z.PUSH)
push2.connect(f"ipc://{tmp}/tel")
push2.send(b"tel frame")
check(pull.poll(5000) and pull.recv() == b"tel frame", "PUSH -> PULL")

# CURVE over tcp: the right server key gets through, a wrong one never
srv_pub, srv_sec = zmq.curve_keypair()
cli_pub, cli_sec = zmq.curve_keypair()
other_pub, _ = zmq.curve_keypair()
server = ctx.socket(zmq.ROUTER)
server.curve_server = True
server.curve_publickey, server.curve_secretkey = srv_pub, srv_sec
port = server.bind_to_random_port("tcp://127.0.0.1")
def client(server_key):
    s = zc.socket(Z.DEALER)
    s.setsockopt(Z.LINGER, 0)
    s.setsockopt(Z.CURVE_SERVERKEY, server_key)
    s.setsockopt(Z.CURVE_PUBLICKEY, cli_pub)
    s.setsockopt(Z.CURVE_SECRETKEY, cli_sec)
    s.connect(f"tcp://127.0.0.1:{port}")
    return s
bad = client(other_pub)
bad.send(b"wrong key")
check(not server.poll(1000), "a client with the wrong server key got through")
good = client(srv_pub)
good.send(b"right key")
check(server.poll(5000) and server.recv_multipart()[1] == b"right key", "CURVE client with the right key")
check(Z.has(b"curve") and Z.has(b"ipc"), "zmq_has")

t0 = time.monotonic()
for s in (dealer, push, push2, bad, good):
    s.close()
zc.term()
check(time.monotonic() - t0 < 5, "close and term took long")
for s in (router, pull, server):
    s.close()
ctx.term()

# which file: the parent's copy, in a directory the loader does not search
copy = os.path.join(tmp, "lib", "libzmq.so.5")
os.makedirs(os.path.dirname(copy))
src = [l.split(None, 5)[5].strip() for l in open("/proc/self/maps") if "/libzmq.so" in l][0]
shutil.copy(src, copy)
probe = "import sys; sys.path.insert(0, 'workers/python'); from ddptop import _zmq; _zmq.load(); print(_zmq.path)"
parent = ("import ctypes, subprocess, sys; ctypes.CDLL(sys.argv[1]); "
          "sys.stdout.write(subprocess.run([sys.executable, '-c', sys.argv[2]], capture_output=True, text=True).stdout)")
env = {k: v for k, v in os.environ.items() if k != "DDPTOP_LIBZMQ"}
got = subprocess.run([sys.executable, "-c", parent, copy, probe], capture_output=True, text=True, env=env).stdout.strip()
check(got == copy, f"loaded {got!r}, not the parent's {copy}")
got = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                     env=dict(env, DDPTOP_LIBZMQ=copy)).stdout.strip()
check(got == copy, f"DDPTOP_LIBZMQ: loaded {got!r}")
p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                   env=dict(env, DDPTOP_LIBZMQ=f"{tmp}/none.so"))
check(p.returncode != 0 and "OSError" in p.stderr and f"{tmp}/none.so" in p.stderr, f"a missing library: {p.stderr[-200:]}")

if failures:
    for f in failures:
        print("FAIL:", f)
    sys.exit(1)
print(f"_zmq on libzmq {Z.version()}: DEALER/ROUTER, PUSH/PULL, HWM drops, CURVE; the parent's library file")
PYEOF
echo "PASS: the adapter's ZeroMQ through ctypes"
