# What a run says at the end is true (issue 15, item 1):
# - a --ckpt-dir that cannot hold checkpoints is one line and exit 2 before
#   anything runs (a plain file, a path under a file, /proc);
# - a checkpoint lost to a full disk (a 16 kB tmpfs, where mount works) is
#   "checkpoint lost", exit 3 and "ok":false, never "ended cleanly";
# - Ctrl-C exits 130 and SIGTERM 143 with "stopped by Ctrl-C at step S,
#   checkpoint written" (or that none was: the directory made a file after
#   launch), and a failed run keeps the rank logs it names.
. tests/lib.sh
JOB="--dataset synthetic --model mlp:16,8,3 --synthetic-size 64 --batch-size 8 --eval-every 0"

check2() { # description cmd...
    local what=$1; shift
    "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
    [ $rc -eq 2 ] || die "$what: exit $rc, want 2: $(cat "$TMP/err")"
    [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q -- '--ckpt-dir' "$TMP/err" \
        || die "$what: not one line naming --ckpt-dir: $(cat "$TMP/err")"
    echo "ok: $what -> $(cat "$TMP/err")"
}
touch "$TMP/plain"
"$DDPTOP" --help | grep -q "^exit status: 0 every rank ended cleanly" || die "--help has no exit status"
check2 "--ckpt-dir a plain file" "$DDPTOP" run -n 2 --headless -- $JOB --steps 3 --ckpt-dir "$TMP/plain"
check2 "--ckpt-dir under a plain file" "$DDPTOP" run -n 2 --headless -- $JOB --steps 3 --ckpt-dir "$TMP/plain/ck"
check2 "--ckpt-dir in /proc" "$DDPTOP" run -n 2 --headless -- $JOB --steps 3 --ckpt-dir /proc/ck

# A full disk: the final checkpoint is lost.
mkdir -p "$TMP/full"
if mount -t tmpfs -o size=16k tmpfs "$TMP/full" 2>/dev/null; then
    CLEANUPS+=("umount '$TMP/full'")
    dd if=/dev/zero of="$TMP/full/fill" bs=4k count=64 2>/dev/null
    timeout 60 "$DDPTOP" run -n 2 --headless --json -- $JOB --steps 10 --ckpt-dir "$TMP/full/ck" \
        >"$TMP/full.json" 2>"$TMP/full.err"
    rc=$?
    [ $rc -eq 3 ] || die "full disk: exit $rc, want 3: $(tail -3 "$TMP/full.json") $(cat "$TMP/full.err")"
    tail -1 "$TMP/full.json" | grep -q '"k":"summary".*"ok":false' || die "full disk: summary not ok:false: $(tail -1 "$TMP/full.json")"
    tail -1 "$TMP/full.json" | grep -q '"verdict":"job failed: checkpoint lost: step 10 was not written' \
        || die "full disk: verdict: $(tail -1 "$TMP/full.json")"
    grep -q 'ended cleanly"' "$TMP/full.json" && die "full disk: something says ended cleanly"
    grep -q 'No space left on device' "$TMP/full.json" || die "full disk: the reason is not said"
    echo "ok: full disk -> exit 3, checkpoint lost"
    umount "$TMP/full"
else
    echo "no tmpfs here (not root): the full-disk case is not run; the unwritable case below stands for it"
fi

# wait_step FILE: the headless progress line shows a step.
wait_step() { wait_for 60 grep -q '^\[.*step [1-9]' "$1"; }

# Ctrl-C: a clean stop, its final checkpoint, exit 130. (--foreground: without it
# timeout passes a signal to its child and then to its whole process group, so
# ddptop got two, and a second Ctrl-C means SIGTERM the ranks.)
timeout --foreground 120 "$DDPTOP" run -n 2 --headless -- $JOB --epochs 1000000 --ckpt-dir "$TMP/ck" >"$TMP/int.out" 2>&1 &
pid=$!
CLEANUPS+=("kill -9 $pid")
wait_step "$TMP/int.out" || die "Ctrl-C run: no step: $(tail -5 "$TMP/int.out")"
kill -INT $pid
wait $pid; rc=$?
[ $rc -eq 130 ] || die "Ctrl-C: exit $rc, want 130: $(tail -5 "$TMP/int.out")"
last=$(tail -1 "$TMP/int.out")
echo "$last" | grep -Eq '^stopped by Ctrl-C at step [0-9]+, checkpoint written: /.*/step-[0-9]{8}$' || die "Ctrl-C: last line: $last"
step=$(echo "$last" | sed 's/.*at step \([0-9]*\),.*/\1/')
[ -d "$TMP/ck/step-$(printf %08d "$step")" ] || die "Ctrl-C: no checkpoint of step $step: $(ls "$TMP/ck")"
grep -q 'ended cleanly' "$TMP/int.out" && die "Ctrl-C: says ended cleanly"
echo "ok: Ctrl-C -> exit 130, $last"

# SIGTERM, the checkpoint directory turned into a file after launch: exit
# 143, no checkpoint written, and the logs the events name are kept.
timeout --foreground 120 "$DDPTOP" run -n 2 --headless -- $JOB --epochs 1000000 --ckpt-dir "$TMP/ck2" >"$TMP/term.out" 2>&1 &
pid=$!
CLEANUPS+=("kill -9 $pid")
wait_step "$TMP/term.out" || die "SIGTERM run: no step: $(tail -5 "$TMP/term.out")"
rm -rf "$TMP/ck2" && touch "$TMP/ck2"
kill -TERM $pid
wait $pid; rc=$?
[ $rc -eq 143 ] || die "SIGTERM: exit $rc, want 143: $(tail -5 "$TMP/term.out")"
grep -Eq '^stopped by SIGTERM at step [0-9]+, no checkpoint written \(step [0-9]+ lost: ' "$TMP/term.out" \
    || die "SIGTERM: no 'stopped by SIGTERM ..., no checkpoint written': $(tail -3 "$TMP/term.out")"
logs=$(sed -n 's/.*launched 2 ranks (logs in \([^)]*\)).*/\1/p' "$TMP/term.out" | head -1)
[ -n "$logs" ] || die "SIGTERM: no 'logs in DIR' event: $(head -5 "$TMP/term.out")"
CLEANUPS+=("rm -rf '$logs'")
grep -qF "ddptop: the ranks' logs are kept in $logs" "$TMP/term.out" || die "SIGTERM: the kept logs are not named: $(tail -3 "$TMP/term.out")"
grep -q 'checkpoint failed' "$logs/rank-0.log" || die "SIGTERM: rank 0's log is not there or lacks the failure: $(ls "$logs")"
echo "ok: SIGTERM -> exit 143, no checkpoint written, logs kept in $logs"
no_workers || die "workers left: $(our_workers)"
