# Messages a user can act on (issue 15, item 8): each wrong command line
# gets one line that says what to do, exit 2; what a run prints is real.
. tests/lib.sh
JOB="--dataset synthetic --model mlp:16,8,3 --synthetic-size 64 --batch-size 8 --eval-every 0"

check() { # expected-exit description wanted-text cmd...
    local want=$1 what=$2 text=$3; shift 3
    "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
    [ $rc -eq "$want" ] || die "$what: exit $rc, want $want: $(cat "$TMP/err")"
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || die "$what: not one line: $(cat "$TMP/err")"
    grep -qF -- "$text" "$TMP/err" || die "$what: does not say \"$text\": $(cat "$TMP/err")"
    echo "ok: $what -> $(cat "$TMP/err")"
}
check 2 "--record --" "--record: missing file name" "$DDPTOP" run --headless --record -- $JOB --steps 1
check 2 "--publish ipc into a missing directory" "/missing/dir: No such file or directory" \
    "$DDPTOP" run --headless --publish ipc:///missing/dir/x -- $JOB --steps 1
check 2 "-n not a count" "-n 1e6: expected a count of ranks (1 to 256) or auto, gpu, cpu" "$DDPTOP" run -n 1e6
check 2 "-n out of range" "-n: expected an integer in [1, 256]" "$DDPTOP" run -n 300
check 2 "a trainer range" "--lr: expected a number in [0, 1000000]" "$DDPTOP" run --headless -- $JOB --lr 1e9
check 2 "sampler --size out of range" "expected an integer in [0, 1073741824]" "$DDPTOP" sampler --size 1e20 --world 2
check 2 "listen on a host name" "bind a numeric address or an interface: tcp://127.0.0.1:PORT" \
    timeout 20 "$DDPTOP" listen tcp://localhost:5555 --headless
# A command whose output is the result, onto a full disk or a closed
# stdout: exit 1 and one line, not 0 with nothing written.
if [ -w /dev/full ]; then
    check 1 "sampler onto a full disk" "ddptop sampler: writing to stdout: No space left on device" \
        sh -c '"$0" sampler --size 10 --world 2 >/dev/full' "$DDPTOP"
    check 1 "--help onto a full disk" "ddptop --help: writing to stdout" sh -c '"$0" --help >/dev/full' "$DDPTOP"
fi
check 1 "sampler onto a closed stdout" "ddptop sampler: writing to stdout: Bad file descriptor" \
    sh -c '"$0" sampler --size 10 --world 2 >&-' "$DDPTOP"
"$DDPTOP" listen --help >"$TMP/help" 2>&1 || die "listen --help: exit $?: $(cat "$TMP/help")"
grep -q '^usage: ddptop' "$TMP/help" && grep -q 'ddptop listen ENDPOINT' "$TMP/help" || die "listen --help: $(head -3 "$TMP/help")"
echo "ok: listen --help prints the help"

# A torch.save file given to --init-from.
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    /usr/bin/python3 -c 'import sys, torch; torch.save(torch.nn.Linear(16, 8).state_dict(), sys.argv[1])' "$TMP/model.pt" \
        || die "torch.save failed"
    check 2 "--init-from a torch pickle" "not a safetensors file (is it a torch.save pickle?)" \
        "$DDPTOP" run --headless -n 2 -- $JOB --steps 1 --init-from "$TMP/model.pt"
    /usr/bin/python3 -c 'import sys, torch; torch.save(torch.nn.Linear(16, 8).state_dict(), sys.argv[1], _use_new_zipfile_serialization=False)' \
        "$TMP/legacy.pt" || die "legacy torch.save failed"
    check 2 "--init-from a legacy torch pickle" "not a safetensors file (is it a torch.save pickle?)" \
        "$DDPTOP" run --headless -n 2 -- $JOB --steps 1 --init-from "$TMP/legacy.pt"
else
    echo "no torch for /usr/bin/python3: the torch.save case is not run"
fi

# --backend nccl without a usable GPU: what to do, not a source file.
"$DDPTOP" run --headless -n 1 --backend nccl -- $JOB --steps 1 >"$TMP/out" 2>"$TMP/err"; rc=$?
if [ $rc -eq 2 ]; then
    grep -q -- '--backend gloo' "$TMP/err" || die "nccl: no --backend gloo advice: $(cat "$TMP/err")"
    grep -Eq '[a-z_]+\.(c|cu):[0-9]+' "$TMP/err" && die "nccl: names a source file: $(cat "$TMP/err")"
    echo "ok: --backend nccl -> $(cat "$TMP/err")"
