# The merged stack tree of ddptop's own C trainer, whose ranks have no
# Python stack: each rank's phase and collective in flight are its frames.
# 3 ranks, rank 1 SIGSTOPped: in --json's {"k":"stacks"} after the hang,
# ranks 0,2 wait in the all-reduce the verdict names, rank 1 is alone (odd,
# first) in no collective with its process stopped, every frame stuck; and
# `ddptop stacks ENDPOINT` prints the same while the job still runs.
. tests/lib.sh
out=$TMP/out.jsonl
"$DDPTOP" run -n 3 --headless --json --hang-after 3 --stop-grace 2 --log-dir "$TMP/logs" -- --dataset synthetic \
    --model mlp:16,32,4 --epochs 100000 --batch-size 8 --no-final-ckpt >"$out" 2>"$TMP/err" &
dp=$!
CLEANUPS+=("kill -9 $dp")
wait_for 60 grep -qs '"k":"progress".*"step":[1-9]' "$out" || { cat "$out" "$TMP/err"; die "the job never trained"; }
victim=
for p in $(our_workers); do
    [ "$(tr '\0' '\n' </proc/$p/environ | sed -n 's/^RANK=//p')" = 1 ] && victim=$p
done
[ -n "$victim" ] || die "no rank 1 process"
kill -STOP "$victim"
CLEANUPS+=("kill -CONT $victim")
wait_for 30 grep -q '"k":"stacks"' "$out" || { tail -5 "$out"; die "no stacks object after the hang"; }
EP=$(tr '\0' '\n' </proc/$victim/environ | sed -n 's/^DDPTOP_CTL=//p')
timeout 60 "$DDPTOP" stacks "$EP" >"$TMP/tree.txt" 2>"$TMP/tree.err" || { cat "$TMP/tree.err"; die "ddptop stacks failed"; }
cat "$TMP/tree.txt"
"$PY" - "$(grep '"k":"hang"' "$out" | head -1)" "$(grep '"k":"stacks"' "$out" | head -1)" <<'PYEOF' || die "the tree is wrong"
import json, sys
hang = json.loads(sys.argv[1])
t = json.loads(sys.argv[2])["tree"]
assert t["world"] == 3 and t["compared"], t
by = {n["frame"]: n for n in t["nodes"]}
coll = f'allreduce #{hang["seq"]} bucket {hang["bucket"]}'
assert by[coll]["ranks"] == "0,2" and by[coll]["stuck"], by.get(coll, t)
alone = by["(in no collective)"]
assert alone["ranks"] == "1" and alone["odd"] and alone["stuck"], alone
assert by["(process stopped)"]["ranks"] == "1", by
assert by["ddptop-worker"]["ranks"] == "0-2" and by["phase train"]["ranks"] == "0-2", by
kids = [n["frame"] for n in t["nodes"] if n["parent"] == by["phase train"]["id"]]
assert kids == ["(in no collective)", coll], kids
assert all(n["stuck"] for n in t["nodes"]), t
PYEOF
grep -Eq '^\* ! +1 +1 +\+ \(in no collective\)$' "$TMP/tree.txt" || die "ddptop stacks: rank 1 not alone"
grep -Eq '^\* +2 +0,2 +\+ allreduce #[0-9]+ bucket 0$' "$TMP/tree.txt" || die "ddptop stacks: 0,2 not in the all-reduce"
kill -CONT "$victim"
kill -TERM "$dp"
ended_within 30 $dp || die "ddptop did not end after SIGTERM"
wait_for 10 no_workers || die "workers left running: $(our_workers)"
echo "PASS: the C trainer's ranks merged by phase and collective, the stopped rank alone"
