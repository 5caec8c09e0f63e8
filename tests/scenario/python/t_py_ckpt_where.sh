# Where ddptop's checkpoints of a torch script go (issue 29): once the
# script saved a file (torch.save to $OUT/model.pt, rank 0), `c` and `d` from
# ddptop's screen write $OUT/ddptop-step-NNNNNNNN/ beside it and point
# $OUT/ddptop-latest at the newest, replacing no file of the script's (its
# model.pt and a file of its own named `latest` stay as they were); the
# event, the header's "last checkpoint", the exit summary's line and, on
# Ctrl-C, --json's last_ckpt_path and verdict give the full path; files take
# the user's umask. An explicitly set DDPTOP_CKPT_DIR wins over the script's
# directory (Ctrl-C's checkpoint goes there, nothing beside model.pt); a
# script that never saved a file checkpoints into DDPTOP_CKPT_DIR:
# t_py_ckpt_promise's ZeroRedundancyOptimizer part. No fake frontend: it
# runs under any torch (make test T=t_py_ckpt_where TORCH_PY=a torch 2.x python).
. tests/lib.sh
. tests/scenario/python/lib_py.sh
"$PY" -c 'import safetensors' 2>/dev/null || skip "no safetensors for $PY"
unset DDPTOP_CKPT_DIR
umask 022
cat >"$TMP/saver.py" <<'EOF'
import os, sys, time, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
out = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
g = torch.Generator().manual_seed(rank)
for step in range(10 ** 7):
    opt.zero_grad()
    model(torch.randn(16, 8, generator=g)).pow(2).mean().backward()
    opt.step()
    if step == 2 and rank == 0:       # the script's own save, once: where it keeps its files
        torch.save(model.module.state_dict(), os.path.join(out, "model.pt"))
        print("saved", flush=True)
    time.sleep(0.01)
EOF

# 1. c and d from the screen, DDPTOP_CKPT_DIR unset: beside the script's model.pt
OUT=$TMP/run/out
mkdir -p "$OUT"
echo "the script's own file" >"$OUT/latest"
py_tui_start "" -n 2 -- "$TMP/saver.py" "$OUT"
wait_for 90 test -s "$OUT/model.pt" || dies "the script did not save"
sum0=$(md5sum <"$OUT/model.pt")
wait_for 30 hasE " RUNNING .*step [1-9][0-9]" || dies "the script never trained 10 steps on screen"
tmux send-keys -t "$S" c
wait_for 30 test -e "$OUT/ddptop-latest/model.safetensors" || dies "no checkpoint in $OUT after c: $(ls -a "$OUT")"
wait_for 10 hasE "last checkpoint: step [0-9]+ -> $OUT/ddptop-step-[0-9]{8}" || dies "the header does not name the checkpoint"
C=$(screen | sed -n 's/.*last checkpoint: step \([0-9]*\) -> .*/\1/p' | head -1)
[ "$(screen | grep -o "$OUT/ddptop-step-[0-9]*" | head -1)" = "$OUT/ddptop-step-$(printf %08d "$C")" ] ||
    dies "header: step $C, another directory"
py_tui_destroy
grep -q "rank 0: exit 0" "$TMP/after.txt" && grep -q "rank 1: exit 0" "$TMP/after.txt" ||
    { cat "$TMP/after.txt"; die "a rank did not exit 0"; }
"$PY" - "$TMP" "$OUT" "$C" "$sum0" <<'PYEOF' || { cat "$TMP/after.txt"; die "c and d did not checkpoint beside the script's file"; }
import hashlib, json, os, stat, sys
tmp, out, C, sum0 = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
msgs = [json.loads(l) for l in open(f"{tmp}/rec.jsonl")]
ck = [m for m in msgs if m.get("k") == "ckpt"]
mine = [m for m in ck if "/ddptop-step-" in m["path"]]
assert [m["path"] for m in ck if m not in mine] == [f"{out}/model.pt"], ck   # the script's own save, one event
S = [m["step"] for m in msgs if m.get("k") == "bye" and m.get("r") == 0][0]
assert [(m["r"], m["step"], m["ok"]) for m in mine] == [(0, C, True), (0, S, True)], (mine, C, S)
for m in mine:
    assert m["path"] == f"{out}/ddptop-step-{m['step']:08d}", m   # the full path
want = {"model.pt", "latest", f"ddptop-step-{C:08d}", f"ddptop-step-{S:08d}", "ddptop-latest"}
assert set(os.listdir(out)) == want, sorted(os.listdir(out))
assert os.readlink(f"{out}/ddptop-latest") == f"ddptop-step-{S:08d}"
assert open(f"{out}/latest").read() == "the script's own file\n", "the script's latest was replaced"
assert hashlib.md5(open(f"{out}/model.pt", "rb").read()).hexdigest() in sum0, "the script's model.pt changed"
for d in (f"ddptop-step-{C:08d}", f"ddptop-step-{S:08d}"):
    names = sorted(os.listdir(f"{out}/{d}"))
    assert names == ["model.safetensors", "trainer.safetensors"], names
    for n in names:
        mode = stat.S_IMODE(os.stat(f"{out}/{d}/{n}").st_mode)
        assert mode == 0o644, f"{d}/{n}: mode {mode:o} under umask 022"
