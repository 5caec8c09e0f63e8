# `make run` builds only what it runs (issue 28, item 3): ddptop, the worker
# (and the CPU-only worker of a CUDA build), the adapter's link and its C++
# hook; no test, tool, benchmark, example or GPU test binary. `make test`
# still builds every test and tool it runs. Read from make's dry run with
# every target out of date (-B), into a scratch BUILD: what a fresh clone's
# `make run` would do, without doing it.
. tests/lib.sh
command -v make >/dev/null || skip "skip: no make"
b=$TMP/b
# dry NAME TARGET: make -n -B TARGET into $TMP/NAME.log (this test's own
# make: none of the make that runs the tests' flags)
dry() {
    env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -n -B --no-print-directory "$2" BUILD="$b" V=1 >"$TMP/$1.log" 2>&1 \
        || die "make -n $2 failed: $(tail -5 "$TMP/$1.log")"
}
# made LOG: the programs and libraries a dry run links (-o, not objects)
made() { grep -o -- "-o $b/[^ ]*" "$1" | sed "s|^-o $b/||" | grep -v '\.o$' | sort -u; }

dry run run
made "$TMP/run.log" >"$TMP/run.made"
for p in ddptop ddptop-worker; do
    grep -qx "$p" "$TMP/run.made" || die "make run does not build $p: $(tr '\n' ' ' <"$TMP/run.made")"
done
extra=$(grep -v -x -e ddptop -e ddptop-worker -e cpu/ddptop-worker "$TMP/run.made")
[ -z "$extra" ] || die "make run builds what it does not run: $(echo $extra)"
srcs=$(grep -oE -- ' -c (tests|examples|bench)/[^ ]*' "$TMP/run.log" | sort -u)
[ -z "$srcs" ] || die "make run compiles test/example sources: $(echo $srcs)"
grep -q "ln -sfn .*workers/python)\" $b/python\$" "$TMP/run.log" || die "make run does not link the adapter as $b/python"
if [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ] && [ "${NO_CUDA:-}" != 1 ]; then
    grep -qx cpu/ddptop-worker "$TMP/run.made" || die "a CUDA build's make run does not build the CPU-only worker ddptop starts"
fi
if [ -f /usr/include/torch/csrc/distributed/c10d/comm.hpp ] && [ -f /usr/include/pybind11/pybind11.h ]; then
    grep -q -- '-o workers/python/ddptop/_hook.*\.so' "$TMP/run.log" || die "make run does not build the adapter's C++ hook"
fi
echo "ok: make run builds $(tr '\n' ' ' <"$TMP/run.made")and the adapter, nothing else"
grep -qx "\./$b/ddptop" "$TMP/run.log" || die "make run does not start $b/ddptop"

dry test test
made "$TMP/test.log" >"$TMP/test.made"
for s in tests/unit/test_*.c tests/tools/*.c; do
    n=tests/$(basename "$s" .c)
    grep -qx "$n" "$TMP/test.made" || die "make test does not build $n, which it runs"
done
grep -qx tests/test_gpu_emu "$TMP/test.made" || die "make test does not build tests/test_gpu_emu"
echo "ok: make test builds every test and tool ($(grep -c '^tests/' "$TMP/test.made") programs)"
