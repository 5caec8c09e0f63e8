# A job that vanishes under a headless viewer (its ddptop killed with
# SIGKILL, so no rank says bye): the viewer says "no word from the job" after
# its 10 s of silence and exits 1, not 0 as for a job seen to end. A job that
# ends cleanly still gives 0.
. tests/lib.sh
case $BUILD in /*) FEED=$BUILD/tests/tool_feed;; *) FEED=$PWD/$BUILD/tests/tool_feed;; esac
[ -x "$FEED" ] || skip "no $FEED (run make all)"
cat >"$TMP/j.feed" <<'FEED'
set beat=0.5
0    *  hello max_steps=100000 dataset_size=64
0.1  *  phase phase=train
0.1  *  train from=1 to=100000 rate=50
FEED
# start_job OUT FEED: a headless job of 2 feeders; sets JOB (ddptop's pid) and EP.
start_job() {
    DDPTOP_WORKER=$FEED "$DDPTOP" run --headless -n 2 -- --script "$2" >"$1" 2>&1 &
    JOB=$!
    CLEANUPS+=("kill -9 $JOB")
    wait_for 20 grep -q 'ddptop attach: ddptop attach ipc://' "$1" || die "no attach endpoint: $(cat "$1")"
    EP=$(sed -n 's/.*ddptop attach: ddptop attach \(ipc:[^ ]*\).*/\1/p' "$1" | head -1)
}
start_job "$TMP/job.out" "$TMP/j.feed"
timeout 60 "$DDPTOP" attach "$EP" --headless >"$TMP/att.out" 2>&1 &
att=$!
wait_for 20 grep -q 'r1 .*train' "$TMP/att.out" || die "the viewer saw no training: $(cat "$TMP/att.out")"
kill -9 $JOB
wait $att; rc=$?
[ $rc = 1 ] || die "viewer of a vanished job: exit $rc, want 1: $(tail -4 "$TMP/att.out")"
grep -q "no word from the job for 10 s" "$TMP/att.out" || die "the viewer did not say why: $(tail -4 "$TMP/att.out")"
echo "ok: a vanished job: $(grep -o 'no word from the job[^:]*' "$TMP/att.out" | head -1), exit 1"
wait_for 10 no_workers || die "workers left running: $(our_workers)"

# A job that ends: 0.
printf '6 * exit\n' >>"$TMP/j.feed"
start_job "$TMP/job2.out" "$TMP/j.feed"
timeout 60 "$DDPTOP" attach "$EP" --headless >"$TMP/att2.out" 2>&1; rc=$?
[ $rc = 0 ] || die "viewer of a job that ended: exit $rc, want 0: $(tail -4 "$TMP/att2.out")"
wait $JOB || die "the job failed: $(tail -3 "$TMP/job2.out")"
echo "ok: a job that ended: exit 0"
