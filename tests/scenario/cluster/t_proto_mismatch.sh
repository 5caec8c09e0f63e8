# A node speaking another ddptop protocol version is refused, and both
# versions are named, whichever side is newer: a Python agent (pyzmq with
# CURVE and the job's keys, msgpack) joins node 0 with "v": 2, then a
# Python "node 0" answers a real agent with "v": 2.
. tests/lib.sh
"$PY" -c "import zmq, msgpack; assert zmq.has('curve')" 2>/dev/null || skip "SKIP: pyzmq with CURVE or msgpack missing"
port=$(free_port 8)
KEYS=$TMP/job.keys
TRAIN="--dataset synthetic --model mlp:20,16,3 --steps 30 --batch-size 8"
cat >"$TMP/keys.py" <<'PYEOF'
def load(path):
    k = {}
    for line in open(path).read().splitlines()[1:]:
        name, val = line.split()
        k[name] = val.encode()
    return k
PYEOF

# A. node 0 (real) refuses a v2 agent
"$DDPTOP" run --headless -n 1 --nnodes 2 --node-rank 0 --rdzv 127.0.0.1:$port --keys "$KEYS" --rdzv-timeout 6 \
    -- $TRAIN >"$TMP/a.out" 2>&1 &
pa=$!
CLEANUPS+=("kill -9 $pa")
wait_for 10 test -s "$KEYS" || die "node 0 wrote no key file"
"$PY" - "$KEYS" $port "$TMP" >"$TMP/py_a.out" 2>&1 <<'PYEOF' || { cat "$TMP/py_a.out"; die "the Python agent failed"; }
import sys, time, zmq, msgpack
sys.path.insert(0, sys.argv[3]); import keys
k = keys.load(sys.argv[1])
s = zmq.Context().socket(zmq.DEALER)
s.setsockopt(zmq.ROUTING_ID, b"node-1"); s.setsockopt(zmq.LINGER, 0)
s.curve_serverkey = k["server-public"]; s.curve_publickey = k["client-public"]; s.curve_secretkey = k["client-secret"]
s.connect("tcp://127.0.0.1:%s" % sys.argv[2])
s.send(msgpack.packb({"v": 2, "k": "node", "op": "join", "node": 1, "nnodes": 2, "nproc": 1, "host": "py", "pid": 1}))
if not s.poll(5000): sys.exit("no answer from node 0")
m = msgpack.unpackb(s.recv(), raw=False)
print(m)
assert m["v"] == 1 and m["k"] == "node" and m["op"] == "refused", m
assert "protocol version 2" in m["text"] and "protocol version 1" in m["text"], m["text"]
PYEOF
cat "$TMP/py_a.out"
wait $pa; ra=$?
cat "$TMP/a.out"
[ $ra -eq 1 ] || die "node 0 exited $ra (want 1: the rendezvous could not complete)"
grep -q "node 1 refused: node 1 speaks another ddptop protocol (protocol version 2, this build speaks 1); node 0 speaks protocol version 1" \
    "$TMP/a.out" || die "node 0 did not name both versions"

# B. a real agent refuses a v2 node 0
port=$((port + 2))
"$PY" - "$KEYS" $port "$TMP" >"$TMP/py_b.out" 2>&1 <<'PYEOF' &
import sys, zmq, msgpack
sys.path.insert(0, sys.argv[3]); import keys
k = keys.load(sys.argv[1])
s = zmq.Context().socket(zmq.ROUTER)
s.setsockopt(zmq.LINGER, 0)
s.curve_server = True; s.curve_secretkey = k["server-secret"]
s.bind("tcp://127.0.0.1:%s" % sys.argv[2])
if not s.poll(10000): sys.exit("no join came")
ident, body = s.recv_multipart()
print("join from", ident, msgpack.unpackb(body, raw=False)["op"])
s.send_multipart([ident, msgpack.packb({"v": 2, "k": "node", "op": "launch", "job": "x"})])
s.poll(3000)
PYEOF
pp=$!
sleep 0.5
"$DDPTOP" run -n 1 --nnodes 2 --node-rank 1 --rdzv 127.0.0.1:$port --keys "$KEYS" --rdzv-timeout 10 -- $TRAIN \
    >"$TMP/b.out" 2>&1
rb=$?
wait $pp
cat "$TMP/py_b.out" "$TMP/b.out"
[ $rb -eq 2 ] || die "the agent exited $rb (want 2)"
grep -q "speaks another ddptop protocol: protocol version 2, this build speaks 1 (this node speaks protocol version 1)" \
    "$TMP/b.out" || die "the agent did not name both versions"
wait_for 5 no_workers || die "workers left running: $(our_workers)"
echo "PASS: protocol versions are checked between nodes, both named"
