# One diagnosis (issue 30) for torch jobs that fail fast: a barrier under
# `if rank == 0:` after training (Gloo fails it at once with "Connection
# closed by peer": a collective only rank 0 reaches, not uneven inputs: both
# ran 40 steps), a rank's own exception and a SIGKILLed rank. The verdict
# names the culprit first, with its line; the peer's broken link is said as
# a consequence.
. tests/lib.sh
. tests/lib_py.sh
. tests/scenario/python/diag/lib_diag.sh
n=$(diag_line barrier_end)
diag_run barrier_end
diag_check barrier_end alone 0 "diag_cases.py:$n in barrier_end"
grep -q 'uneven' "$TMP/barrier_end/out.jsonl" && grep '"k":"summary"' "$TMP/barrier_end/out.jsonl" | grep -q uneven &&
    die "barrier_end: called uneven inputs"
n=$(diag_line raises)
diag_run raises
diag_check raises exception 1 "diag_cases.py:$n in raises"
grep -q '"verdict":"job failed: rank 1 raised at diag_cases.py:'"$n"' in raises at step 10: ValueError: bad batch 10' \
    "$TMP/raises/out.jsonl" || die "raises: the exception's text"
diag_run sigkill
diag_check sigkill died 1 "diag_cases.py:"
grep -q '"verdict":"job failed: rank 1 signal 9 (Killed)' "$TMP/sigkill/out.jsonl" || die "sigkill: not named"
echo "PASS: failed torch jobs name the rank that failed first, with its line; the others' ends are consequences"
