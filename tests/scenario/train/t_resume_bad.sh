# A checkpoint that cannot be resumed — truncated, corrupt, another model
# shape, another world size, another optimizer — is one line naming the
# problem and exit 2 before anything trains, and the checkpoint is left as
# it was.
. tests/lib.sh
case $BUILD in /*) W=$BUILD/ddptop-worker;; *) W=$PWD/$BUILD/ddptop-worker;; esac
common="--dataset synthetic --model mlp:20,16,3 --batch-size 16 --eval-every 0"
"$DDPTOP" run -n 2 --headless -- $common --steps 10 --momentum 0.9 --ckpt-dir "$TMP/ck" >"$TMP/o" 2>&1 || { cat "$TMP/o"; die "setup run failed"; }
good=$TMP/ck/step-00000010
sum_before=$(cat "$good"/*.safetensors | md5sum)
check() { # description want-in-message cmd...
    local what=$1 want=$2; shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
    [ $rc -eq 2 ] || die "$what: exit $rc, want 2: $(cat "$TMP/err")"
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || die "$what: error is not one line: $(cat "$TMP/err")"
    grep -q -- "$want" "$TMP/err" || die "$what: error does not say \"$want\": $(cat "$TMP/err")"
    echo "ok: $what -> $(cat "$TMP/err")"
}
check "another model shape" "shape" "$DDPTOP" run -n 2 --headless -- --dataset synthetic --model mlp:20,17,3 --momentum 0.9 --resume "$good"
check "another optimizer" "adamw" "$DDPTOP" run -n 2 --headless -- $common --optimizer adamw --resume "$good"
check "no such checkpoint" "No such file" "$DDPTOP" run -n 2 --headless -- $common --resume "$TMP/nothing"
check "resume and init-from together" "exclude" "$DDPTOP" run -n 2 --headless -- $common --resume "$good" --init-from "$good/model.safetensors"
# The world size is checked by every rank (and by the up-front check when it
# knows WORLD_SIZE): exit 2 from the worker, one line.
check "another world size" "world size 2" env WORLD_SIZE=3 DDPTOP_CHECK_ARGS=1 "$W" $common --momentum 0.9 --resume "$good"
"$DDPTOP" run -n 3 --headless -- $common --momentum 0.9 --resume "$good" >"$TMP/o3" 2>&1 && die "a 3-rank job resumed a 2-rank checkpoint"
grep -q "world size 2, this job has 3" "$TMP/o3" || { cat "$TMP/o3"; die "the 3-rank job did not say why it stopped"; }
for f in model trainer; do
    mkdir -p "$TMP/cut-$f" && cp "$good"/*.safetensors "$TMP/cut-$f/"
    truncate -s 200 "$TMP/cut-$f/$f.safetensors"
    check "$f.safetensors truncated" "$f.safetensors" "$DDPTOP" run -n 2 --headless -- $common --momentum 0.9 --resume "$TMP/cut-$f"
    mkdir -p "$TMP/flip-$f" && cp "$good"/*.safetensors "$TMP/flip-$f/"
    "$PY" -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[-2]^=1; open(p,'wb').write(b)" "$TMP/flip-$f/$f.safetensors"
    check "$f.safetensors with a flipped bit" "checksum" "$DDPTOP" run -n 2 --headless -- $common --momentum 0.9 --resume "$TMP/flip-$f"
done
[ "$(cat "$good"/*.safetensors | md5sum)" = "$sum_before" ] || die "the checkpoint changed"
no_workers || die "workers left running"
