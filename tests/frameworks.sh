#!/usr/bin/env bash
# tests/frameworks.sh [check] — Lightning and Accelerate under ddptop (make
# test-frameworks, mk/frameworks.mk; CI does not run it). FRAMEWORKS_PY names
# a python with torch 2.x, lightning and accelerate (none of ddptop's
# packages). Each framework's small script (tests/frameworks/) runs bare, as
# the framework runs it (Lightning: `python script.py`, its own launcher
# starting the second rank; Accelerate: torchrun, as `accelerate launch`
# does), then under `ddptop run -n 2 --python $FRAMEWORKS_PY script.py` in
# the screen (tmux): ddptop starts both ranks with torchrun's environment,
# which Lightning's DDP strategy and Accelerate read as torchrun's, so
# neither starts processes of its own. Asserted per framework: every rank's
# hello; every rank's printed losses equal to the bare run's, step for
# step; ddptop's steps counted (its summary says the script's last step); a
# `c` pressed mid-training writes model.safetensors; every rank and ddptop
# exit 0. A pass/fail table, then "N passed, N failed"; exit 1 when any
# failed, 2 without a usable FRAMEWORKS_PY. `check`: that test only.
set -u
cd "$(dirname "$0")/.."
how="a python with torch 2.x, lightning and accelerate: python3 -m venv V && V/bin/pip install torch lightning accelerate, then make test-frameworks FRAMEWORKS_PY=V/bin/python"
if [ -z "${FRAMEWORKS_PY:-}" ]; then echo "test-frameworks: FRAMEWORKS_PY is not set: $how"; exit 2; fi
case $FRAMEWORKS_PY in /*) ;; */*) FRAMEWORKS_PY=$PWD/$FRAMEWORKS_PY;; esac
"$FRAMEWORKS_PY" -c 'import torch, lightning, accelerate, sys; sys.exit(int(torch.__version__.split(".")[0]) < 2)' 2>/dev/null ||
    { echo "test-frameworks: FRAMEWORKS_PY=$FRAMEWORKS_PY: no torch 2.x, lightning and accelerate there: $how"; exit 2; }
[ "${1:-}" = check ] && exit 0
command -v tmux >/dev/null || { echo "test-frameworks: tmux is not installed (make deps)"; exit 2; }

BUILD=${BUILD:-build}
DDPTOP=$PWD/$BUILD/ddptop
[ -x "$DDPTOP" ] || { echo "test-frameworks: no $DDPTOP (make bins)"; exit 2; }
export LANG=C.UTF-8 OMP_NUM_THREADS=1
TMP=$(mktemp -d /tmp/ddptop-frameworks.XXXXXX)
S=ddptop-fw-$$
trap 'command tmux -L "$S" kill-server 2>/dev/null; rm -rf "$TMP"' EXIT
STEPS=80 PAUSE=0.05       # 80 steps of >= 50 ms: c lands mid-training, even on a loaded machine
pass=0 fail=0
row() {     # row FRAMEWORK CHECK OK [WHY]
    if [ "$3" = 1 ]; then pass=$((pass + 1)); printf '  %-4s  %-10s  %s\n' PASS "$1" "$2"
    else fail=$((fail + 1)); printf '  %-4s  %-10s  %s: %s\n' FAIL "$1" "$2" "${4:-}"; fi
}
# losses R FILE: rank R's "rank R step K loss X" lines
losses() { grep -E "^rank $1 step [0-9]+ loss " "$2"; }
screen() { command tmux -L "$S" capture-pane -p -t "$S"; }
wait_for() {
    local t=$1; shift
    local end=$(( $(date +%s) + t ))
    while [ "$(date +%s)" -le "$end" ]; do "$@" && return 0; sleep 0.3; done
    return 1
}
stepped() { screen | grep -Eq " RUNNING .*step ([5-9]|[1-9][0-9])"; }
ended() { [ -s "$1" ]; }
finished() { screen | grep -Eq "job (done|failed)"; }

