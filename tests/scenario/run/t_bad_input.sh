# Bad input gets one line naming the problem and exit 2, before anything runs.
. tests/lib.sh
check() { # expected-exit description cmd...
    local want=$1 what=$2; shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
    [ $rc -eq "$want" ] || die "$what: exit $rc, want $want: $(cat "$TMP/err")"
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || die "$what: error is not one line: $(cat "$TMP/err")"
    echo "ok: $what -> $(cat "$TMP/err")"
}
check 2 "unknown ddptop option" "$DDPTOP" run --bogus
check 2 "zero ranks" "$DDPTOP" run -n 0 --headless
check 2 "ranks in hex" "$DDPTOP" run -n 0x10 --headless -- --dataset synthetic --model mlp:20,3 --steps 1
check 2 "a fraction of a rank" "$DDPTOP" run -n 2.5 --headless -- --dataset synthetic --model mlp:20,3 --steps 1
check 2 "--max-restarts with an exponent" "$DDPTOP" run --max-restarts 1e1 --headless -- --dataset synthetic --model mlp:20,3 --steps 1
check 2 "unknown trainer option" "$DDPTOP" run --headless -- --bogus
check 2 "bad model" "$DDPTOP" run --headless -- --model mlp:10
check 2 "bad lr" "$DDPTOP" run --headless -- --lr abc
check 2 "json without headless" "$DDPTOP" run --json
check 2 "missing init file" "$DDPTOP" run --headless -- --init-from "$TMP/nope.safetensors"
printf 'garbage' >"$TMP/bad.safetensors"
check 2 "corrupt init file" "$DDPTOP" run --headless -- --init-from "$TMP/bad.safetensors"
check 2 "fashion-mnist with a model that does not fit" "$DDPTOP" run --headless -- --dataset fashion-mnist --model mlp:20,3
check 2 "missing dataset dir" "$DDPTOP" run --headless -- --dataset fashion-mnist --data-dir "$TMP/none"
check 2 "unknown command" "$DDPTOP" frobnicate
# --log-dir where no log can be written: refused, not "logs in DIR" and none
touch "$TMP/afile"
check 2 "--log-dir a file" "$DDPTOP" run --headless --log-dir "$TMP/afile" -- --dataset synthetic --model mlp:20,3 --steps 1
check 2 "--log-dir in /proc" "$DDPTOP" run --headless --log-dir /proc -- --dataset synthetic --model mlp:20,3 --steps 1
# beyond one machine (docs/CLUSTER.md)
check 2 "listen without endpoint" "$DDPTOP" listen
check 2 "listen on an unknown transport" "$DDPTOP" listen foo://x --headless
check 2 "listen on port 99999" "$DDPTOP" listen tcp://127.0.0.1:99999 --headless
# what only a launch uses is refused by listen, not dropped without a word
check 2 "listen with trainer options" timeout 20 "$DDPTOP" listen "ipc://$TMP/l.sock" --headless -- --steps 5
check 2 "listen with -n" timeout 20 "$DDPTOP" listen "ipc://$TMP/l.sock" --headless -n 4
check 2 "listen with --max-restarts" timeout 20 "$DDPTOP" listen "ipc://$TMP/l.sock" --headless --max-restarts 2
check 2 "listen on ipc outside a private dir" "$DDPTOP" listen ipc:///tmp/ddptop-open.sock --headless
# an ipc:// path already taken: a user's file stays, a live listener keeps its endpoint
mkdir -m 700 "$TMP/priv"; printf 'precious\n' >"$TMP/priv/data.txt"
check 2 "listen onto a file" timeout 20 "$DDPTOP" listen "ipc://$TMP/priv/data.txt" --headless
[ "$(cat "$TMP/priv/data.txt")" = precious ] || die "listen replaced $TMP/priv/data.txt"
check 2 "--publish onto a file" "$DDPTOP" run --headless --publish "ipc://$TMP/priv/data.txt" -- --dataset synthetic --model mlp:20,3 --steps 1
[ "$(cat "$TMP/priv/data.txt")" = precious ] || die "--publish replaced $TMP/priv/data.txt"
"$DDPTOP" listen "ipc://$TMP/priv/ep" --headless >"$TMP/l1.out" 2>&1 &
l1=$!
CLEANUPS+=("kill $l1")
wait_for 20 test -S "$TMP/priv/ep.tel" || die "the first listen did not bind: $(cat "$TMP/l1.out")"
ino=$(stat -c %i "$TMP/priv/ep")
check 2 "a second listen on one endpoint" timeout 20 "$DDPTOP" listen "ipc://$TMP/priv/ep" --headless
[ "$(stat -c %i "$TMP/priv/ep")" = "$ino" ] && kill -0 $l1 || die "the second listen took the first one's endpoint"
kill -INT $l1
wait_for 20 sh -c "! kill -0 $l1 2>/dev/null" || die "listen did not leave on Ctrl-C"
# a listen that leaves removes its own socket files, and only its own
[ ! -e "$TMP/priv/ep" ] && [ ! -e "$TMP/priv/ep.tel" ] || die "listen left its sockets: $(ls "$TMP/priv")"
printf 'precious\n' >"$TMP/priv/p.tel"
check 2 "listen whose telemetry path is a file" timeout 20 "$DDPTOP" listen "ipc://$TMP/priv/p" --headless
[ ! -e "$TMP/priv/p" ] && [ "$(cat "$TMP/priv/p.tel")" = precious ] || die "after a refused listen: $(ls -l "$TMP/priv")"
touch "$TMP/open.keys"; chmod 644 "$TMP/open.keys"
check 2 "a key file others can read" "$DDPTOP" listen tcp://127.0.0.1:$(free_port) --headless --keys "$TMP/open.keys"
printf 'ddptop-keys v1\nserver-public short\n' >"$TMP/bad.keys"; chmod 600 "$TMP/bad.keys"
check 2 "a damaged key file" "$DDPTOP" run -n 1 --nnodes 2 --node-rank 1 --rdzv 127.0.0.1:9 --keys "$TMP/bad.keys"
check 2 "--nnodes without --rdzv" "$DDPTOP" run --nnodes 2
check 2 "--rdzv without a port" "$DDPTOP" run --nnodes 2 --rdzv hostonly
check 2 "--rdzv port 0" "$DDPTOP" run --headless --nnodes 2 --rdzv 127.0.0.1:0
check 2 "--node-rank out of range" "$DDPTOP" run --nnodes 2 --node-rank 2 --rdzv h:1
check 2 "--rdzv for one node" "$DDPTOP" run --rdzv h:1
check 2 "--keys for one node" "$DDPTOP" run --headless --keys "$TMP/k.keys" -- --dataset synthetic --model mlp:20,3 --steps 1
check 2 "an agent without keys" "$DDPTOP" run --nnodes 2 --node-rank 1 --rdzv 127.0.0.1:9
check 2 "attach without endpoint" "$DDPTOP" attach
check 2 "attach over tcp without keys" "$DDPTOP" attach tcp://127.0.0.1:9 --headless
check 2 "publish beyond loopback without keys" "$DDPTOP" run --headless --publish tcp://0.0.0.0:5555
DDPTOP_CONNECT=tcp://127.0.0.1:9 check 2 "a worker on tcp without keys" "${DDPTOP%ddptop}ddptop-worker" --dataset synthetic
RANK=0 WORLD_SIZE=2 SLURM_PROCID=1 DDPTOP_CTL=ipc:///x DDPTOP_TEL=ipc:///y check 2 "a worker with rank >= world" \
    env RANK=5 "${DDPTOP%ddptop}ddptop-worker" --dataset synthetic
# make bench-comm's tool (COMM_ARGS)
BC=$BUILD/tests/bench_comm
check 2 "bench-comm: a size that is not a number" "$BC" -n 2 4k
check 2 "bench-comm: a zero size" "$BC" -n 2 0
check 2 "bench-comm: an unknown algorithm" "$BC" -n 2 -a ring,bogus 4096
check 2 "bench-comm: no time" "$BC" -n 2 -t 0 4096
check 2 "bench-comm: world 0" "$BC" -n 0 4096
no_workers || die "workers left running"
