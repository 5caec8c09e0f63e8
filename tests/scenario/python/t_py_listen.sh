# A torch script started by hand (torchrun's environment) under `ddptop
# listen`: the adapter finds ddptop from DDPTOP_CONNECT over tcp with the
# job's CURVE keys (DDPTOP_KEYS), trains to a clean end, and ddptop's
# summary names both ranks. Without the key file a rank refuses to start.
. tests/lib.sh
"$PY" -c 'import torch' 2>/dev/null || skip "no torch for $PY"
port=$(free_port 3) keys=$TMP/job.keys out=$TMP/listen.jsonl
export PYTHONPATH=$PWD/workers/python${PYTHONPATH:+:$PYTHONPATH}
rank_env() { echo RANK=$1 WORLD_SIZE=2 LOCAL_RANK=$1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 2)); }

env -u DDPTOP_CTL -u DDPTOP_TEL $(rank_env 0) DDPTOP_CONNECT=tcp://127.0.0.1:$port \
    "$PY" -m ddptop examples/ddp_basics.py >"$TMP/nokeys" 2>&1
rc=$?
[ $rc -eq 2 ] || { cat "$TMP/nokeys"; die "no key file: exit $rc, not 2"; }
grep -q "DDPTOP_CONNECT=tcp://127.0.0.1:$port needs the job's key file: set DDPTOP_KEYS=FILE" "$TMP/nokeys" \
    || { cat "$TMP/nokeys"; die "no key file: not said"; }

timeout 150 "$DDPTOP" listen tcp://127.0.0.1:$port --headless --json --keys "$keys" >"$out" 2>&1 &
pl=$!
CLEANUPS+=("kill -9 $pl")
wait_for 10 test -s "$keys" || { cat "$out"; die "listen wrote no key file"; }
pids=()
for r in 0 1; do
    env -u DDPTOP_CTL -u DDPTOP_TEL -u DDPTOP_JOB $(rank_env $r) DDPTOP_CONNECT=tcp://127.0.0.1:$port \
        DDPTOP_KEYS="$keys" timeout 120 "$PY" -m ddptop examples/ddp_basics.py --data synthetic --limit 512 --epochs 1 \
        --out "$TMP/model.pt" >"$TMP/w$r" 2>&1 &
    pids+=($!)
    CLEANUPS+=("kill -9 $!")
done
for r in 0 1; do wait ${pids[$r]}; rw=$?; [ $rw -eq 0 ] || { cat "$TMP/w$r" "$out"; die "rank $r exited $rw"; }; done
wait $pl; rl=$?
cat "$out"
[ $rl -eq 0 ] || die "ddptop listen exited $rl"
grep -q '"verdict":"job done: all 2 ranks ended cleanly"' "$out" || die "no clean verdict"
for r in 0 1; do
    grep -q "\"text\":\"rank $r hello pid [0-9]* on .* (cpu, gloo)\"" "$out" || die "no hello from rank $r"
    grep -q "\"r\":$r,\"state\":\"exited\",\"how\":\"exit 0\",\"step\":4," "$out" || die "rank $r: not 4 steps, exit 0"
done
echo "PASS: ddptop listen with a torch script over tcp and CURVE"
