# Bad input gets one line naming the problem and exit 2, before anything runs.
. tests/lib.sh
check() { # expected-exit description cmd...
    local want=$1 what=$2; shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
    [ $rc -eq "$want" ] || die "$what: exit $rc, want $want: $(cat "$TMP/err")"
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || die "$what: error is not one line: $(cat "$TMP/err")"
    echo "ok: $what -> $(cat "$TMP/err")"
}
check 2 "unknown ddptop option" "$DDPTOP" run --bogus
check 2 "zero ranks" "$DDPTOP" run -n 0 --headless
check 2 "unknown trainer option" "$DDPTOP" run --headless -- --bogus
check 2 "bad model" "$DDPTOP" run --headless -- --model mlp:10
check 2 "bad lr" "$DDPTOP" run --headless -- --lr abc
check 2 "json without headless" "$DDPTOP" run --json
check 2 "missing init file" "$DDPTOP" run --headless -- --init-from "$TMP/nope.safetensors"
printf 'garbage' >"$TMP/bad.safetensors"
check 2 "corrupt init file" "$DDPTOP" run --headless -- --init-from "$TMP/bad.safetensors"
check 2 "fashion-mnist with a model that does not fit" "$DDPTOP" run --headless -- --dataset fashion-mnist --model mlp:20,3
check 2 "missing dataset dir" "$DDPTOP" run --headless -- --dataset fashion-mnist --data-dir "$TMP/none"
check 2 "unknown command" "$DDPTOP" frobnicate
no_workers || die "workers left running"
