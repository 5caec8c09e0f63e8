# A rank whose process lives but whose heartbeats stopped (issue 30, one
# diagnosis): diag_cases.py gil_hold's rank 0 blocks in a C call that keeps
# Python's GIL (ctypes.PyDLL) right after an all-reduce, so the adapter's
# heartbeat thread cannot run and its last beat (inside that all-reduce, at
# the all-reduce's line) goes stale, while rank 1 waits for it in the next
# all-reduce until Gloo's timeout. The stale beat is no current fact: the
# verdict names rank 0 silent, last heard at the all-reduce's line (past
# tense), never "alone in" a collective it left long ago nor "is at" that
# line; rank 1's timeout is a consequence.
. tests/lib.sh
. tests/lib_py.sh
. tests/scenario/python/diag/lib_diag.sh
n=$(diag_line gil_hold_heard)
diag_run gil_hold
diag_check gil_hold silent 0 "diag_cases.py:$n in gil_hold"
out=$TMP/gil_hold/out.jsonl
grep -q '"level":"warn","text":"rank 0 has been silent for [0-9]* s after step 5 (its heartbeat thread cannot run: the process is blocked in native code holding Python.s GIL?), last heard at diag_cases.py:'"$n"' in gil_hold"' \
    "$out" || { grep '"k":"event"' "$out" | grep -v '"info"'; die "gil_hold: no live note of rank 0's silence"; }
! grep -E '"k":"(event|hang|summary)"' "$out" | grep -qE 'alone in|which is at diag_cases|rank 0 is at' ||
    { grep -E 'alone in|which is at diag_cases|rank 0 is at' "$out"; die "gil_hold: rank 0's stale beat was said as a current fact"; }
grep -q '"verdict":"job failed: rank 0 went silent after step 5 .*; rank 1 ended: exit 1 after \\"Timed out waiting [0-9]*ms for recv operation to complete\\" (a consequence)' \
    "$out" || { grep '"k":"summary"' "$out"; die "gil_hold: rank 1's timeout not said as a consequence"; }
echo "PASS: a rank silent while holding the GIL is named silent, last heard at its line, never alone in a stale collective"
