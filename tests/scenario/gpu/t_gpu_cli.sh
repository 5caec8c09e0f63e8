# --device / --backend on the command line: a machine without a usable GPU
# gets one line and exit 2 before anything runs (nothing left running);
# NCCL on the CPU is refused; --device cpu and auto train as before. On a
# GPU machine the refusal cases skip (tests/gpu/device_checks.sh covers them).
. tests/lib.sh
check() { # expected-exit description cmd...
    local want=$1 what=$2; shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
    [ $rc -eq "$want" ] || die "$what: exit $rc, want $want: $(cat "$TMP/err")"
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || die "$what: error is not one line: $(cat "$TMP/err")"
    echo "ok: $what -> $(cat "$TMP/err")"
}
job="--dataset synthetic --model mlp:16,8,3 --synthetic-size 64 --batch-size 8 --steps 3"
check 2 "nccl on the cpu" "$DDPTOP" run --headless -n 1 --backend nccl --device cpu -- $job
grep -q -- '--backend gloo' "$TMP/err" || die "nccl on the cpu: no gloo hint"
check 2 "unknown device" "$DDPTOP" run --headless --device tpu -- $job
check 2 "unknown backend" "$DDPTOP" run --headless --backend mpi -- $job
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU; then
    echo "a GPU is present: the no-GPU refusals are for tests/gpu/device_checks.sh"
else
    check 2 "cuda without a GPU" "$DDPTOP" run --headless -n 2 --device cuda -- $job
    grep -qi 'cuda' "$TMP/err" && grep -q -- '--device cpu' "$TMP/err" || die "cuda without a GPU: unclear: $(cat "$TMP/err")"
    check 2 "nccl without a GPU" "$DDPTOP" run --headless -n 1 --backend nccl -- $job
    check 2 "cuda without a GPU, gloo" "$DDPTOP" run --headless -n 2 --device cuda --backend gloo -- $job
    # auto falls back to the CPU and Gloo, and says so in the hello
    "$DDPTOP" run --headless --json -n 2 --device auto -- $job >"$TMP/auto" 2>&1 || die "auto: $(tail -3 "$TMP/auto")"
    grep -q 'hello pid [0-9]* on .* (cpu, gloo)' "$TMP/auto" || die "auto did not pick cpu and gloo: $(grep hello "$TMP/auto")"
fi
"$DDPTOP" run --headless -n 2 --device cpu --backend gloo -- $job >"$TMP/cpu" 2>&1 || die "cpu+gloo: $(tail -3 "$TMP/cpu")"
grep -q 'ended cleanly' "$TMP/cpu" || die "cpu+gloo did not end cleanly: $(tail -3 "$TMP/cpu")"
no_workers || die "workers left running"
