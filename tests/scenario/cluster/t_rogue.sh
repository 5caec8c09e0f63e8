# CURVE keeps outsiders out: while a job runs over tcp (ddptop listen, two
# workers), a rogue client with no keys, with fresh keys for everything, and
# with its own key pair but the job's real server key (only the ZAP check
# stops that one) tries for 2 s each to attach with control, stop and abort
# the job, write to the store and inject telemetry (a loss of 12345 and an
# error phase for rank 0). Nothing comes back, nothing shows, the job keeps
# training. The positive control: the same tool with the job's own keys gets
# answers and its stop ends the job cleanly.
. tests/lib.sh
case $BUILD in /*) W=$BUILD/ddptop-worker; ROGUE=$BUILD/tests/tool_rogue;; *) W=$PWD/$BUILD/ddptop-worker; ROGUE=$PWD/$BUILD/tests/tool_rogue;; esac
port=$(free_port 8)
KEYS=$TMP/job.keys EP=tcp://127.0.0.1:$port out=$TMP/listen.out
"$DDPTOP" listen $EP --headless --keys "$KEYS" >"$out" 2>&1 &
pl=$!
CLEANUPS+=("kill -9 $pl")
wait_for 10 test -s "$KEYS" || { cat "$out"; die "listen wrote no key file"; }
pids=()
for r in 0 1; do
    env RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 DDPTOP_CONNECT=$EP DDPTOP_KEYS="$KEYS" \
        "$W" --dataset synthetic --model mlp:64,64,10 --epochs 100000 --batch-size 8 --no-final-ckpt \
        >"$TMP/w$r" 2>&1 &
    pids+=($!)
    CLEANUPS+=("kill -9 $!")
done
wait_for 15 grep -q "broadcast -> train" "$out" || { cat "$out"; die "the job did not start training"; }
for mode in nokeys wrongserver "stranger $KEYS"; do
    res=$("$ROGUE" $EP $mode 2 2>&1) || die "tool_rogue $mode failed: $res"
    echo "rogue $mode: $res"
    case $res in *"replies=0"*) ;; *) die "rogue ($mode) got answers: $res";; esac
done
sleep 0.5
kill -0 $pl 2>/dev/null || { cat "$out"; die "ddptop ended while outsiders knocked"; }
for p in "${pids[@]}"; do kill -0 $p 2>/dev/null || die "a worker ended while outsiders knocked"; done
grep -q "12345" "$out" && die "injected telemetry reached ddptop"
grep -qi "viewer\|destroy requested\|abort" "$out" && die "an outsider's command reached ddptop"
grep -q "r0 error" "$out" && die "an injected error phase reached ddptop"

# frames far above the decoder's limit, even from a keyholder, neither end
# ddptop nor stay in its memory (ZMQ_MAXMSGSIZE drops such a peer at the
# frame's header; a ddptop that reads fast enough also frees them at once,
# so this checks the outcome, not which of the two did it)
if "$PY" -c "import zmq; assert zmq.has('curve')" 2>/dev/null; then
    "$PY" - "$KEYS" $((port + 1)) <<'PYEOF' || die "could not send the oversized frames"
import sys, time, zmq
k = {}
for line in open(sys.argv[1]).read().splitlines()[1:]:
    name, val = line.split(); k[name] = val.encode()
s = zmq.Context().socket(zmq.PUSH)
s.setsockopt(zmq.LINGER, 2000)
s.curve_serverkey = k["server-public"]; s.curve_publickey = k["client-public"]; s.curve_secretkey = k["client-secret"]
s.connect("tcp://127.0.0.1:%s" % sys.argv[2])
for _ in range(4):
    s.send(b"\x00" * (48 << 20))
time.sleep(1)
PYEOF
    rss=$(awk '/VmRSS/ {print $2}' /proc/$pl/status)
    echo "ddptop's RSS after 4 x 48 MB frames: $rss kB"
    [ "$rss" -lt 100000 ] || die "ddptop holds $rss kB after oversized frames"
    kill -0 $pl 2>/dev/null || die "oversized frames ended ddptop"
fi

# positive control: the job's own keys get through, and a stop works
res=$("$ROGUE" $EP jobkeys "$KEYS" 2 2>&1)
echo "jobkeys: $res"
case $res in *"replies=0"*) die "the job's own keys got no answer: $res";; esac
wait $pl; rl=$?
tail -n 6 "$out"
grep -q "destroy requested by viewer" "$out" || die "the keyholder's stop did not reach ddptop"
for p in "${pids[@]}"; do wait $p; done
wait_for 5 no_workers || die "workers left running: $(our_workers)"
echo "PASS: outsiders without the job's keys change nothing; the job's keys work"
