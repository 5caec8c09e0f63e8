# Killing a random rank at a random moment, ten times: every job ends within
# its timeout, ddptop exits non-zero (a rank failed), names the killed rank,
# and leaves nothing running (torchrun's rule and the ladder).
. tests/lib.sh
RANDOM=4242   # reproducible choices
for i in $(seq 1 10); do
    n=$(( 2 + RANDOM % 2 ))                 # 2 or 3 ranks
    delay_ms=$(( 200 + RANDOM % 1500 ))     # during start-up, rendezvous or training
    sig=$([ $((RANDOM % 2)) -eq 0 ] && echo KILL || echo SEGV)
    out=$TMP/run$i.txt
    "$DDPTOP" run -n $n --headless --stop-grace 2 --timeout 20 -- --dataset synthetic \
        --model mlp:16,32,4 --epochs 100000 --batch-size 8 --no-final-ckpt >"$out" 2>&1 &
    dp=$!
    CLEANUPS+=("kill -9 $dp")
    sleep "$(awk -v m=$delay_ms 'BEGIN{print m/1000}')"
    mapfile -t ws < <(our_workers)
    if [ ${#ws[@]} -eq 0 ]; then
        wait "$dp"; echo "run $i: ended before the kill: $(tail -1 "$out")"; continue
    fi
    victim=${ws[$(( RANDOM % ${#ws[@]} ))]}
    vrank=$({ tr '\0' '\n' </proc/$victim/environ; } 2>/dev/null | sed -n 's/^RANK=//p')
    kill -$sig "$victim" 2>/dev/null
    start=$(date +%s)
    ended_within 25 $dp || die "run $i: ddptop still running 25 s after killing rank $vrank"
    [ $rc -ne 0 ] || { cat "$out"; die "run $i: exit 0 although rank $vrank was killed"; }
    grep -q "rank $vrank: signal" "$out" || { tail -8 "$out"; die "run $i: rank $vrank's signal not reported"; }
    wait_for 5 no_workers || die "run $i: workers left: $(our_workers)"
    echo "run $i: $n ranks, rank $vrank got SIG$sig after ${delay_ms} ms: ddptop exit $rc after $(( $(date +%s) - start )) s"
done
echo "ten random kills ok"
