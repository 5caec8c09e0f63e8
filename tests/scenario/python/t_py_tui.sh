# The lesson script (examples/ddp_basics.py, 2 ranks, unchanged) steered from
# ddptop's screen in tmux: p pauses both ranks after the same step and p
# resumes them; c has rank 0 write model.safetensors of that step, which
# loads into the script's model with load_state_dict(strict=True) through
# the safetensors package; d stops both after the same step, rank 0 writes
# the final checkpoint of that step (the script's own final model), the
# script's finally block still saves, every rank exits 0 and nothing is left
# running.
. tests/lib.sh
. tests/scenario/python/lib_py.sh
"$PY" -c 'import safetensors' 2>/dev/null || skip "no safetensors for $PY"
py_tui_start "DDPTOP_CKPT_DIR='$TMP/ck'" -n 2 -- examples/ddp_basics.py --data synthetic --epochs 100000 \
    --batch-size 16 --out "$TMP/final.pt"
step_of() { screen | grep -Eo ' step [0-9]+' | head -1 | grep -Eo '[0-9]+'; }
stepped_past() { [ "$(step_of)" -gt "$1" ] 2>/dev/null; }
wait_for 90 hasE " RUNNING .*step [1-9][0-9]" || dies "the script never trained 10 steps on screen"
# p: both ranks pause after one step, nothing steps while paused, p resumes
tmux send-keys -t "$S" p
wait_for 20 has "PAUSED" || dies "p did not pause the job"
wait_for 10 has "paused: all 2 ranks at step" || dies "no event naming both ranks' pause step"
s1=$(step_of)
sleep 1.5
[ "$(step_of)" = "$s1" ] || dies "the job stepped while paused ($s1 -> $(step_of))"
tmux send-keys -t "$S" p
wait_for 20 hasE " RUNNING " || dies "p did not resume"
wait_for 20 stepped_past $((s1 + 3)) || dies "no steps after the resume"
# c: a checkpoint of one agreed step
tmux send-keys -t "$S" c
wait_for 30 test -e "$TMP/ck/latest/model.safetensors" || dies "no checkpoint after c"
wait_for 10 has "checkpoint step" || dies "no checkpoint event on screen"
# d: both stop after one step and exit 0; nothing left running
py_tui_destroy
grep -q "rank 0: exit 0" "$TMP/after.txt" && grep -q "rank 1: exit 0" "$TMP/after.txt" \
    || { cat "$TMP/after.txt"; die "a rank did not exit 0"; }
"$PY" - "$TMP" <<'PYEOF' || die "the steering was not at one step on every rank"
import json, os, sys
sys.path.insert(0, "examples")
import torch
from safetensors.torch import load_file
from ddp_basics import build_model
tmp = sys.argv[1]
msgs = [json.loads(l) for l in open(f"{tmp}/rec.jsonl")]
of = lambda k, r: [m for m in msgs if m.get("k") == k and m.get("r") == r]
detail = lambda r, ph: [m["detail"] for m in of("phase", r) if m["phase"] == ph]
paused = [detail(r, "paused") for r in (0, 1)]
assert len(paused[0]) == 1 and paused[0] == paused[1], paused
assert [detail(r, "train").count("resumed") for r in (0, 1)] == [1, 1], [detail(r, "train") for r in (0, 1)]
ck = [m for m in of("ckpt", 0) if "/ck/" in m["path"]]
assert ck and all(m["ok"] for m in ck) and not [m for m in of("ckpt", 1) if "/ck/" in m["path"]], ck
C = ck[0]["step"]
ph = detail(0, "checkpoint")
assert ph[0] == "requested" and ph[-1].startswith("torch.save"), ph
stops = [[m["text"] for m in of("log", r) if m["text"].startswith("stopping after")] for r in (0, 1)]
assert stops[0] == stops[1] and len(stops[0]) == 1, stops
S = int(stops[0][0].split()[3].rstrip(":"))
assert [m["step"] for r in (0, 1) for m in of("bye", r)] == [S, S], S
# d wrote the final checkpoint of the stop step (c's, when c was that very step)
assert [m["step"] for m in ck] == ([C, S] if C != S else [C]), (ck, S)
assert C == S or ph[1].startswith("final: "), ph
assert [m["status"] for r in (0, 1) for m in of("bye", r)] == [0, 0]
assert all(f == ["stopping", "destroying", "destroyed"] for f in
           ([m["phase"] for m in of("phase", r)][-3:] for r in (0, 1))), "not stopped in order"
# every step from 1 to S on both ranks, no step twice: the same steps were taken
assert [sorted(m["step"] for m in of("step", r)) for r in (0, 1)] == [list(range(1, S + 1))] * 2
# the checkpoint is the script's model under PyTorch's names
model = build_model()
sd = load_file(f"{tmp}/ck/step-{C:08d}/model.safetensors")
model.load_state_dict(sd, strict=True)
assert sorted(sd) == sorted(build_model().state_dict()), sorted(sd)
assert os.path.realpath(f"{tmp}/ck/latest") == os.path.realpath(f"{tmp}/ck/step-{S:08d}")
fin = load_file(f"{tmp}/ck/step-{S:08d}/model.safetensors")
final = torch.load(f"{tmp}/final.pt")
assert any(not torch.equal(sd[k], final[k]) for k in sd) or C == S, "the checkpoint is not of step C"
assert all(torch.equal(fin[k], final[k]) for k in fin), "the final checkpoint is not the script's final model"
print(f"PASS: paused after step {paused[0][0].split()[-1]}, checkpoint at step {C}, stopped after step {S}")
PYEOF
echo "PASS: p, c and d on a torch script in the TUI"
