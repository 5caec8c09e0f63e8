# A script that starts its own ranks, as PyTorch's DDP tutorial does
# (examples/ddp_spawn.py: torch.multiprocessing.spawn, 2 ranks, gloo, its own
# fixed MASTER_PORT), run once by `ddptop run SCRIPT` (no -n): both spawned
# ranks say hello with the world they declare and train on screen; w shows
# rank 1's Python stacks; p pauses and resumes both; c has rank 0 write a
# checkpoint that loads into the script's model; d stops both after the same
# step, every rank exits 0 and nothing is left running. The same with
# multiprocessing.Process and the fork start method, headless, to its end.
# The kill fault in a spawned rank: its end is SIGKILL (as its launcher
# reaped it), and --max-restarts runs the script again, followed again.
# -n 2 with such a script is refused in one line, exit 2, before anything
# starts; a call that check cannot see is refused when it is made, the
# job's last line saying why, exit 2 too; spawn.scan's verdicts on a few
# scripts.
. tests/lib.sh
. tests/scenario/python/lib_py.sh
"$PY" -c 'import safetensors' 2>/dev/null || skip "no safetensors for $PY"
. tests/scenario/python/lib_spawn.sh

# ---- what ddptop's check calls a script that starts its own ranks (spawn.scan) ----
PYTHONPATH=workers/python "$PY" - "$TMP" <<'PYEOF' || die "spawn.scan misjudged a script"
import sys
from ddptop.spawn import scan
tmp = sys.argv[1]
cases = {
    # the DDP tutorial
    "import torch.multiprocessing as mp\nmp.spawn(f, args=(2,), nprocs=2, join=True)\n": "torch.multiprocessing.spawn",
    "from torch.multiprocessing import start_processes as sp\nsp(f, nprocs=2, start_method='fork')\n":
        "torch.multiprocessing.start_processes",
    "import torch\ntorch.multiprocessing.spawn(f, nprocs=2)\n": "torch.multiprocessing.spawn",
    # "Writing distributed applications": a Process whose target reaches init_process_group
    "import torch.distributed as dist\nfrom multiprocessing import Process\n"
    "def init(r, n, fn):\n    dist.init_process_group('gloo', rank=r, world_size=n)\n    fn()\n"
    "def run(r, n):\n    init(r, n, print)\n"
    "for r in range(2):\n    Process(target=run, args=(r, 2)).start()\n": "multiprocessing.Process",
    # a torchrun-style script with a side process that is no rank
    "import multiprocessing as mp\nimport torch.distributed as dist\ndef produce(q):\n    q.put(1)\n"
    "dist.init_process_group('gloo')\nmp.Process(target=produce, args=(None,)).start()\n": None,
    "import torch.distributed as dist\ndist.init_process_group('gloo')\n": None,
    "this is not python(": None,
}
for i, (src, want) in enumerate(cases.items()):
    p = f"{tmp}/scan{i}.py"
    open(p, "w").write(src)
    got = scan(p)
    assert (got and got[0]) == want, (src, got, want)
print("PASS: spawn.scan")
PYEOF

# ---- -n 2: refused before anything starts ----
port=$(free_port 1)
timeout 60 "$DDPTOP" run -n 2 --python "$PY" --headless examples/ddp_spawn.py --port "$port" >"$TMP/n2.txt" 2>&1
rc=$?
[ "$rc" = 2 ] || { cat "$TMP/n2.txt"; die "-n 2 with an mp.spawn script: exit $rc, not 2"; }
[ "$(wc -l <"$TMP/n2.txt")" = 1 ] && grep -q "starts its own ranks (torch.multiprocessing.spawn, line [0-9]*).*without -n" \
    "$TMP/n2.txt" || { cat "$TMP/n2.txt"; die "-n 2 was not refused in one line that says why"; }
# a call the check cannot see (getattr), of mp.spawn or of a Process whose
# child calls init_process_group: refused when made, the job's last line
# says why, exit 2 (a usage error, as before launch), no --max-restarts
# restart, nothing left running
sed 's/mp\.spawn(demo_basic/getattr(mp, "spawn")(demo_basic/; s/ctx\.Process(/getattr(ctx, "Process")(/' \
    examples/ddp_spawn.py >"$TMP/hidden.py"
