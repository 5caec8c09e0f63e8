# Many ranks ending at once: a rank's bye may still be in the socket when
# its exit is reaped. ddptop waits for it (briefly) instead of calling a
# clean exit "exit 0 without bye": 32 scripted ranks exit together, every
# one is clean and ddptop exits 0 (half of them send their bye 200 ms
# after their process has ended, from another process).
. tests/lib.sh
case $BUILD in /*) FEED=$BUILD/tests/tool_feed;; *) FEED=$PWD/$BUILD/tests/tool_feed;; esac
[ -x "$FEED" ] || skip "no $FEED (run make all)"
cat >"$TMP/e.feed" <<'FEED'
set beat=0.5
0    *  hello max_steps=60
0.1  *  phase phase=train
0.1  *  train from=1 to=60 rate=100
1.0  0-15  exit
1.0  16-31 exit bye_after_ms=200
FEED
DDPTOP_WORKER=$FEED "$DDPTOP" run -n 32 --headless -- --script "$TMP/e.feed" >"$TMP/out.txt" 2>&1
rc=$?
tail -3 "$TMP/out.txt"
grep -q "without bye" "$TMP/out.txt" && die "a clean exit was taken for one without bye"
[ $rc -eq 0 ] || die "ddptop exited $rc"
grep -q "job done: all 32 ranks ended cleanly" "$TMP/out.txt" || die "no clean verdict"
