# `ddptop attach`: a second screen on a running job. The job runs in one
# window of a private tmux server, viewers attach from others: both screens
# show the same ranks (same pids) and the same steps, moving; a read-only
# viewer's c says it is read-only and writes no checkpoint; --control's c
# writes one; q and Ctrl-C detach and the job goes on; headless viewers
# (text and JSON) exit 0 once the job ends; nothing is left running.
# First the command line: one line and exit 2 for bad input, exit 1 when no
# job answers.
. tests/lib.sh
command -v tmux >/dev/null || skip "tmux not installed"

# ---- bad input ----
one_line() { [ "$(printf '%s\n' "$1" | wc -l)" = 1 ]; }
out=$("$DDPTOP" attach 2>&1); rc=$?
[ $rc = 2 ] && one_line "$out" || die "no endpoint: exit $rc: $out"
out=$("$DDPTOP" attach ipc:///tmp/x --bogus 2>&1); rc=$?
[ $rc = 2 ] && one_line "$out" && echo "$out" | grep -q -- --bogus || die "unknown flag: exit $rc: $out"
out=$("$DDPTOP" attach ipc:///tmp/x --json 2>&1); rc=$?
[ $rc = 2 ] && one_line "$out" || die "--json without --headless: exit $rc: $out"
out=$("$DDPTOP" attach http://example.com 2>&1); rc=$?
[ $rc = 2 ] && one_line "$out" || die "not ipc/tcp: exit $rc: $out"
out=$(env -u DDPTOP_KEYS "$DDPTOP" attach tcp://127.0.0.1:5 2>&1); rc=$?
[ $rc = 2 ] && one_line "$out" && echo "$out" | grep -q -- '--keys' || die "tcp without keys: exit $rc: $out"
out=$("$DDPTOP" attach tcp://127.0.0.1:5 --keys "$TMP/no-such.keys" 2>&1); rc=$?
[ $rc = 2 ] && one_line "$out" || die "missing key file: exit $rc: $out"
out=$(timeout 10 "$DDPTOP" attach "ipc://$TMP/nothing/ctl" --headless --wait 1 2>&1); rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "no job answered at ipc://$TMP/nothing/ctl within 1 s" || die "no job: exit $rc: $out"

# ---- the job ----
S=ddptop-attach-$$
tmux() { command tmux -L "$S" "$@"; }
CLEANUPS+=("command tmux -L $S kill-server")
# rank 0 sleeps 20 ms a step: ~50 steps/s, until d
TRAIN="--dataset synthetic --model mlp:64,128,10 --epochs 100000 --batch-size 32 --fault slow:0:20ms --ckpt-dir '$TMP/ck' --no-final-ckpt"
tmux new-session -d -s "$S" -n job -x 120 -y 40 \
  "cd '$PWD' && DDPTOP_TEST_TAG='$DDPTOP_TEST_TAG' LANG=C.UTF-8 '$DDPTOP' run -n 2 -- $TRAIN >'$TMP/job.txt' 2>&1; echo \$? >'$TMP/job.exit'; sleep 60"
scr() { tmux capture-pane -p -t "$S:$1"; }
has() { scr "$1" | grep -q -- "$2"; }
dies() { echo "--- $1:"; scr "$1"; die "$2"; }
# the ddptop started in window $1 (for cleanup and the leftover check)
pid_in() {
    local pane p
    pane=$(tmux display -p -t "$S:$1" '#{pane_pid}')
    for _ in $(seq 50); do p=$(pgrep -P "$pane" -x ddptop) && { echo "$p"; return 0; }; sleep 0.05; done
    return 1
}
JOB_PID=$(pid_in job) && CLEANUPS+=("kill -9 $JOB_PID")
wait_for 20 has job ' train ' || dies job "ranks never reached train"
# the endpoint as ddptop shows it ("attach: ddptop attach ENDPOINT"), else
# the one its workers were given
EP=$(scr job | grep -o 'ddptop attach ipc://[^ ]*' | head -1 | cut -d' ' -f3)
if [ -z "$EP" ]; then
    for p in $(our_workers); do
        EP=$(tr '\0' '\n' </proc/$p/environ | sed -n 's/^DDPTOP_CTL=//p') && [ -n "$EP" ] && break
    done
fi
case $EP in ipc://*) ;; *) dies job "no control endpoint found ('$EP')";; esac

# ---- a read-only viewer ----
tmux new-window -d -t "$S" -n view \
  "cd '$PWD' && LANG=C.UTF-8 '$DDPTOP' attach '$EP' >'$TMP/view.txt' 2>&1; echo \$? >'$TMP/view.exit'; sleep 60"
VIEW_PID=$(pid_in view) && CLEANUPS+=("kill -9 $VIEW_PID")
wait_for 10 has view 'attached (read-only)' || dies view "the viewer does not say it is read-only"
wait_for 5 has job 'viewer 1 (pid [0-9]*) attached (1 attached)' || dies job "the job's screen does not say a viewer attached"
# a rank's row: marker, RANK, HOST, PID, PHASE, EPOCH, STEP, ...
row() { grep -E "^. +$1 +[^ ]+ +[0-9]+ +train +[0-9]+ +[0-9]+ " "$2"; }
pid_of() { row "$1" "$2" | awk '{print $4}'; }
step_of() { row "$1" "$2" | awk '{print $7}'; }
wait_for 10 eval 'scr view >"$TMP/v0"; row 0 "$TMP/v0" >/dev/null && row 1 "$TMP/v0" >/dev/null' ||
    dies view "the viewer shows no training rows"
# the same ranks, and the same step at (nearly) the same moment
same_step() {
    scr job >"$TMP/j1"; scr view >"$TMP/v1"
    local sj sv
    sj=$(step_of 0 "$TMP/j1"); sv=$(step_of 0 "$TMP/v1")
    [ -n "$sj" ] && [ -n "$sv" ] && [ $((sj - sv)) -le 15 ] && [ $((sv - sj)) -le 15 ] && echo "$sv"
}
same_pids() {
    scr job >"$TMP/j0"; scr view >"$TMP/v0"
    local r pj pv
    for r in 0 1; do
        pj=$(pid_of $r "$TMP/j0"); pv=$(pid_of $r "$TMP/v0")
        [ -n "$pj" ] && [ "$pj" = "$pv" ] || return 1
    done
}
wait_for 5 same_pids || { cat "$TMP/j0" "$TMP/v0"; die "the screens show different ranks (pids)"; }
s1= s2=
wait_for 5 eval 's1=$(same_step)' || { cat "$TMP/j1" "$TMP/v1"; die "the screens disagree on rank 0's step"; }
sleep 1
wait_for 5 eval 's2=$(same_step)' || { cat "$TMP/j1" "$TMP/v1"; die "the screens disagree on rank 0's step (2nd look)"; }
[ "$s2" -gt "$s1" ] || die "the viewer's step did not move: $s1 -> $s2"
echo "rank 0 at step $s1, then $s2, on both screens"
# c: refused, said so, no checkpoint
tmux send-keys -t "$S:view" c
wait_for 5 has view 'read-only: checkpoint not sent' || dies view "no read-only notice after c"
wait_for 5 has view 'read-only viewer: "ckpt" not sent' || dies view "ddptop did not answer the read-only c"
sleep 1.5
[ ! -e "$TMP/ck/latest" ] || die "a read-only viewer's c wrote a checkpoint"
# ? shows the viewer's own keys
tmux send-keys -t "$S:view" '?'
wait_for 5 has view 'ddptop attach keys (read-only)' || dies view "? does not show the viewer's keys"
has view 'start with --control' || dies view "the viewer's help does not say how to get control"
tmux send-keys -t "$S:view" Escape
# q: detaches (exit 0), the job goes on
tmux send-keys -t "$S:view" q
wait_for 5 test -s "$TMP/view.exit" || dies view "q did not detach"
[ "$(cat "$TMP/view.exit")" = 0 ] || { cat "$TMP/view.txt"; die "the viewer exited $(cat "$TMP/view.exit")"; }
wait_for 5 has job 'viewer 1 (pid [0-9]*) detached (0 attached)' || dies job "the job's screen does not say the viewer left"
grep -q "detached from $EP" "$TMP/view.txt" || { cat "$TMP/view.txt"; die "no word on detaching"; }
sleep 0.5
[ ! -e "$TMP/job.exit" ] && [ -n "$(our_workers)" ] || die "the job ended when a viewer left"
scr job >"$TMP/j2"
sa=$(step_of 0 "$TMP/j2"); sleep 0.5; scr job >"$TMP/j3"; sb=$(step_of 0 "$TMP/j3")
[ -n "$sa" ] && [ -n "$sb" ] && [ "$sb" -gt "$sa" ] || die "the job stopped training after q in the viewer ($sa -> $sb)"

# ---- headless viewers, text and JSON: they stay until the job ends ----
"$DDPTOP" attach "$EP" --headless >"$TMP/hl.txt" 2>&1 &
HL=$!; CLEANUPS+=("kill -9 $HL")
"$DDPTOP" attach "$EP" --headless --json >"$TMP/hlj.txt" 2>&1 &
HLJ=$!; CLEANUPS+=("kill -9 $HLJ")
# ---- a --control viewer ----
tmux new-window -d -t "$S" -n ctl \
  "cd '$PWD' && LANG=C.UTF-8 '$DDPTOP' attach --control '$EP' >'$TMP/ctl.txt' 2>&1; echo \$? >'$TMP/ctl.exit'; sleep 60"
CTL_PID=$(pid_in ctl) && CLEANUPS+=("kill -9 $CTL_PID")
wait_for 10 has ctl 'attached with --control' || dies ctl "the --control viewer does not say so"
wait_for 10 eval 'scr ctl >"$TMP/c0"; row 0 "$TMP/c0" >/dev/null' || dies ctl "no training rows"
tmux send-keys -t "$S:ctl" c
wait_for 20 test -e "$TMP/ck/latest/model.safetensors" || dies ctl "no checkpoint after c in a --control viewer"
wait_for 5 has ctl 'checkpoint step' || dies ctl "the viewer does not show the checkpoint"
# r: the job's own screen writes reports (beside its logs), even for a --control viewer
tmux send-keys -t "$S:ctl" r
wait_for 5 has ctl "report: only on the job's own screen" || dies ctl "r in a viewer does not say why not"
ls "$TMP"/*/report-* "$TMP"/report-* >/dev/null 2>&1 && die "a viewer's r wrote a report"
# Ctrl-C detaches as cleanly as q
tmux send-keys -t "$S:ctl" C-c
wait_for 5 test -s "$TMP/ctl.exit" || dies ctl "Ctrl-C did not detach"
[ "$(cat "$TMP/ctl.exit")" = 0 ] || { cat "$TMP/ctl.txt"; die "Ctrl-C: the viewer exited $(cat "$TMP/ctl.exit")"; }
[ ! -e "$TMP/job.exit" ] || die "the job ended when the --control viewer left"
grep -q ' step .*loss' "$TMP/hl.txt" || { cat "$TMP/hl.txt"; die "no progress lines from the headless viewer"; }

# ---- the job ends: d on its own screen ----
tmux send-keys -t "$S:job" d
wait_for 30 no_workers || dies job "workers still running after d"
hl_done() { ! kill -0 "$HL" 2>/dev/null && ! kill -0 "$HLJ" 2>/dev/null; }
wait_for 15 hl_done || { cat "$TMP/hl.txt"; die "headless viewers still running after the job ended"; }
wait "$HL"; rc=$?
[ $rc = 0 ] || { cat "$TMP/hl.txt"; die "headless viewer exited $rc"; }
wait "$HLJ"; rc=$?
[ $rc = 0 ] || { cat "$TMP/hlj.txt"; die "JSON viewer exited $rc"; }
grep -q "rank 0: exit 0" "$TMP/hl.txt" && grep -q "rank 1: exit 0" "$TMP/hl.txt" &&
    grep -q "job done" "$TMP/hl.txt" || { cat "$TMP/hl.txt"; die "no summary from the headless viewer"; }
grep -q '"k":"summary".*"ok":true' "$TMP/hlj.txt" || { tail -5 "$TMP/hlj.txt"; die "no JSON summary"; }
# the snapshot's events keep their times: rank 0's hello came seconds before
# this viewer attached, not at the moment it did
"$PY" - "$TMP/hlj.txt" <<'PYEOF' || die "the snapshot's events lost their times"
import json, sys
ev = [e for e in map(json.loads, open(sys.argv[1])) if e.get("k") == "event"]
att = next(e["t"] for e in ev if e["text"].startswith("attached to "))
hello = next(e["t"] for e in ev if e["text"].startswith("rank 0 hello"))
print("rank 0 hello at %.3f s, attached at %.3f s" % (hello, att))
assert 0 <= hello < att - 1, (hello, att)
PYEOF
if command -v python3 >/dev/null; then
    python3 -c 'import json,sys
for l in open(sys.argv[1]): json.loads(l)' "$TMP/hlj.txt" || die "the JSON viewer wrote a line that is not JSON"
fi
tmux send-keys -t "$S:job" q
wait_for 10 test -s "$TMP/job.exit" || dies job "ddptop did not leave after q"
[ "$(cat "$TMP/job.exit")" = 0 ] || { cat "$TMP/job.txt"; die "ddptop exited $(cat "$TMP/job.exit")"; }
# nothing left: no worker, no ddptop, no viewer
for p in ${JOB_PID:-} ${VIEW_PID:-} ${CTL_PID:-} $HL $HLJ; do
    kill -0 "$p" 2>/dev/null && die "process $p still running"
done
no_workers || die "workers left: $(our_workers)"
echo "attach ok"
