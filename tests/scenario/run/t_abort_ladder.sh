# The shutdown ladder ends a rank that ignores SIGTERM: a shell script
# standing in for the worker traps TERM; after a signal to ddptop and
# --stop-grace 1 it gets SIGTERM (ignored), 5 s later SIGKILL; the output
# says which rung ended it, ddptop exits 1 and nothing is left.
. tests/lib.sh
cat >"$TMP/stubborn.sh" <<'SH'
#!/bin/sh
[ -n "${DDPTOP_CHECK_ARGS:-}" ] && exit 0
trap '' TERM
while :; do sleep 0.2; done
SH
chmod +x "$TMP/stubborn.sh"
out=$TMP/out.txt
DDPTOP_WORKER=$TMP/stubborn.sh "$DDPTOP" run -n 1 --headless --stop-grace 1 >"$out" 2>&1 &
dp=$!
CLEANUPS+=("kill -9 $dp")
sleep 0.5
stub=$(pgrep -P $dp)
[ -n "$stub" ] || die "the stub worker did not start"
CLEANUPS+=("kill -9 $stub")
kill -TERM $dp
ended_within 15 $dp || die "ddptop still running"
cat "$out"
[ $rc -eq 1 ] || die "ddptop exited $rc, want 1"
grep -q "ranks did not finish the clean stop in time: sent SIGTERM to 1 rank" "$out" || die "no SIGTERM rung"
grep -q "ranks ignored SIGTERM: sent SIGKILL to 1 rank" "$out" || die "no SIGKILL rung"
grep -q "SIGKILL by ddptop" "$out" || die "the rank's end does not name the rung"
kill -0 "$stub" 2>/dev/null && die "the stub worker is still running"
exit 0
