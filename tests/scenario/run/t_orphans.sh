# kill -9 of ddptop leaves no worker: real ranks die with it
# (PR_SET_PDEATHSIG; ddptop's pings are the workers' second guard) within
# a few seconds.
. tests/lib.sh
out=$TMP/out.txt
"$DDPTOP" run -n 2 --headless -- --dataset synthetic --model mlp:16,32,4 --epochs 100000 --batch-size 8 \
    --no-final-ckpt --ckpt-dir "$TMP/ck" >"$out" 2>&1 &
dp=$!
CLEANUPS+=("kill -9 $dp")
wait_for 20 grep -q "step [1-9]" "$out" || { cat "$out"; die "job never trained"; }
[ -n "$(our_workers)" ] || die "no workers found"
kill -9 $dp
wait $dp 2>/dev/null
wait_for 5 no_workers || die "workers left running after kill -9 of ddptop: $(our_workers)"
