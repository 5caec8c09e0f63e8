# Bad --fault specs are refused before anything starts: one line naming the
# problem, exit 2.
. tests/lib.sh
for spec in kill:x@3 kill:1 slow:1:0ms stall:1@-2 unsafe-stop@ frobnicate kill:5@3; do
    "$DDPTOP" run -n 2 --headless -- --dataset synthetic --fault "$spec" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    [ $rc -eq 2 ] || die "--fault $spec: exit $rc, want 2"
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || { cat "$TMP/err"; die "--fault $spec: not one line"; }
    grep -q "^ddptop: --fault" "$TMP/err" || { cat "$TMP/err"; die "--fault $spec: line does not name --fault"; }
done
"$DDPTOP" run -n 2 --headless -- --fault 2>"$TMP/err"; [ $? -eq 2 ] || die "--fault without a value"
no_workers || die "workers left: $(our_workers)"
