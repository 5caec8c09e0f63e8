# Every seed of the fuzz corpora (tests/fuzz/corpus: the codec, the store's
# messages, the safetensors reader, the recording reader) once under
# AddressSanitizer and UndefinedBehaviorSanitizer, built with clang's
# libFuzzer (mk/fuzz.mk). A crash or a sanitizer report fails the test.
. tests/lib.sh
command -v "${FUZZ_CC:-clang}" >/dev/null || skip "skip: no clang for the libFuzzer targets"
echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { (void)d; (void)n; return 0; }' >"$TMP/probe.c"
"${FUZZ_CC:-clang}" -fsanitize=fuzzer,address,undefined "$TMP/probe.c" -o "$TMP/probe" 2>/dev/null ||
    skip "skip: ${FUZZ_CC:-clang} cannot build libFuzzer targets"
make --no-print-directory BUILD="$BUILD" fuzz-corpus >"$TMP/out" 2>&1 || { cat "$TMP/out"; die "fuzz corpus failed"; }
cat "$TMP/out"
[ "$(grep -c 'inputs ok' "$TMP/out")" -eq 4 ] || die "not every fuzz target ran"