grep -q 'getattr(mp, "spawn")' "$TMP/hidden.py" && grep -q 'getattr(ctx, "Process")' "$TMP/hidden.py" || die "no hidden calls"
for start in spawn fork; do
    [ "$start" = spawn ] && what="torch.multiprocessing.spawn" || what="a process it started called init_process_group"
    port=$(free_port 1)
    # --max-restarts: a refusal is not run again
    timeout 120 "$DDPTOP" run -n 2 --max-restarts 1 --python "$PY" --headless "$TMP/hidden.py" --port "$port" \
        --start $start >"$TMP/hid-$start.txt" 2>&1
    rc=$?
    [ "$rc" = 2 ] || { cat "$TMP/hid-$start.txt"; die "-n 2, a hidden $start: exit $rc, not 2"; }
    ! grep -q "restart 1/1" "$TMP/hid-$start.txt" || { cat "$TMP/hid-$start.txt"; die "-n 2, a hidden $start: restarted"; }
    grep -v "^ddptop: the ranks' logs are kept" "$TMP/hid-$start.txt" | tail -1 |
        grep -qx "job refused: ddptop run -n 2: the script starts its own ranks ($what), .*without -n .*" ||
        { cat "$TMP/hid-$start.txt"; die "-n 2, a hidden $start: the last line does not say why"; }
    wait_for 10 none_tagged || die "-n 2, a hidden $start: left running: $(tagged)"
done

# ---- mp.spawn in the TUI: c, d ----
command -v tmux >/dev/null || skip "tmux not installed"
S=ddptop-py-$$-$RANDOM
CLEANUPS+=("command tmux -L $S kill-server")
port=$(free_port 1)
tmux new-session -d -s "$S" -x 120 -y 40 \
  "cd '$PWD' && DDPTOP_TEST_TAG='$DDPTOP_TEST_TAG' DDPTOP_CKPT_DIR='$TMP/ck' LANG=C.UTF-8 '$DDPTOP' run --python '$PY' --record '$TMP/rec' --log-dir '$TMP/logs' examples/ddp_spawn.py --port $port --steps 1000000 --out '$TMP/final.pt' >'$TMP/after.txt' 2>&1; echo \$? >'$TMP/exit'; sleep 120"
wait_for 90 hasE " RUNNING .*step [1-9][0-9]" || dies "the spawned ranks never trained 10 steps on screen"
# w: rank 1's Python stacks (a child of the launched process, writing to its log)
# (Down until rank 1 is selected: the rows are rebuilt once the children's world is known)
on_rank1() { hasE "▶ +1 " || { tmux send-keys -t "$S" Down; false; }; }
wait_for 20 on_rank1 || { screen; dies "rank 1 never selected"; }
tmux send-keys -t "$S" w
wait_for 15 has "rank 1 Python stacks" || { screen; dies "w did not open rank 1's stacks page"; }
wait_for 15 has "Current thread 0x\|Thread 0x" || dies "no stack of rank 1 shown"
tmux send-keys -t "$S" Escape
page_closed() { ! has "Python stacks"; }
wait_for 10 page_closed || dies "Esc did not close the stacks page"
# p pauses both spawned ranks, p resumes them
tmux send-keys -t "$S" p
wait_for 20 has "paused: all 2 ranks at step" || dies "p did not pause both spawned ranks"
tmux send-keys -t "$S" p
wait_for 20 hasE " RUNNING " || dies "p did not resume"
tmux send-keys -t "$S" c
wait_for 30 test -e "$TMP/ck/latest/model.safetensors" || dies "no checkpoint after c"
tmux send-keys -t "$S" d
wait_for 60 none_tagged || dies "processes still running after d: $(tagged)"
wait_for 10 has "job done" || dies "the screen does not say the job is done"
tmux send-keys -t "$S" q
wait_for 15 test -s "$TMP/exit" || dies "ddptop did not leave after q"
[ "$(cat "$TMP/exit")" = 0 ] || { cat "$TMP/after.txt"; die "ddptop exited $(cat "$TMP/exit")"; }
grep -q "rank 0: exit 0" "$TMP/after.txt" && grep -q "rank 1: exit 0" "$TMP/after.txt" \
    || { cat "$TMP/after.txt"; die "a rank did not exit 0"; }
