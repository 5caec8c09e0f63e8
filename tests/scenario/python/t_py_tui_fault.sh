# ddptop's f menu on a torch script (examples/ddp_basics.py, 2 ranks, in
# tmux): "slow rank 1" makes rank 1 a straggler (its steps, and rank 0's,
# take 50 ms more); "skip set_epoch" makes the next epochs repeat one order
# (the shards say so, and the adapter warns); "no barrier" then `d`: both
# ranks stop after the same step and destroy without the barrier, exit 0.
# Each fault is explained once by the rank it acts on (rank 0 for every
# rank's) and nothing is left running.
. tests/lib.sh
. tests/scenario/python/lib_py.sh
py_tui_start "" -n 2 -- examples/ddp_basics.py --data synthetic --limit 512 --epochs 100000 --batch-size 16 \
    --out "$TMP/final.pt"
wait_for 90 hasE " RUNNING .*step [1-9][0-9]" || dies "the script never trained 10 steps on screen"
tmux send-keys -t "$S" Down
tmux send-keys -t "$S" f
wait_for 5 has "slow rank 1 by 50 ms per step" || dies "the menu is not on rank 1"
tmux send-keys -t "$S" w
wait_for 20 has "fault: rank 1 sleeps 50 ms every step" || dies "rank 1 did not explain the slow fault"
sleep 2
tmux send-keys -t "$S" f e
# each rank acts at its next epoch after it hears of it (faults are not agreed, as in the C trainer)
for r in 0 1; do
    wait_for 30 grep -q "rank $r: fault: set_epoch is skipped" "$TMP/logs/rank-$r.log" || dies "rank $r kept set_epoch"
done
wait_for 10 has "iterated again at epoch" || dies "no warning after skip set_epoch"
tmux send-keys -t "$S" f b
wait_for 10 has "fault requested (f, 2 ranks): no barrier" || dies "no-barrier not requested"
py_tui_destroy
"$PY" - "$TMP" <<'PYEOF' || die "the faults did not act as the C trainer's do"
import json, statistics, sys
msgs = [json.loads(l) for l in open(f"{sys.argv[1]}/rec.jsonl")]
of = lambda k, r: [m for m in msgs if m.get("k") == k and m.get("r") == r]
said = lambda r, t: [m["t"] for m in of("log", r) if m["level"] == "warn" and m["text"].startswith(t)]
slow = said(1, "fault: rank 1 sleeps 50 ms every step")
assert len(slow) == 1 and not said(0, "fault: rank 1 sleeps"), "slow: said once, by rank 1 alone"
for r in (0, 1):   # a straggler slows everyone: rank 0 waits for rank 1 in each all-reduce
    before = [m["step_ms"] for m in of("step", r) if m["t"] < slow[0]][-20:]
    after = [m["step_ms"] for m in of("step", r) if m["t"] > slow[0]][5:]
    assert statistics.median(after) > statistics.median(before) + 40, (r, before[-5:], after[:5])
assert len(said(0, "fault: set_epoch is skipped")) == 1 and not said(1, "fault: set_epoch is skipped"), \
    [m for r in (0, 1) for m in of("log", r) if "set_epoch" in m["text"]]
skipped = said(0, "fault: set_epoch is skipped")[0]
for r in (0, 1):   # set_epoch worked, then from one epoch on every shard repeats the one before
    sh = [m for m in of("shard", r)]
    same = [k for k in range(1, len(sh)) if sh[k]["idx"] == sh[k - 1]["idx"]]
    assert same and same[0] >= 2, ("set_epoch worked before the fault", r, [m["epoch"] for m in sh])
    assert same == list(range(same[0], len(sh))), ("every epoch repeats after the fault", r, same)
    # each rank acts at its next epoch after it hears of it, not at rank 0's: around the ask
    assert abs(sh[same[0]]["t"] - skipped) < 5e9, ("acted far from the ask", r, sh[same[0]]["t"] - skipped)
assert len(said(0, "fault: no barrier before destroy")) == 1 and not said(1, "fault: no barrier")
stops = [[m["text"] for m in of("log", r) if m["text"].startswith("stopping after")] for r in (0, 1)]
assert stops[0] == stops[1] and len(stops[0]) == 1, stops
assert [m["status"] for r in (0, 1) for m in of("bye", r)] == [0, 0]
print("PASS: slow, skip-set-epoch and no-barrier from the f menu")
PYEOF
echo "PASS: the fault menu on a torch script"
