# r writes a report on request (issue 30 item 8), in tmux as a user sees it:
# on a torch job that trains normally (no hang), r gathers every rank's
# stacks and writes report-1/ beside the logs (README.txt, a verdict that
# says there is no hang, the merged tree with the script's frames, each
# rank's own dump) and the screen names its path. r pressed again while the
# first is being written says so and writes nothing more; r after it
# writes the next one. The job then ends cleanly with no hang report in its
# summary, and w on a rank that replaced the adapter's stack-signal handler
# never signals it (the signal's default would end it): it asks it on ctl,
# as every gathering does, and shows the dump its heartbeat thread sends.
. tests/lib.sh
. tests/scenario/python/lib_py.sh
cat >"$TMP/own_sig.py" <<'PYEOF'
import signal, sys, time
import torch, torch.distributed as dist, torch.nn as nn
dist.init_process_group("gloo")
if dist.get_rank() == 1:    # the script takes SIGUSR1 back to its default: it ends the process
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
model = nn.parallel.DistributedDataParallel(nn.Linear(8, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100000):
    model(torch.randn(4, 8)).square().mean().backward()
    opt.step()
    opt.zero_grad()
    time.sleep(0.05)
PYEOF
py_tui_start "" -n 2 -- examples/ddp_basics.py --data synthetic --limit 512 --batch-size 8 --epochs 100000 \
    --out "$TMP/m.pt"
wait_for 90 hasE " train +[0-9]+ .*at ddp_basics\.py:[0-9]+ in main" || dies "no training rank's row names its line"
tmux send-keys -t "$S" r
wait_for 5 has "r: writing a report" || dies "r did not say it writes a report"
tmux send-keys -t "$S" r
wait_for 5 has "r: a report is still being written" || dies "a second r did not say one is being written"
d=$TMP/logs/report-1
wait_for 30 has "report written: $d" || dies "the screen does not name the report's path"
sleep 2 # a second report, had the second r started one, would be written by now
[ "$(ls -d "$TMP"/logs/report-* "$TMP"/logs/hang-* 2>/dev/null | wc -l)" -eq 1 ] ||
    die "two r's wrote more than one report: $(ls "$TMP/logs")"
for f in README.txt verdict.txt tree.txt collectives.txt versions.txt; do
    [ -s "$d/$f" ] || die "$f missing or empty in the report"
done
grep -q "Written on request (the r key)" "$d/README.txt" || die "README.txt does not say it was asked for"
grep -Eq "^no hang: written on request \(r\) at step [0-9]+, " "$d/verdict.txt" || { cat "$d/verdict.txt"; die "verdict.txt"; }
grep -Eq "ddp_basics\.py:[0-9]+ main" "$d/tree.txt" || { cat "$d/tree.txt"; die "the tree has no frame of the script"; }
grep -Eq " 2 +0-1 +ddp_basics\.py:[0-9]+ <module>" "$d/tree.txt" || { cat "$d/tree.txt"; die "the tree does not merge both ranks"; }
for k in 0 1; do
    grep -Eq "^(Current thread|Thread) 0x" "$d/stacks/rank-$k.txt" || die "rank $k: no thread in its dump"
    grep -q 'ddp_basics.py", line [0-9]* in main' "$d/stacks/rank-$k.txt" || die "rank $k's dump has no frame of the script"
done
tmux send-keys -t "$S" r
wait_for 30 has "report written: $TMP/logs/report-2" || dies "r after the first report did not write the next"
py_tui_destroy
grep -q "hang report" "$TMP/after.txt" && { cat "$TMP/after.txt"; die "the summary names a hang report: there was no hang"; }
echo "ok: r wrote $d and report-2, one at a time"

# w on a rank without a handler for the stack signal: asked on ctl, the rank lives on
command tmux -L "$S" kill-server
rm -rf "$TMP/exit" "$TMP/rec" "$TMP/rec.jsonl" "$TMP/logs" # the first job's
py_tui_start "" -n 2 -- "$TMP/own_sig.py"
wait_for 90 hasE " train +[0-9]+ .*at own_sig\.py:[0-9]+" || dies "no training rank"
pid=$(py_rank_pid 1) || dies "no rank 1"
tmux send-keys -t "$S" Down
tmux send-keys -t "$S" w
wait_for 15 has "rank 1 Python stacks" || dies "w did not open rank 1's stacks page"
wait_for 15 has "rank 1 (pid $pid) at .*most recent call first (from its heartbeat thread, on ctl)" ||
    dies "w did not show rank 1's dump asked on ctl"
own() { has 'own_sig.py", line'; }
for k in 1 2 3 4 5 6 7 8; do own && break; tmux send-keys -t "$S" PgDn; sleep 0.3; done
wait_for 5 own || dies "rank 1's page has no frame of the script"
tmux send-keys -t "$S" Escape
sleep 2
kill -0 "$pid" 2>/dev/null || dies "w ended rank 1"
py_tui_destroy
echo "PASS: r writes a report on request, once at a time; w asks a rank without its handler on ctl, never by signal"
