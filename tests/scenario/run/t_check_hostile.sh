# The options check before launch (cmd/run_target.c asks the interpreter or
# the worker to validate everything) against interpreters that misbehave:
# one that hangs (ddptop waited forever) ends at the check's deadline
# (--timeout, within 10..60 s); one whose traceback is longer than 1 KiB is
# named by its last line (ddptop kept the first 1 KiB and closed the pipe);
# one that exits 1 or dies by a signal without a word is named as such (it
# said "the trainer options were refused"). Each: one line, exit 2, nothing
# launched, nothing left running.
. tests/lib.sh
echo 'print("never run")' >"$TMP/s.py"
fake() { printf '#!/bin/sh\n%s\n' "$2" >"$TMP/$1"; chmod +x "$TMP/$1"; }
fake hang 'echo "$$" >"'"$TMP"'/hang.pid"; exec sleep 300'
fake long 'i=0; while [ $i -lt 300 ]; do echo "  File \"/some/where/module_$i.py\", line $i, in <module>"; i=$((i+1)); done
echo "ModuleNotFoundError: No module named '"'"'torch_broken'"'"'"; exit 1'
fake mute 'exit 1'
fake killed 'kill -9 $$'
check() { # description want cmd...
    local what=$1 want=$2; shift 2
    local t0=$(date +%s)
    timeout 60 "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
    [ $rc -eq 2 ] || die "$what: exit $rc, want 2: $(cat "$TMP/err")"
    [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -qF -- "$want" "$TMP/err" \
        || die "$what: not one line saying \"$want\": $(cat "$TMP/err")"
    grep -q launched "$TMP/out" && die "$what: ranks were launched: $(cat "$TMP/out")"
    echo "ok: $what ($(( $(date +%s) - t0 )) s) -> $(cat "$TMP/err")"
}
check "a hung interpreter" "$TMP/hang did not answer the options check within 10 s" \
    "$DDPTOP" run --headless --timeout 2 --python "$TMP/hang" "$TMP/s.py"
pid=$(cat "$TMP/hang.pid" 2>/dev/null)
[ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null || die "the hung check (pid $pid) was left running"
check "a long traceback" "ddptop: ModuleNotFoundError: No module named 'torch_broken'" \
    "$DDPTOP" run --headless --python "$TMP/long" "$TMP/s.py"
check "an interpreter that says nothing" "$TMP/mute refused the options (exit 1, without a word)" \
    "$DDPTOP" run --headless --python "$TMP/mute" "$TMP/s.py"
check "an interpreter killed" "$TMP/killed was killed by signal 9 while checking the options" \
    "$DDPTOP" run --headless --python "$TMP/killed" "$TMP/s.py"
no_workers || die "workers left running"
