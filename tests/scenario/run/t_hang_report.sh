# A hang report on disk (issue 30): when a hang verdict is made, ddptop
# gathers every rank's stacks and writes one directory beside the logs
# (--log-dir here): the verdict, the merged tree, each rank's last
# collectives, the logs' tails, the job's versions and a README; its path
# is in the events, the summary (--json's "hang_report", and nothing else
# beside it) and the exit line; written once per hang, bounded in size.
. tests/lib.sh
"$DDPTOP" run -n 2 --headless --json --hang-after 2 --timeout 12 --stop-grace 1 --log-dir "$TMP/logs" -- \
    --dataset synthetic --model mlp:16,32,4 --steps 100000 --fault stall:1@50 >"$TMP/out.json" 2>"$TMP/err.txt"
rc=$?
[ $rc -eq 1 ] || { tail "$TMP/out.json" "$TMP/err.txt"; die "exit $rc, want 1 (a hang)"; }
d=$TMP/logs/hang-1
grep -q "\"hang report written: $d\"" "$TMP/out.json" || { grep '"event"' "$TMP/out.json" | tail; die "no event naming the report"; }
grep '"summary"' "$TMP/out.json" | grep -q "\"hang_report\":\"$d\"" || die "the summary does not name the report"
grep -q "hang report in" "$TMP/err.txt" && die "--json: a line beside the summary's \"hang_report\""
[ "$(ls -d "$TMP"/logs/hang-* | wc -l)" -eq 1 ] || die "more than one report for one hang: $(ls "$TMP/logs")"
for f in README.txt verdict.txt tree.txt collectives.txt versions.txt; do
    [ -s "$d/$f" ] || die "$f missing or empty in the report"
done
[ -e "$d/logs/rank-0.txt" ] && [ -e "$d/logs/rank-1.txt" ] || die "the logs' tails are missing"
grep -q "^rank 1 stopped stepping after step 50" "$d/verdict.txt" || { cat "$d/verdict.txt"; die "the verdict does not blame rank 1"; }
grep -Eq " 1 +\+ \(in no collective\)" "$d/tree.txt" && grep -Eq " 0 +\+ allreduce #[0-9]+ bucket 0" "$d/tree.txt" \
    || { cat "$d/tree.txt"; die "the tree does not split rank 1 from rank 0 in its all-reduce"; }
grep -Eq "^0 [0-9]+ allreduce 0 .* in-flight-since " "$d/collectives.txt" || { head "$d/collectives.txt"; die "rank 0's collective in flight missing"; }
grep -Eq "^1 [0-9]+ allreduce 0 [0-9]+ [0-9]+ 683 float32 done " "$d/collectives.txt" || die "rank 1's collectives without payload"
grep -q "stops stepping at step 50" "$d/logs/rank-1.txt" || die "rank 1's log tail misses its fault line"
grep -q "backend gloo, device cpu, world 2" "$d/versions.txt" || die "versions.txt"
size=$(du -sk "$d" | cut -f1)
[ "$size" -lt 2048 ] || die "the report takes ${size} kB"
echo "ok: hang report $d ($size kB)"
[ -z "$(ls "$d/stacks")" ] || die "stacks of C ranks: they have none (their frames are in the tree)"

# A torch script's ranks: each one's own dump, every thread, beside the tree.
. tests/lib_py.sh
py_run -n 2 --headless --hang-after 3 --timeout 10 --stop-grace 1 --log-dir "$TMP/pylogs" -- --fault stall:1@20 \
    examples/ddp_basics.py --data synthetic --epochs 100 >"$TMP/py.txt" 2>"$TMP/py.err"
d=$TMP/pylogs/hang-1
grep -q "^hang report: $d$" "$TMP/py.txt" || { tail -4 "$TMP/py.txt"; die "torch: the summary does not name the report"; }
grep -q "^ddptop: hang report in $d " "$TMP/py.err" || { cat "$TMP/py.err"; die "the exit line does not name the report"; }
for k in 0 1; do
    grep -Eq "^(Current thread|Thread) 0x" "$d/stacks/rank-$k.txt" || { head -3 "$d/stacks/rank-$k.txt"; die "rank $k: no thread in its dump"; }
done
grep -q 'ddp_basics.py", line [0-9]* in main' "$d/stacks/rank-1.txt" || die "rank 1's dump has no frame of the script"
grep -Eq "^\* +1 +1 +\+ ddp_basics.py:[0-9]+ main" "$d/tree.txt" || { cat "$d/tree.txt"; die "the tree does not set rank 1 apart"; }
echo "ok: torch ranks' dumps and tree in $d"
wait_for 10 no_ranks || die "ranks left running"
