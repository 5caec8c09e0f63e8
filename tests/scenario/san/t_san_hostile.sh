# The most hostile scenarios again, against the ASan + UBSan build (make
# SAN=1, in build-san/): lying pyzmq peers and a squatter, strangers without
# the keys and oversized frames, a Python peer's whole wire, FIFOs as
# files, corrupt checkpoints, damaged recordings, a rank killed in the
# connect, strangers on the telemetry stream. Any sanitizer report fails them (UBSan halts, ASan aborts, and
# the output is searched for a report too). Skipped when build-san/ is
# missing or older than the sources: `make test-san` builds it, then runs
# this. docs/RELIABILITY.md, "Sanitizers".
. tests/lib.sh
SAN_BUILD=${SAN_BUILD:-build-san}
[ -x "$SAN_BUILD/ddptop" ] && [ -x "$SAN_BUILD/ddptop-worker" ] ||
    skip "skip: no sanitizer build in $SAN_BUILD/ (make test-san builds it and runs this)"
# make itself says whether the two are up to date with the sources
if [ "$SAN_BUILD" = build-san ] &&
    ! make -q --no-print-directory SAN=1 build-san/ddptop build-san/ddptop-worker >/dev/null 2>&1; then
    skip "skip: build-san/ is older than the sources (make test-san rebuilds it and runs this)"
fi
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# No leak report at exit (it would change the exit codes the tests check);
# a small quarantine, given back to the system, so t_rogue's RSS bound
# measures ddptop rather than ASan's hold on freed 48 MB frames.
export ASAN_OPTIONS=detect_leaks=0:quarantine_size_mb=1:allocator_release_to_os_interval_ms=0
failed=()
for t in cluster/t_rogue_peers cluster/t_rogue wire/t_wire_python wire/t_tel_stream run/t_fifo train/t_resume_bad record/t_replay \
    train/t_connect_dead; do
    start=$(date +%s)
    BUILD=$SAN_BUILD timeout 240 bash "tests/scenario/$t.sh" >"$TMP/out" 2>&1
    rc=$?
    grep -q "runtime error:\|AddressSanitizer\|UndefinedBehaviorSanitizer" "$TMP/out" && rc=99
    case $rc in
    0) echo "ok: $t ($(($(date +%s) - start)) s)" ;;
    77) echo "skip: $t: $(tail -n 1 "$TMP/out")" ;;
    *)
        echo "FAIL: $t (exit $rc)"
        tail -n 30 "$TMP/out" | sed 's/^/    | /'
        failed+=("$t")
        ;;
    esac
done
[ ${#failed[@]} = 0 ] || die "under ASan + UBSan: ${failed[*]}"
echo "PASS: the hostile scenarios ran clean under ASan + UBSan"
