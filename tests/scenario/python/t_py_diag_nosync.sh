# A no_sync() mismatch (issue 30): gradient accumulation whose window
# differs by rank (diag_cases.py accumulate: rank 0 syncs every 2nd
# micro-batch, rank 1 every 3rd), so rank 0 goes on to DDP all-reduces
# rank 1 never makes. Two endings, each run bare (torchrun's environment by
# hand) and under `ddptop run -n 2 --headless --json --hang-after 6`, with a
# process group timeout of 12 s so that the bare run ends by itself (a
# rank's process may take seconds to exit on a loaded machine: --hang-after
# 3 ended one that had said bye with SIGTERM, an ending bare torch does not
# have):
# - no_sync: rank 1 then waits in the script's closing barrier: a desync
#   (rank 0 in all-reduce #N at the accumulating backward, rank 1 in
#   barrier #N), live and final, with both lines; both ranks' Gloo
#   timeouts (or the second one's closed connection, as Gloo's race goes)
#   are said as consequences.
# - no_sync_exit: rank 1 leaves at once: rank 0's all-reduce loses its peer;
#   the verdict says rank 0 trained on past rank 1's last step, at the
#   accumulating backward, and that the ranks' synced steps differ; the
#   peer's closed connection is a consequence.
# Each rank ends alike bare and under ddptop, with the same exception.
. tests/lib.sh
. tests/lib_py.sh
. tests/scenario/python/diag/lib_diag.sh
export DIAG_PG_TIMEOUT=12 DIAG_HANG_AFTER=6
n=$(diag_line no_sync)
b=$(diag_line no_sync_barrier)
[ -n "$n" ] && [ -n "$b" ] || die "no BUG marks in $DIAG_PY"
for c in no_sync no_sync_exit; do
    diag_bare "bare-$c" "$DIAG_PY" "$c"
    diag_run "$c"
    diag_ends "$c"
    diag_same "bare-$c" "$c"
done
# the bare runs fail as the verdicts below say
# (rank 1 waits in its barrier until its timeout, or until rank 0's own timeout closes
# the connection first: Gloo's race, bare as under ddptop)
grep -Eq "Timed out waiting|Connection (closed|reset) by peer" "$TMP/bare-no_sync/rank-1.log" ||
    die "bare no_sync: rank 1's barrier neither timed out nor lost its peer"
[ "$(cat "$TMP/bare-no_sync_exit/rank-1.how")" = "exit 0" ] || die "bare no_sync_exit: rank 1 did not end 0"
grep -q "exit 1" "$TMP/bare-no_sync_exit/rank-0.how" || die "bare no_sync_exit: rank 0 did not fail"

diag_check no_sync desync 0 "diag_cases.py:$n in accumulate"
grep -Eq '"verdict":"job failed: desync: rank 0 in all-reduce #[0-9]+ at diag_cases.py:'"$n"' in accumulate while rank 1 is in barrier #[0-9]+ at diag_cases.py:'"$b"' in no_sync: [^;]*; ranks? [01,]+ ended: exit 1 after \\"(Timed out waiting 12000ms for recv operation to complete|Connection closed by peer)\\" \(a consequence\)' \
    "$TMP/no_sync/out.jsonl" || { grep '"k":"summary"' "$TMP/no_sync/out.jsonl"; die "no_sync: the desync's ops, lines and consequences"; }
grep -q '"k":"hang"' "$TMP/no_sync/out.jsonl" || die "no_sync: no live hang record"

diag_check no_sync_exit uneven 0 "diag_cases.py:$n in accumulate"
grep -Eq '"verdict":"job failed: rank 1 had finished after step [0-9]+ while rank 0 trained on: its next collective at diag_cases.py:'"$n"' in accumulate had no partner; .*no_sync\(\) windows that differ by rank.*\(a consequence\)' \
    "$TMP/no_sync_exit/out.jsonl" || { grep '"k":"summary"' "$TMP/no_sync_exit/out.jsonl"; die "no_sync_exit: the verdict"; }
echo "PASS: a no_sync() mismatch fails alike bare and under ddptop; its verdict names the desync or the uneven steps, rank 0 and the line"
