# Ranks on one host sum through shared memory; where /dev/shm cannot hold
# the slots (a container's small /dev/shm, simulated with a 1 MB tmpfs in a
# private mount namespace) they fall back to Gloo's TCP at start, cleanly,
# and say so, instead of dying of SIGBUS at the first write.
. tests/lib.sh
[ "$(id -u)" = 0 ] || skip "SKIP: needs root for a private mount namespace"
unshare -m true 2>/dev/null || skip "SKIP: unshare -m is not permitted here"
TRAIN="--dataset synthetic --model mlp:20,16,3 --steps 30 --batch-size 8 --no-final-ckpt"
unshare -m sh -c "mount -t tmpfs -o size=1m tmpfs /dev/shm && exec '$DDPTOP' run -n 2 --headless -- $TRAIN" \
    >"$TMP/small.out" 2>&1
rc=$?
grep -E "collectives|job|rank [01]:" "$TMP/small.out"
[ $rc -eq 0 ] || { cat "$TMP/small.out"; die "the job with a 1 MB /dev/shm exited $rc"; }
grep -q "collectives: gloo over TCP" "$TMP/small.out" || die "no fallback to TCP with a 1 MB /dev/shm"
# The roomy /dev/shm is a private one too, so what is left in it after the
# job is this job's alone: the suite runs tests side by side, and another
# test's ranks (or t_shm_leftover's planted names) live in the host's.
unshare -m sh -c "mount -t tmpfs -o size=64m tmpfs /dev/shm && '$DDPTOP' run -n 2 --headless -- $TRAIN; rc=\$?; ls -A /dev/shm >'$TMP/left.txt'; exit \$rc" \
    >"$TMP/big.out" 2>&1 || { cat "$TMP/big.out"; die "the job with a 64 MB /dev/shm failed"; }
grep -q "collectives: gloo; all-reduce through shared memory" "$TMP/big.out" || die "no shared memory with a 64 MB /dev/shm"
[ -f "$TMP/left.txt" ] || die "the listing of /dev/shm after the job was not written"
[ -s "$TMP/left.txt" ] && die "left in /dev/shm after the job: $(tr '\n' ' ' <"$TMP/left.txt")"
wait_for 5 no_workers || die "workers left running: $(our_workers)"
echo "PASS: shared memory where it fits, TCP where it does not, nothing left in /dev/shm"