else
    echo "--backend nccl ran here (exit $rc): a GPU is usable"
fi
# the CPU-only worker's stand-ins (gpu_none.c), asked directly
for w in "$BUILD/cpu/ddptop-worker" "$BUILD/ddptop-worker"; do
    [ -x "$w" ] || continue
    DDPTOP_CHECK_ARGS=1 DDPTOP_BACKEND=nccl DDPTOP_DEVICE=cpu "$w" $JOB >"$TMP/out" 2>"$TMP/err"
    grep -q -- '--backend gloo' "$TMP/err" && ! grep -Eq '\.(c|cu):[0-9]+' "$TMP/err" \
        || die "$w --backend nccl --device cpu: $(cat "$TMP/err")"
done
echo "ok: the workers' own nccl refusals name no source file"

# --publish tcp://127.0.0.1:*: the port it got.
timeout 60 "$DDPTOP" run -n 2 --headless --publish 'tcp://127.0.0.1:*' -- $JOB --steps 2 --no-final-ckpt \
    >"$TMP/pub.out" 2>"$TMP/pub.err" || die "--publish tcp://127.0.0.1:*: failed: $(cat "$TMP/pub.err")"
grep -Eq '^ddptop: publishing on tcp://127\.0\.0\.1:[0-9]+$' "$TMP/pub.err" || die "--publish: no port: $(cat "$TMP/pub.err")"
echo "ok: $(cat "$TMP/pub.err")"

# A failed run keeps the logs its events point at.
timeout 60 "$DDPTOP" run -n 2 --headless -- $JOB --epochs 1000 --fault kill:1@3 --no-final-ckpt >"$TMP/kill.out" 2>&1
rc=$?
[ $rc -eq 1 ] || die "a killed rank: exit $rc, want 1"
logs=$(sed -n 's/.*launched 2 ranks (logs in \([^)]*\)).*/\1/p' "$TMP/kill.out" | head -1)
[ -n "$logs" ] && CLEANUPS+=("rm -rf '$logs'")
grep -qF "the ranks' logs are kept in $logs" "$TMP/kill.out" && [ -s "$logs/rank-1.log" ] \
    || die "failed run: logs not kept where the events said ($logs): $(tail -3 "$TMP/kill.out")"
grep -q 'kill' "$logs/rank-1.log" || die "rank 1's log does not tell its fault: $(cat "$logs/rank-1.log")"
ls "$logs" | grep -Eq '^(ctl|tel|owner\.pid)$' && die "kept log dir still holds sockets or an owner file: $(ls "$logs")"
echo "ok: a failed run keeps $logs"

# A new run into another run's --ckpt-dir: a warning, and --keep-last keeps
# this run's checkpoints, not the older run's higher steps.
timeout 60 "$DDPTOP" run -n 2 --headless -- $JOB --steps 20 --ckpt-every 5 --ckpt-dir "$TMP/ck" >"$TMP/old.out" 2>&1 || die "old run failed"
timeout 60 "$DDPTOP" run -n 2 --headless -- $JOB --seed 9 --steps 10 --ckpt-every 5 --keep-last 2 --ckpt-dir "$TMP/ck" \
    >"$TMP/new.out" 2>&1 || die "new run failed: $(tail -3 "$TMP/new.out")"
grep -q "holds 4 checkpoints of another run (up to step 20)" "$TMP/new.out" || die "no warning about the other run's checkpoints"
[ "$(ls "$TMP/ck" | grep '^step-' | tr '\n' ' ')" = "step-00000005 step-00000010 " ] \
    || die "--keep-last 2 kept: $(ls "$TMP/ck" | tr '\n' ' ')"
[ "$(readlink "$TMP/ck/latest")" = step-00000010 ] || die "latest is $(readlink "$TMP/ck/latest")"
timeout 60 "$DDPTOP" run -n 2 --headless -- $JOB --seed 9 --steps 10 --ckpt-dir "$TMP/alone" >"$TMP/alone.out" 2>&1 || die "lone run failed"
cmp "$TMP/ck/step-00000010/model.safetensors" "$TMP/alone/step-00000010/model.safetensors" \
    || die "step-00000010 is not the new run's weights"
echo "ok: another run's checkpoints: warned, and --keep-last kept this run's"
no_workers || die "workers left: $(our_workers)"
