# Teaching fault skip-set-epoch: the recorded shard messages of epoch 1 carry
# exactly epoch 0's indices on every rank (without the fault they differ),
# and rank 0 says why once.
. tests/lib.sh
rec() {
    timeout 60 "$DDPTOP" run -n 2 --headless --record "$TMP/$1.rec" -- --dataset synthetic --synthetic-size 64 \
        --model mlp:16,32,4 --epochs 2 --batch-size 8 --no-final-ckpt --eval-every 0 "${@:2}" \
        >"$TMP/$1.out" 2>&1 || { cat "$TMP/$1.out"; die "job $1 failed"; }
    "$DDPTOP" export "$TMP/$1.rec" --jsonl "$TMP/$1.jsonl" || die "export $1 failed"
}
rec plain
rec skip --fault skip-set-epoch
grep -q "warning: fault: set_epoch is skipped" "$TMP/skip.out" || die "no fault sentence"
"$PY" - "$TMP/plain.jsonl" "$TMP/skip.jsonl" <<'PYEOF' || die "shard orders wrong"
import json, sys
def shards(path):
    s = {}
    for line in open(path):
        m = json.loads(line)
        if m.get("k") == "shard":
            s[(m["r"], m["epoch"])] = m["idx"]
    assert sorted(s) == [(0, 0), (0, 1), (1, 0), (1, 1)], sorted(s)
    return s
plain, skip = shards(sys.argv[1]), shards(sys.argv[2])
for r in (0, 1):
    assert plain[(r, 0)] != plain[(r, 1)], "set_epoch should reorder"
    assert skip[(r, 0)] == skip[(r, 1)], f"rank {r}: epoch 1 does not repeat epoch 0"
    assert skip[(r, 0)] == plain[(r, 0)]
print("epoch 1 repeats epoch 0 on both ranks")
PYEOF
