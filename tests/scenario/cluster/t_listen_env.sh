# Jobs launched by someone else: `ddptop listen` opens the job for workers
# started by hand with torchrun's environment, then with Slurm's (what
# `srun -n 2 ddptop-worker ...` gives each task); both train to a clean end
# under ddptop's eye, over tcp with CURVE, and ddptop's summary names them.
. tests/lib.sh
case $BUILD in /*) W=$BUILD/ddptop-worker;; *) W=$PWD/$BUILD/ddptop-worker;; esac
TRAIN="--dataset synthetic --model mlp:20,16,3 --steps 30 --batch-size 8 --no-final-ckpt"

run_case() {   # run_case NAME ENV-BUILDER
    local name=$1 builder=$2 port=$(free_port) keys=$TMP/$1.keys out=$TMP/$1.out
    "$DDPTOP" listen tcp://127.0.0.1:$port --headless --keys "$keys" >"$out" 2>&1 &
    local pl=$!
    CLEANUPS+=("kill -9 $pl")
    wait_for 10 test -s "$keys" || { cat "$out"; die "$name: listen wrote no key file"; }
    local pids=() r
    for r in 0 1; do
        env -u DDPTOP_CTL -u DDPTOP_TEL -u DDPTOP_JOB $($builder $r) DDPTOP_CONNECT=tcp://127.0.0.1:$port \
            DDPTOP_KEYS="$keys" "$W" $TRAIN >"$TMP/$name.w$r" 2>&1 &
        pids+=($!)
        CLEANUPS+=("kill -9 $!")
    done
    for r in 0 1; do wait ${pids[$r]}; local rw=$?; [ $rw -eq 0 ] || { cat "$TMP/$name.w$r" "$out"; die "$name: worker $r exited $rw"; }; done
    wait $pl; local rl=$?
    cat "$out"
    [ $rl -eq 0 ] || die "$name: ddptop listen exited $rl"
    grep -q "job done: all 2 ranks ended cleanly" "$out" || die "$name: no clean verdict"
    grep -q "rank 1: exit 0, step 30" "$out" || die "$name: rank 1 did not reach step 30"
    [ ! -e "$keys" ] || [ "$(stat -c %a "$keys")" = 600 ] || die "$name: key file mode"
}
torchrun_env() { echo RANK=$1 WORLD_SIZE=2 LOCAL_RANK=$1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500; }
slurm_env() { echo -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u MASTER_ADDR SLURM_PROCID=$1 SLURM_NTASKS=2 \
    SLURM_LOCALID=$1 SLURM_TASKS_PER_NODE=2 SLURM_NODELIST=localhost; }
run_case torchrun torchrun_env
run_case slurm slurm_env
wait_for 5 no_workers || die "workers left running: $(our_workers)"
echo "PASS: ddptop listen with torchrun- and Slurm-style workers"