"$DDPTOP" export "$TMP/rec" --jsonl "$TMP/rec.jsonl" || die "export failed"
"$PY" - "$TMP" <<'PYEOF' || die "the spawned ranks were not steered at one step"
import json, sys
import torch
from safetensors.torch import load_file
tmp = sys.argv[1]
msgs = [json.loads(l) for l in open(f"{tmp}/rec.jsonl")]
of = lambda k, r: [m for m in msgs if m.get("k") == k and m.get("r") == r]
hellos = [m for m in msgs if m.get("k") == "hello"]
assert sorted(m["r"] for m in hellos) == [0, 1] and {m["world"] for m in hellos} == {2}, hellos
assert len({m["pid"] for m in hellos}) == 2, "the two ranks are not two processes"
ck = [m for m in of("ckpt", 0) if "/ck/" in m["path"]]
assert ck and ck[0]["ok"] and not of("ckpt", 1), (ck, of("ckpt", 1))
stops = [[m["text"] for m in of("log", r) if m["text"].startswith("stopping after")] for r in (0, 1)]
assert stops[0] == stops[1] and len(stops[0]) == 1, stops
S = int(stops[0][0].split()[3].rstrip(":"))
assert [(m["step"], m["status"]) for r in (0, 1) for m in of("bye", r)] == [(S, 0), (S, 0)], S
model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 5))
model.load_state_dict(load_file(f"{tmp}/ck/step-{ck[0]['step']:08d}/model.safetensors"), strict=True)
final = torch.load(f"{tmp}/final.pt")     # the script's own save after the stop
assert sorted(final) == sorted(model.state_dict()), sorted(final)
print(f"PASS: spawned ranks: checkpoint at step {ck[0]['step']}, both stopped after step {S}")
PYEOF

# ---- multiprocessing.Process with fork, headless, to the end ----
port=$(free_port 1)
timeout 120 "$DDPTOP" run --python "$PY" --headless --log-dir "$TMP/flogs" examples/ddp_spawn.py --start fork \
    --port "$port" --steps 30 >"$TMP/fork.txt" 2>&1
rc=$?
[ "$rc" = 0 ] || { cat "$TMP/fork.txt"; die "the fork script under ddptop: exit $rc"; }
grep -q "following the 2 ranks" "$TMP/fork.txt" && grep -q "rank 0: exit 0, step 30" "$TMP/fork.txt" &&
    grep -q "rank 1: exit 0, step 30" "$TMP/fork.txt" && grep -q "job done: all 2 ranks ended cleanly" "$TMP/fork.txt" ||
    { cat "$TMP/fork.txt"; die "the forked ranks were not both followed to step 30"; }
wait_for 10 none_tagged || die "processes left running: $(tagged)"
# ---- a fault: rank 1 (a spawned child) kills itself at step 5: its end is SIGKILL (as its
# launcher reaped it), and --max-restarts 1 runs the script again, followed as before ----
port=$(free_port 1)
DDPTOP_FAULTS=kill:1@5 timeout 150 "$DDPTOP" run --max-restarts 1 --python "$PY" --headless --log-dir "$TMP/klogs" \
    examples/ddp_spawn.py --port "$port" --steps 30 >"$TMP/kill.txt" 2>&1
rc=$?
[ "$rc" = 0 ] && grep -q "fault: rank 1 kills itself at step 5" "$TMP/kill.txt" &&
    grep -q "rank 1 (pid [0-9]*) ended: signal 9 (Killed) at step 5" "$TMP/kill.txt" &&
    grep -q "restart 1/1: running examples/ddp_spawn.py again" "$TMP/kill.txt" &&
    grep -q "^rank 1: exit 0, step 30" "$TMP/kill.txt" && grep -q "job done: all 2 ranks ended cleanly" "$TMP/kill.txt" ||
    { cat "$TMP/kill.txt"; die "the kill fault in a spawned rank: exit $rc, not SIGKILL then a clean restart"; }
wait_for 10 none_tagged || die "processes left running after the fault: $(tagged)"
echo "PASS: a script that starts its own ranks (spawn and fork) is followed, steered and refused with -n 2"
