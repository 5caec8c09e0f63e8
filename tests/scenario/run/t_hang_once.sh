# One stall is one hang report, and the job's verdict blames the stalled
# rank. Rank 1 of 4 stalls after step 10 (--fault stall:1@10): --json prints
# exactly one {"k":"hang"} and one "hang:" event however long the others
# wait; when their all-reduce times out (--timeout) the verdict says rank 1
# stalled, not that rank 0 exited 1. On the screen the hang is one events
# line updated in place (its wait grows), `d` then counts down to the SIGTERM
# of --stop-grace on the status line, and the verdict after the ladder names
# rank 1 and says ranks 0-3 were stopped by ddptop.
. tests/lib.sh
TRAIN=(--dataset synthetic --model mlp:16,32,4 --epochs 100000 --batch-size 8 --no-final-ckpt --fault stall:1@10)
out=$TMP/out.jsonl
timeout 90 "$DDPTOP" run -n 4 --headless --json --hang-after 1 --stop-grace 2 --timeout 8 -- "${TRAIN[@]}" >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$out"; die "ddptop exited $rc, want 1"; }
n=$(grep -c '"k":"hang"' "$out")
[ "$n" -eq 1 ] || { grep hang "$out"; die "$n hang objects for one stall, want 1"; }
n=$(grep -c '"text":"hang: ' "$out")
[ "$n" -eq 1 ] || { grep hang "$out"; die "$n hang events for one stall, want 1"; }
"$PY" - "$(grep '"k":"summary"' "$out")" <<'PYEOF' || die "summary verdict wrong"
import json, sys
v = json.loads(sys.argv[1])["verdict"]
print(v)
assert v.startswith("job failed: rank 1 stalled at step 10 (ranks 0,2,3 waited for it in all-reduce #"), v
assert "ranks 0,2,3 ended: exit 1" in v and "rank 1 was stopped by ddptop (SIGTERM)" in v, v
PYEOF
wait_for 5 no_workers || die "workers left: $(our_workers)"

# the screen: one line, updated in place; the countdown; the verdict
. tests/lib_tui.sh
start_feed 120 36 "DDPTOP_WORKER=$PWD/$BUILD/ddptop-worker" -n 4 --hang-after 1 --stop-grace 8 -- "${TRAIN[@]}"
# the hang's event: its first row and the rows it wraps onto (16 columns in)
hang_rows() {
    screen | awk '/^[0-9:]+ ddptop hang: /{on=1; print; next} on && /^                [^ ]/{print; next} {on=0}' |
        tr -s ' \n' ' '
}
hang_named() { hang_rows | grep -Eq 'ddptop hang: rank 1 .*; ranks 0,2,3 wait in all-reduce #[0-9]+ \(bucket 0, [0-9.]+ s\) for it'; }
wait_for 30 hang_named || dies "no hang event line"
first=$(hang_rows)
hang_moved() { [ "$(hang_rows)" != "$first" ]; }
wait_for 20 hang_moved || dies "the hang line did not update in place"
n=$(screen | grep -Ec '^[0-9:]+ ddptop hang: ')
[ "$n" -eq 1 ] || dies "$n hang lines in the events panel, want 1"
keys d
wait_for 10 hasE 'SIGTERM in [0-9]+ s \(--stop-grace\)' || dies "no countdown to SIGTERM"
a=$(screen | grep -Eo 'SIGTERM in [0-9]+ s' | grep -Eo '[0-9]+')
wait_for 10 sh -c "command tmux -L $TS capture-pane -p -t $TS | grep -Eo 'SIGTERM in [0-9]+ s' | grep -Eo '[0-9]+' |
    awk '\$1 < $a { ok = 1 } END { exit !ok }'" || dies "the countdown stayed at $a s"
wait_for 30 has " FAILED " || dies "the ladder did not end the job"
wait_for 10 has "^job failed: rank 1 stalled at step 10" || dies "the status line does not blame rank 1"
keys q
left_with 1
grep -q "job failed: rank 1 stalled at step 10 (ranks 0,2,3 waited for it in all-reduce #[0-9]*); ranks 0-3 were stopped by ddptop (SIGTERM)" \
    "$TMP/after.txt" || { cat "$TMP/after.txt"; die "the verdict does not blame rank 1"; }
wait_for 5 no_workers || die "workers left: $(our_workers)"
echo "one hang, one report, the right rank blamed"
