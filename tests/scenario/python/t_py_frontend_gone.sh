# ddptop gone or stopped under a torch script (docs/RELIABILITY.md item 2,
# as run/t_frontend_gone and run/t_frontend_stop for the C trainer).
# Stopped: SIGSTOP of ddptop past the ranks' ping timeout; they train on,
# say so after SIGCONT, and Ctrl-C still ends the job cleanly (exit 0).
# Gone: kill -9 of ddptop; the ranks (no longer SIGKILLed with it) stop
# after one agreed step, rank 0 writes the final checkpoint of that step
# (it loads back into the script's model), the script's finally blocks
# run, each rank exits 1 and none is left.
. tests/lib.sh
. tests/lib_py.sh
export DDPTOP_PING_TIMEOUT=4 DDPTOP_CKPT_DIR=$TMP/ck
script=(examples/ddp_basics.py --data synthetic --limit 512 --batch-size 8 --epochs 100000 --out "$TMP/final.pt")
steps_of() { local n; n=$(grep -c "^rank $1 epoch" "$TMP/$2/rank-$1.log" 2>/dev/null); echo "${n:-0}"; }

# 1. stopped is not gone
py_exec -n 2 --headless --log-dir "$TMP/l1" -- "${script[@]}" >"$TMP/out1" 2>&1 &
dp=$!
CLEANUPS+=("kill -CONT $dp; kill -9 $dp")
wait_for 60 sh -c "[ \$(grep -cs '^rank 0 epoch' '$TMP/l1/rank-0.log') -gt 5 ] 2>/dev/null" ||
    { cat "$TMP/out1"; die "the script never trained"; }
sleep 3 # the ranks judge ddptop once its pings have started
kill -STOP $dp
before=$(steps_of 0 l1)
sleep 10 # past the 4 s ping timeout
[ "$(our_ranks | wc -w)" -eq 2 ] || { kill -CONT $dp; cat "$TMP"/l1/rank-*.log | tail; die "a rank died while ddptop was stopped"; }
[ "$(steps_of 0 l1)" -gt $((before + 20)) ] || { kill -CONT $dp; die "rank 0 did not train on while ddptop was stopped"; }
grep -q "is stopped: training on" "$TMP/l1/rank-0.log" || { kill -CONT $dp; die "rank 0 did not notice the stop"; }
kill -CONT $dp
wait_for 30 grep -q "trained on while ddptop was stopped" "$TMP/out1" || { tail "$TMP/out1"; die "no catch-up line"; }
grep -q "is gone" "$TMP"/l1/rank-*.log && die "a rank took the stopped ddptop for gone"
kill -INT $dp
ended_within 60 $dp || die "ddptop did not end after Ctrl-C"
[ $rc -eq 130 ] || { tail -20 "$TMP/out1"; die "exit $rc after the clean Ctrl-C stop, want 130 (docs/TUI.md, Exit status)"; }
wait_for 10 no_ranks || die "ranks left: $(our_ranks)"

# 2. gone
py_exec -n 2 --headless --log-dir "$TMP/l2" -- "${script[@]}" >"$TMP/out2" 2>&1 &
dp=$!
CLEANUPS+=("kill -9 $dp")
wait_for 60 sh -c "[ \$(grep -cs '^rank 0 epoch' '$TMP/l2/rank-0.log') -gt 5 ] 2>/dev/null" ||
    { cat "$TMP/out2"; die "the script never trained"; }
kill -9 $dp
wait $dp 2>/dev/null
wait_for 60 no_ranks || die "ranks left running after kill -9 of ddptop: $(our_ranks)"
for r in 0 1; do
    grep -q "ddptop (pid $dp) is gone" "$TMP/l2/rank-$r.log" || { cat "$TMP/l2/rank-$r.log" | tail; die "rank $r did not say ddptop is gone"; }
done
grep -q "Killed\|signal 9" "$TMP"/l2/rank-*.log && die "a rank was killed"
S=$(sed -n 's/.*ddptop is gone: stopped after step \([0-9]*\) with a final checkpoint; exit 1$/\1/p' "$TMP/l2/rank-0.log")
[ -n "$S" ] || { tail "$TMP/l2/rank-0.log"; die "rank 0 did not stop with a final checkpoint"; }
grep -q "ddptop is gone: stopped after step $S; exit 1$" "$TMP/l2/rank-1.log" || { tail "$TMP/l2/rank-1.log"; die "rank 1 did not stop after step $S"; }
[ "$(readlink "$TMP/ck/latest")" = "$(printf 'step-%08d' "$S")" ] || { ls -la "$TMP/ck"; die "latest is not the checkpoint of step $S"; }
# the stop is raised from optimizer step S, before the script counts it: its finally block saves at S - 1
grep -q "rank 0 saved $TMP/final.pt at step $((S - 1)) " "$TMP/l2/rank-0.log" || die "the script's finally block did not run after step $S"
"$PY" - "$TMP/ck/latest/model.safetensors" <<'PYEOF' || die "the final checkpoint does not load into the script's model"
import sys
sys.path.insert(0, "examples")
from ddp_basics import build_model
from safetensors.torch import load_file
build_model().load_state_dict(load_file(sys.argv[1]), strict=True)
PYEOF
echo "PASS: a torch script trains on while ddptop is stopped, and stops with a final checkpoint when it is gone"
