# Teaching fault slow:1:30ms: rank 1 sleeps 30 ms before every step, so
# rank 0's all-reduce wait (comm and exposed time per step, from its
# throughput line) grows by about that much against the same run without
# the fault; the job still ends cleanly, and --json's progress lines name
# rank 1 the straggler (none without the fault).
. tests/lib.sh
run() {
    timeout 60 "$DDPTOP" run -n 2 --headless --json -- --dataset synthetic --model mlp:16,32,4 --steps 40 \
        --batch-size 8 --no-final-ckpt "$@" >"$TMP/out.jsonl" 2>&1 || { cat "$TMP/out.jsonl"; die "job failed ($*)"; }
    grep '"r":0,"level":"info","text":"throughput:' "$TMP/out.jsonl" | sed 's/.*exposed \([0-9.]*\)).*/\1/'
}
# the rank the others wait for, from the newest progress line with one
straggler() { grep '"k":"progress"' "$TMP/out.jsonl" | grep -o '"straggler":{[^}]*}' | tail -1; }
base=$(run)
base_straggler=$(straggler)
slow=$(run --fault slow:1:30ms)
echo "rank 0 exposed all-reduce ms per step: $base without, $slow with the fault"
# the straggler the ranks panel shows reaches --json's progress lines too
echo "straggler: '$base_straggler' without, '$(straggler)' with the fault"
[ -z "$base_straggler" ] || die "a straggler without the fault: $base_straggler"
straggler | grep -Eq '^"straggler":\{"rank":1,"ms_per_step":[0-9.]+\}$' || die "no progress line names rank 1 the straggler"
[ -n "$base" ] && [ -n "$slow" ] || die "no throughput line"
grep -q '"r":1,"level":"warn","text":"fault: rank 1 sleeps 30 ms every step' "$TMP/out.jsonl" || die "no fault sentence"
"$PY" -c "import sys; b, s = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if s >= b + 20 else 1)" \
    "$base" "$slow" || die "rank 0 did not wait for the straggler"
wait_for 5 no_workers || die "workers left: $(our_workers)"
