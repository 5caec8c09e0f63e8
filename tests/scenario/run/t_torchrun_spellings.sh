# torchrun's spellings of ddptop's run options, as tutorials type them:
# "--name=value", '_' for '-' (--nproc_per_node=3, --max_restarts=0,
# --no_python: torch 1.13's torchrun knows only these),
# --standalone (one node: ddptop's default) and -n auto|cpu (torchrun's
# --nproc-per-node words). Each job runs as the plain spelling would, and a
# spelling torchrun would refuse is refused in one line with exit 2.
. tests/lib.sh
TRAIN=(--dataset synthetic --model mlp:8,8,2 --steps 3 --no-final-ckpt --ckpt-dir "$TMP/ck")
ranks_of() { # ddptop run args...: how many ranks ended cleanly
    timeout 120 "$DDPTOP" run --headless "$@" -- "${TRAIN[@]}" >"$TMP/out" 2>&1 ||
        { cat "$TMP/out"; die "ddptop run $* failed"; }
    grep -c '^rank [0-9]*: exit 0' "$TMP/out"
}
[ "$(ranks_of --nproc_per_node=3)" = 3 ] || die "--nproc_per_node=3 did not run 3 ranks"
[ "$(ranks_of --nproc-per-node=3 --max_restarts=0 --stop_grace=5)" = 3 ] || die "--nproc-per-node=3 with = forms"
[ "$(ranks_of --standalone --nproc_per_node 2)" = 2 ] || die "--standalone"
[ "$(ranks_of -n auto)" = "$(ranks_of)" ] || die "-n auto is not the default"
# torch 1.13's torchrun knows only the '_' forms: --no_python too
timeout 60 "$DDPTOP" run -n 2 --headless --no_python /bin/sh -c 'exit 0' >"$TMP/out" 2>&1 ||
    { cat "$TMP/out"; die "--no_python /bin/sh failed"; }
grep -q "job done: all 2 ranks ended cleanly" "$TMP/out" || { cat "$TMP/out"; die "--no_python: no clean verdict"; }
# --master_port=P: every rank's MASTER_PORT; a port in use is named before launch
port=$(free_port)
timeout 60 "$DDPTOP" run -n 2 --headless --master_port=$port --no-python /bin/sh -c 'echo "$MASTER_PORT" >"$0.$RANK"' \
    "$TMP/mp" >"$TMP/out" 2>&1 || { cat "$TMP/out"; die "--master_port failed"; }
[ "$(cat "$TMP/mp.0" "$TMP/mp.1")" = "$port
$port" ] || die "MASTER_PORT $(cat "$TMP"/mp.*), want $port on both ranks"
"$PY" -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(30)' "$port" &
holder=$!
CLEANUPS+=("kill $holder")
wait_for 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null || die "the port holder did not listen"
timeout 60 "$DDPTOP" run -n 2 --headless --master-port "$port" -- "${TRAIN[@]}" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "master-port $port: not free" "$TMP/err" ||
    die "a busy --master-port: exit $rc: $(cat "$TMP/err")"
kill $holder 2>/dev/null
cores=$(getconf _NPROCESSORS_ONLN)
[ "$cores" -le 8 ] && { [ "$(ranks_of -n cpu)" = "$cores" ] || die "-n cpu is not one rank per core ($cores)"; }
check() { # description cmd...: exit 2 and one line
    "${@:2}" >"$TMP/out" 2>"$TMP/err"; local rc=$?
    [ $rc -eq 2 ] || die "$1: exit $rc, want 2: $(cat "$TMP/err")"
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || die "$1: not one line: $(cat "$TMP/err")"
    echo "ok: $1 -> $(cat "$TMP/err")"
}
check "a flag with a value" "$DDPTOP" run --headless=1
check "--standalone with a value" "$DDPTOP" run --standalone=yes
check "--no_python with a value" "$DDPTOP" run --no_python=1 /bin/true
check "--standalone with several nodes" "$DDPTOP" run --standalone --nnodes 2 --rdzv 127.0.0.1:9
check "an empty value" "$DDPTOP" run --nproc_per_node= --headless
check "a word -n does not know" "$DDPTOP" run -n many --headless
grep -q -- "-n many: expected a count of ranks (1 to 256) or auto, gpu, cpu" "$TMP/err" || die "-n many: $(cat "$TMP/err")"
check "--master-port with several nodes" "$DDPTOP" run --master-port 29500 --nnodes 2 --rdzv 127.0.0.1:9
check "--master-port 0" "$DDPTOP" run --master-port 0
check "an unknown option with =" "$DDPTOP" run --bogus_opt=3
grep -q 'unknown option "--bogus_opt=3"' "$TMP/err" || die "the unknown option not named as typed: $(cat "$TMP/err")"
wait_for 5 no_workers || die "workers left: $(our_workers)"
echo "torchrun's spellings run as ddptop's"
