# --record onto a disk that fills up: the job goes on unrecorded, ddptop
# says so, and the run exits 3 (something asked for was not written), not 0.
# The same job with room for its recording exits 0. The small disk is a
# 16 KiB tmpfs (root only: skipped elsewhere).
. tests/lib.sh
case $BUILD in /*) FEED=$BUILD/tests/tool_feed;; *) FEED=$PWD/$BUILD/tests/tool_feed;; esac
[ -x "$FEED" ] || skip "no $FEED (run make all)"
mkdir -p "$TMP/small"
mount -t tmpfs -o size=16k tmpfs "$TMP/small" 2>/dev/null || skip "cannot mount a small tmpfs here (not root?)"
CLEANUPS=("umount '$TMP/small'" "${CLEANUPS[@]+"${CLEANUPS[@]}"}")
cat >"$TMP/j.feed" <<'FEED'
set beat=0.5
0    *  hello max_steps=400 dataset_size=64
0.1  *  phase phase=train
0.1  *  train from=1 to=400 rate=400 buckets=2
1.5  *  exit
FEED
DDPTOP_WORKER=$FEED timeout 60 "$DDPTOP" run --headless -n 2 --record "$TMP/small/j.rec" -- --script "$TMP/j.feed" \
    >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc = 3 ] || die "a recording cut by a full disk: exit $rc, want 3: $(tail -3 "$TMP/out") $(cat "$TMP/err")"
grep -q "recording to $TMP/small/j.rec stopped: .*No space left on device" "$TMP/out" \
    || die "no event of the lost recording: $(grep -i record "$TMP/out")"
grep -q "then a write failed: the recording ends there\|--record: recording to .* stopped" "$TMP/err" \
    || die "the last lines do not say the recording ends early: $(cat "$TMP/err")"
grep -q "job done: all 2 ranks ended cleanly" "$TMP/out" || die "the job itself did not end cleanly: $(tail -3 "$TMP/out")"
echo "ok: full disk -> exit 3: $(tail -1 "$TMP/err")"
DDPTOP_WORKER=$FEED timeout 60 "$DDPTOP" run --headless -n 2 --record "$TMP/j.rec" -- --script "$TMP/j.feed" \
    >"$TMP/out" 2>"$TMP/err" || die "the same job with room: exit $?: $(cat "$TMP/err")"
echo "ok: with room -> exit 0: $(tail -1 "$TMP/err")"
