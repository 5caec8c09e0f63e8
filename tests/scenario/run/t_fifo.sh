# A FIFO where a file is read (a checkpoint for --init-from or --resume, a
# dataset file, a recording, a key file) is refused at once with one line
# naming it, instead of hanging in open() until someone writes; and no
# option-check worker is left blocked behind.
. tests/lib.sh
case $BUILD in /*) W=$BUILD/ddptop-worker;; *) W=$PWD/$BUILD/ddptop-worker;; esac
mkfifo "$TMP/w.safetensors" "$TMP/rec.ddptop" "$TMP/keys"
mkdir -p "$TMP/ck/step-00000001" "$TMP/fm"
mkfifo "$TMP/ck/step-00000001/model.safetensors" "$TMP/ck/step-00000001/trainer.safetensors"
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz; do mkfifo "$TMP/fm/$f"; done
# Something that opens a FIFO for writing would unblock a hung reader: the
# test only ever reads, so a hang shows as a timeout.
check() { # what path cmd...
    local what=$1 path=$2; shift 2
    timeout 30 "$@" >"$TMP/out" 2>&1; local rc=$?
    [ $rc -ne 124 ] || die "$what: hung on the FIFO (timeout)"
    [ $rc -ne 0 ] || die "$what: exit 0 with a FIFO"
    grep -q "$path.*not a regular file (a FIFO)" "$TMP/out" || { cat "$TMP/out"; die "$what: no line naming the FIFO"; }
    echo "ok: $what -> exit $rc: $(grep -m1 "not a regular file" "$TMP/out")"
}
common="--dataset synthetic --model mlp:20,16,3 --eval-every 0"
check "--init-from FIFO" w.safetensors "$DDPTOP" run -n 2 --headless -- $common --init-from "$TMP/w.safetensors"
check "--resume of a FIFO checkpoint" model.safetensors "$DDPTOP" run -n 2 --headless -- $common --resume "$TMP/ck/step-00000001"
check "dataset FIFO" train-images "$DDPTOP" run -n 1 --headless -- --dataset fashion-mnist --data-dir "$TMP/fm" --eval-every 0
check "replay of a FIFO" rec.ddptop "$DDPTOP" replay "$TMP/rec.ddptop" --headless
check "export of a FIFO" rec.ddptop "$DDPTOP" export "$TMP/rec.ddptop" --jsonl "$TMP/x.jsonl"
check "worker key file FIFO" keys env DDPTOP_CONNECT=tcp://127.0.0.1:1 DDPTOP_KEYS="$TMP/keys" RANK=0 WORLD_SIZE=1 "$W" $common
check "attach key file FIFO" keys "$DDPTOP" attach tcp://127.0.0.1:1 --keys "$TMP/keys" --headless --wait 1
wait_for 10 no_workers || die "workers left: $(our_workers)"
