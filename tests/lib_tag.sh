# tests/lib_tag.sh — our_workers: ddptop-worker processes of this test
# (they inherit DDPTOP_TEST_TAG); run_workers: those of every test of this
# run (run.sh gives each test the tag RUN.NAME). Sourced by run.sh and lib.sh.
our_workers() {
    local p
    for p in $(pgrep -x ddptop-worker); do
        { tr '\0' '\n' </proc/$p/environ; } 2>/dev/null | grep -qx "DDPTOP_TEST_TAG=$DDPTOP_TEST_TAG" && echo "$p"
    done
}
run_workers() {
    local p
    for p in $(pgrep -x ddptop-worker); do
        { tr '\0' '\n' </proc/$p/environ; } 2>/dev/null | grep -q "^DDPTOP_TEST_TAG=$DDPTOP_TEST_TAG\(\..*\)\?$" && echo "$p"
    done
}
