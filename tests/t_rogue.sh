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