run_case() {    # run_case NAME SCRIPT BARE-LAUNCH...
    local name=$1 script=$2 d=$TMP/$1 r ok abs=$PWD/$2
    shift 2
    mkdir -p "$d/bare" "$d/ck" "$d/logs"
    # bare, as the framework runs it
    (cd "$d/bare" && timeout 600 "$@" "$abs" --steps $STEPS >"$d/bare.log" 2>&1)
    local brc=$?
    # under ddptop, in its screen
    command tmux -L "$S" new-session -d -s "$S" -x 120 -y 40 \
        "cd '$PWD' && DDPTOP_CKPT_DIR='$d/ck' '$DDPTOP' run -n 2 --python '$FRAMEWORKS_PY' --log-dir '$d/logs' $script --steps $STEPS --pause $PAUSE >'$d/after.txt' 2>&1; echo \$? >'$d/exit'; sleep 600"
    ok=0; wait_for 300 stepped && ok=1
    if [ $ok = 1 ]; then
        command tmux -L "$S" send-keys -t "$S" c
        wait_for 60 test -e "$d/ck/latest/model.safetensors" || ok=0
    fi
    row "$name" "c checkpoint" $ok "no $d/ck/latest/model.safetensors after c (ranks' step on screen: $(screen | grep -Eo ' step [0-9]+' | head -1))"
    wait_for 300 finished || true
    command tmux -L "$S" send-keys -t "$S" q
    wait_for 30 ended "$d/exit"
    command tmux -L "$S" kill-server 2>/dev/null
    ok=1
    for r in 0 1; do grep -q "^hello from rank $r of 2$" "$d/logs/rank-$r.log" 2>/dev/null || ok=0; done
    row "$name" "hello" $ok "not every rank's hello in its log ($d/logs)"
    ok=1; local why=""
    [ $brc = 0 ] || { ok=0; why="the bare run failed (exit $brc): $(tail -n 3 "$d/bare.log" | tr '\n' ' ')"; }
    for r in 0 1; do
        [ "$(losses $r "$d/bare.log" | wc -l)" = $STEPS ] || { ok=0; why="${why:-bare: rank $r printed $(losses $r "$d/bare.log" | wc -l) losses, want $STEPS}"; }
        losses $r "$d/bare.log" >"$d/bare.$r"
        losses $r "$d/logs/rank-$r.log" >"$d/ddptop.$r" 2>/dev/null
        cmp -s "$d/bare.$r" "$d/ddptop.$r" || { ok=0; why="${why:-rank $r: losses under ddptop differ from bare ($(diff "$d/bare.$r" "$d/ddptop.$r" | head -3 | tr '\n' ' '))}"; }
    done
    row "$name" "losses" $ok "$why"
    ok=1
    for r in 0 1; do grep -q "^rank $r: exit 0, step $STEPS," "$d/after.txt" 2>/dev/null || ok=0; done
    row "$name" "steps" $ok "ddptop did not count $STEPS steps on every rank: $(grep -E '^rank [0-9]:' "$d/after.txt" 2>/dev/null | tr '\n' ' ')"
    ok=0; [ "$(cat "$d/exit" 2>/dev/null)" = 0 ] && grep -q "job done: all 2 ranks ended cleanly" "$d/after.txt" && ok=1
    row "$name" "exit 0" $ok "ddptop exit $(cat "$d/exit" 2>/dev/null): $(tail -n 3 "$d/after.txt" 2>/dev/null | tr '\n' ' ')"
}

echo "test-frameworks: $("$FRAMEWORKS_PY" -c 'import torch, lightning, accelerate; print(f"torch {torch.__version__}, lightning {lightning.__version__}, accelerate {accelerate.__version__}")')"
run_case lightning tests/frameworks/lightning_ddp.py "$FRAMEWORKS_PY"
run_case accelerate tests/frameworks/accelerate_ddp.py "$FRAMEWORKS_PY" -m torch.distributed.run --nproc-per-node 2 --master-port "$((20000 + RANDOM % 10000))"
echo "$pass passed, $fail failed"
[ $fail = 0 ]
