# The default job (`ddptop` and `make run`: no trainer options) is paced so
# a person can follow it (issue 28, item 3): the built-in trainer gets the
# --pace that `ddptop run --help` names, rank 0 says so, and its own
# throughput line (steps over the time between the first and the last
# step's end) stays at or under that many steps a second, which holds on
# any machine (a slower one only lowers it). Any trainer option is the
# user's own job: no pace.
. tests/lib.sh
pace=$("$DDPTOP" run --help | tr '\n' ' ' | sed -n 's/.*paced at \([0-9][0-9]*\) steps a second.*/\1/p')
[ -n "$pace" ] || die "ddptop run --help does not say the default job's pace"

cd "$TMP" || die "no $TMP"
"$DDPTOP" --headless >"$TMP/default.out" 2>&1 &
job=$!
CLEANUPS+=("kill -9 $job")
wait_for 60 grep -q 'epoch 0 step [0-9]' "$TMP/default.out" || die "the default job did not start: $(tail -3 "$TMP/default.out")"
sleep 3
kill -INT $job
ended_within 60 $job || die "the default job did not stop after Ctrl-C"
[ $rc = 130 ] || die "the default job: exit $rc after Ctrl-C, want 130: $(tail -3 "$TMP/default.out")"
grep -q "r0 paced: at most $pace steps a second" "$TMP/default.out" || die "the default job is not paced at $pace: $(grep -m3 'r0 ' "$TMP/default.out")"
line=$(grep -m1 'r0 throughput:' "$TMP/default.out")
n=$(echo "$line" | sed -n 's/.*throughput: \([0-9]*\) steps in.*/\1/p')
rate=$(echo "$line" | sed -n 's/.* (\([0-9.]*\) steps\/s).*/\1/p')
[ -n "$rate" ] && [ "${n:-0}" -ge 5 ] || die "no throughput over 5 steps or more: $line"
awk -v r="$rate" -v p="$pace" 'BEGIN { exit !(r <= p) }' || die "the default job ran $rate steps/s, over its pace $pace"
echo "ok: the default job is paced: $n steps at $rate steps/s (at most $pace)"

"$DDPTOP" run --headless -- --dataset synthetic --model mlp:16,8,3 --synthetic-size 64 --batch-size 8 --eval-every 0 \
    --steps 20 --no-final-ckpt >"$TMP/own.out" 2>&1 || die "a job with trainer options failed: $(tail -3 "$TMP/own.out")"
grep -q 'paced:' "$TMP/own.out" && die "a job with trainer options is paced: $(grep -m1 'paced:' "$TMP/own.out")"
echo "ok: a job with trainer options runs at full speed"
