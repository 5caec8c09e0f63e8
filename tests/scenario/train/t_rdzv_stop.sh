# kill -9 of rank 0 during the rendezvous: ddptop asks the others to stop,
# and a rank waiting in the rendezvous store acts on it at once (exit 0,
# phase stopping) instead of waiting out the store timeout or ddptop's stop
# grace. Driven through tests/tools/fake_front.py, which never answers
# rank 0's store requests, so rank 1 is surely waiting for rank 0's key.
. tests/lib.sh
"$PY" -c 'import zmq, msgpack' 2>/dev/null || skip "skip: $PY lacks zmq or msgpack"
case $BUILD in /*) W=$BUILD/ddptop-worker;; *) W=$PWD/$BUILD/ddptop-worker;; esac
"$PY" - "$W" "$TMP" <<'PYEOF' || die "rendezvous stop scenario failed"
import sys, time
sys.path.insert(0, "tests/tools")
from fake_front import Front
worker, tmp = sys.argv[1], sys.argv[2]

class Front0Stuck(Front):
    def on_ctl(self, ident, m):
        if ident.split(b".")[0] == b"rank-0" and m.get("k") in ("set", "get", "wait"):
            return  # rank 0 never gets through the rendezvous
        super().on_ctl(ident, m)

# --timeout 60: the store waits would last a minute without the stop.
f = Front0Stuck(worker, 2, ["--dataset", "synthetic", "--model", "mlp:20,16,3", "--timeout", "60"], log_dir=tmp)
def fail(why):
    print("FAIL:", why); print(f.logs()); f.finish(1); raise SystemExit(1)
if not f.wait_until(lambda f: "rendezvous" in f.phases(0) and "rendezvous" in f.phases(1), 30):
    fail("ranks did not reach the rendezvous")
f.pump(1.0)                      # rank 1 is now waiting for rank 0's key
f.procs[0].kill()
f.cmd(1, "stop", 1)
t0 = time.monotonic()
f.wait_until(lambda f: 1 in f.codes, 30)
took = time.monotonic() - t0
codes = f.finish(1)
if codes[1] != 0:
    fail(f"rank 1 exit {codes[1]}, want 0")
if took > 5:
    fail(f"rank 1 took {took:.1f} s to act on the stop in the rendezvous")
if "stopping" not in f.phases(1):
    fail(f"rank 1 phases {f.phases(1)}: no stopping")
print(f"rank 1 left the rendezvous {took:.2f} s after the stop")
PYEOF
wait_for 5 no_workers || die "workers left: $(our_workers)"
