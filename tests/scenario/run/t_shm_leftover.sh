# A rank killed between creating its shared-memory segment (the all-reduce
# of ranks on one host, workers/comm/shm_reduce.c) and its peers' opening it
# leaves the name in /dev/shm; ddptop removes it when it reaps that rank,
# and leaves alone names of processes it did not start. A shell script
# stands in for the worker: it creates such a name and dies of SIGKILL.
. tests/lib.sh
[ -d /dev/shm ] && [ -w /dev/shm ] || skip "SKIP: no writable /dev/shm"
cat >"$TMP/dies.sh" <<'SH'
#!/bin/sh
[ -n "${DDPTOP_CHECK_ARGS:-}" ] && exit 0
: >/dev/shm/ddptop-$$-00000000deadbeef
echo $$ >"$DIES_PID_FILE"
kill -9 $$
SH
chmod +x "$TMP/dies.sh"
foreign=/dev/shm/ddptop-1-00000000deadbeef   # pid 1: never one of ddptop's ranks
: >"$foreign"
CLEANUPS+=("rm -f $foreign")
DIES_PID_FILE=$TMP/pid DDPTOP_WORKER=$TMP/dies.sh timeout 30 "$DDPTOP" run -n 1 --headless >"$TMP/out.txt" 2>&1
rc=$?
[ $rc -ne 0 ] || die "ddptop exited 0 after a rank died of SIGKILL"
pid=$(cat "$TMP/pid" 2>/dev/null)
[ -n "$pid" ] || { cat "$TMP/out.txt"; die "the stand-in worker did not run"; }
grep -q "signal 9 (Killed)" "$TMP/out.txt" || { cat "$TMP/out.txt"; die "the rank's end does not name signal 9"; }
[ ! -e "/dev/shm/ddptop-$pid-00000000deadbeef" ] || { rm -f "/dev/shm/ddptop-$pid-00000000deadbeef"; die "the dead rank's segment was left in /dev/shm"; }
[ -e "$foreign" ] || die "ddptop removed a name of a process it did not start"
echo "PASS: a killed rank's shared-memory name removed at reaping, other names kept"
