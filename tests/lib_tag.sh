# tests/lib_tag.sh — our_workers: ddptop-worker processes of this test
# (they inherit DDPTOP_TEST_TAG); run_workers: those of every test of this
# run (run.sh gives each test the tag RUN.NAME). Sourced by run.sh and lib.sh.
# tagged_workers RE: the workers whose DDPTOP_TEST_TAG matches RE (grep BRE).
tagged_workers() {
    local p
    for p in $(pgrep -x ddptop-worker); do
        { tr '\0' '\n' </proc/$p/environ; } 2>/dev/null | grep -q "^DDPTOP_TEST_TAG=$1$" && echo "$p"
    done
}
our_workers() { tagged_workers "$DDPTOP_TEST_TAG"; }
run_workers() { tagged_workers "$DDPTOP_TEST_TAG\(\..*\)\?"; }
