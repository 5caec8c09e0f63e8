# `ddptop run SCRIPT` in a user's environment that has torch and nothing
# else (a venv where `import zmq` and `import msgpack` fail, though the
# system's python3-zmq and python3-msgpack are installed), with that venv's
# python3 first on PATH and no --python, as an activated venv is: the lesson
# script trains on both ranks with the adapter's own codec and ddptop's
# libzmq (the ranks map libzmq.so.5 and neither pyzmq's nor msgpack's
# extension), every step's loss reaches ddptop, c writes a checkpoint of one
# agreed step, d stops both ranks after the same step, each exits 0. Through
# the C++ comm hook and step engine (steps encoded in C) and through the
# Python ones (DDPTOP_PY_HOOK=python: every step encoded by _msgpack.py,
# the path torch 2.x and CUDA take).
. tests/lib.sh
. tests/scenario/python/lib_py.sh
py_venv "$TMP/venv" torch
VBIN=$TMP/venv/bin
ROOT=$TMP
CLEANUPS+=("rm -rf '$ROOT'")
for hook in $(py_hooks); do
TMP=$ROOT/$hook
mkdir -p "$TMP"
S=ddptop-py-$$-$RANDOM
CLEANUPS+=("command tmux -L $S kill-server" "for p in \$(our_ranks); do kill -9 \$p; done")
tmux new-session -d -s "$S" -x 120 -y 40 \
  "cd '$PWD' && unset PYTHONPATH DDPTOP_WORKER DDPTOP_PYTHON; PATH='$VBIN':\$PATH DDPTOP_TEST_TAG='$DDPTOP_TEST_TAG' \
   LANG=C.UTF-8 DDPTOP_CKPT_DIR='$TMP/ck' DDPTOP_PY_HOOK='$([ $hook = python ] && echo python)' '$DDPTOP' run -n 2 --record '$TMP/rec' --log-dir '$TMP/logs' \
   examples/ddp_basics.py --data synthetic --epochs 100000 --batch-size 16 --out '$TMP/final.pt' \
   >'$TMP/after.txt' 2>&1; echo \$? >'$TMP/exit'; sleep 120"
wait_for 120 hasE " RUNNING .*step [1-9][0-9]" || { cat "$TMP/after.txt" 2>/dev/null; dies "the script never trained 10 steps on screen"; }
# the ranks: the venv's python3 (the default, found on PATH), ddptop's libzmq, no pyzmq or msgpack
for r in 0 1; do
    pid=$(py_rank_pid $r) || dies "no process for rank $r"
    argv0=$(tr '\0' '\n' </proc/$pid/cmdline | head -1)
    [ "$argv0" = "$VBIN/python3" ] || dies "rank $r runs $argv0, not the python3 on PATH ($VBIN/python3)"
    grep -q 'libzmq\.so\.5' /proc/$pid/maps || dies "rank $r has not loaded libzmq.so.5"
    ! grep -Eq '/msgpack/|/zmq/|pyzmq' /proc/$pid/maps || dies "rank $r loaded pyzmq or msgpack: $(grep -E '/msgpack/|/zmq/|pyzmq' /proc/$pid/maps | head -2)"
done
tmux send-keys -t "$S" c
wait_for 30 test -e "$TMP/ck/latest/model.safetensors" || dies "no checkpoint after c"
wait_for 10 has "checkpoint step" || dies "no checkpoint event on screen"
py_tui_destroy
grep -q "rank 0: exit 0" "$TMP/after.txt" && grep -q "rank 1: exit 0" "$TMP/after.txt" \
    || { cat "$TMP/after.txt"; die "a rank did not exit 0"; }
"$PY" - "$TMP" <<'PYEOF' || die "what reached ddptop from the torch-only ranks"
import json, math, os, sys
tmp = sys.argv[1]
msgs = [json.loads(l) for l in open(f"{tmp}/rec.jsonl")]
of = lambda k, r: [m for m in msgs if m.get("k") == k and m.get("r") == r]
assert [len(of("hello", r)) for r in (0, 1)] == [1, 1], "hellos"
stops = [[m["text"] for m in of("log", r) if m["text"].startswith("stopping after")] for r in (0, 1)]
assert stops[0] == stops[1] and len(stops[0]) == 1, stops
S = int(stops[0][0].split()[3].rstrip(":"))
assert [m["step"] for r in (0, 1) for m in of("bye", r)] == [S, S] and \
       [m["status"] for r in (0, 1) for m in of("bye", r)] == [0, 0], of("bye", 0) + of("bye", 1)
for r in (0, 1):
    steps = of("step", r)
    assert sorted(m["step"] for m in steps) == list(range(1, S + 1)), (r, len(steps), S)
    assert all(isinstance(m["loss"], float) and math.isfinite(m["loss"]) and m["loss"] > 0 for m in steps), r
ck = [m for m in of("ckpt", 0) if "/ck/" in m["path"]]
# c's checkpoint, and d's final one at the stop step (one, when c was that step)
assert all(m["ok"] for m in ck) and 1 <= ck[0]["step"] <= S and ck[-1]["step"] == S and len(ck) <= 2, ck
C = ck[0]["step"]
assert os.path.realpath(f"{tmp}/ck/latest") == os.path.realpath(f"{tmp}/ck/step-{S:08d}")
for step in sorted({C, S}):
    for name in ("model.safetensors", "trainer.safetensors"):
        with open(f"{tmp}/ck/step-{step:08d}/{name}", "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            assert json.loads(f.read(n))["__metadata__"], name
print(f"PASS: {S} steps with losses on both ranks, checkpoint at step {C}, stopped after step {S}")
PYEOF
grep -q "DDP comm hook: $([ $hook = python ] && echo Python || echo C++)" "$TMP/rec.jsonl" \
    || die "$hook: the ranks did not say the $hook comm hook ran"
command tmux -L "$S" kill-server 2>/dev/null
done
TMP=$ROOT
echo "PASS: a torch script in an environment with torch alone (no pyzmq, no msgpack)"