summary = open(f"{tmp}/after.txt").read()
line = f"last checkpoint: step {S} -> {out}/ddptop-step-{S:08d}\n"
assert line in summary, f"no {line!r} in the summary"
print(f"ok: c (step {C}) and d (step {S}) wrote {out}/ddptop-step-*, named in full in the events, "
      "the header and the summary; the script's files untouched")
PYEOF

# 2. Ctrl-C of a headless --json run: the summary's last_ckpt_path and the verdict
OUT2=$TMP/run2/out
mkdir -p "$OUT2"
py_exec -n 2 --headless --json --log-dir "$TMP/logs2" -- "$TMP/saver.py" "$OUT2" >"$TMP/j.jsonl" 2>"$TMP/j.err" &
dp=$!
CLEANUPS+=("kill -9 $dp")
wait_for 90 test -s "$OUT2/model.pt" || { cat "$TMP/j.err"; die "the script did not save (headless)"; }
wait_for 30 grep -q '"step":[1-9][0-9]' "$TMP/j.jsonl" || { tail -3 "$TMP/j.jsonl"; die "no steps (headless)"; }
kill -INT $dp
ended_within 60 $dp || die "ddptop did not end after Ctrl-C"
[ $rc -eq 130 ] || { tail -3 "$TMP/j.jsonl" "$TMP/j.err"; die "exit $rc after Ctrl-C, want 130"; }
"$PY" - "$TMP/j.jsonl" "$OUT2" <<'PYEOF' || { tail -3 "$TMP/j.jsonl"; die "the Ctrl-C checkpoint is not named in full"; }
import json, os, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
out = sys.argv[2]
s = [m for m in lines if m.get("k") == "summary"][-1]
S = s["last_ckpt_step"]
want = f"{out}/ddptop-step-{S:08d}"
assert s["last_ckpt_path"] == want and os.path.isfile(f"{want}/model.safetensors"), (s, want)
assert s["verdict"] == f"stopped by Ctrl-C at step {s['step']}, checkpoint written: {want}", s["verdict"]
print(f"ok: Ctrl-C wrote {want}, named by last_ckpt_path and the verdict")
PYEOF

# 3. DDPTOP_CKPT_DIR set: it wins over the script's directory
OUT3=$TMP/run3/out
mkdir -p "$OUT3"
DDPTOP_CKPT_DIR=$TMP/ck py_exec -n 2 --headless --json --log-dir "$TMP/logs3" -- "$TMP/saver.py" "$OUT3" \
    >"$TMP/k.jsonl" 2>"$TMP/k.err" &
dp=$!
CLEANUPS+=("kill -9 $dp")
wait_for 90 test -s "$OUT3/model.pt" || { cat "$TMP/k.err"; die "the script did not save (DDPTOP_CKPT_DIR)"; }
wait_for 30 grep -q '"step":[1-9][0-9]' "$TMP/k.jsonl" || { tail -3 "$TMP/k.jsonl"; die "no steps (DDPTOP_CKPT_DIR)"; }
kill -INT $dp
ended_within 60 $dp || die "ddptop did not end after Ctrl-C (DDPTOP_CKPT_DIR)"
[ $rc -eq 130 ] || { tail -3 "$TMP/k.jsonl" "$TMP/k.err"; die "exit $rc after Ctrl-C, want 130 (DDPTOP_CKPT_DIR)"; }
"$PY" - "$TMP/k.jsonl" "$OUT3" "$TMP/ck" <<'PYEOF' || { tail -3 "$TMP/k.jsonl"; die "DDPTOP_CKPT_DIR did not win over the script's directory"; }
import json, os, sys
out, ck = sys.argv[2], sys.argv[3]
s = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{") and '"k":"summary"' in l][-1]
want = f"{ck}/step-{s['last_ckpt_step']:08d}"
assert s["last_ckpt_path"] == want and os.path.isfile(f"{want}/model.safetensors"), (s, want)
assert os.readlink(f"{ck}/latest") == os.path.basename(want)
assert os.listdir(out) == ["model.pt"], os.listdir(out)
print(f"ok: DDPTOP_CKPT_DIR set: the stop's checkpoint went to {want}, nothing beside the script's model.pt")
PYEOF
wait_for 10 no_ranks || die "ranks left running: $(our_ranks)"
echo "PASS: ddptop's checkpoints of a script go where it saves (DDPTOP_CKPT_DIR wins), named in full"
