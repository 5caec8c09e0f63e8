# w on a rank whose dump comes in parts (a busy machine: the rank is not
# scheduled for longer than ddptop's 200 ms of quiet in the middle of
# writing it): the page opens on the first part and takes the rest as it
# comes, so the thread written last (in faulthandler's order the main
# thread, with the script's own frames) is on it. The script stands in for
# faulthandler with a handler of its own that writes two threads 1.5 s apart.
. tests/lib.sh
. tests/scenario/python/lib_py.sh
cat >"$TMP/slow_dump.py" <<'PYEOF'
import os, signal, sys, time
import torch.distributed as dist
dist.init_process_group("gloo")
def slow_dump(sig, frame):
    sys.stderr.write('Thread 0x00007f0000000001 (most recent call first):\n'
                     '  File "/usr/lib/python3.11/threading.py", line 320 in wait\n\n')
    sys.stderr.flush()
    time.sleep(1.5)
    sys.stderr.write('Current thread 0x00007f0000000002 (most recent call first):\n'
                     '  File "slow_dump.py", line 13 in the_second_part\n\n')
    sys.stderr.flush()
signal.signal(signal.SIGUSR1, slow_dump)   # in place of the adapter's faulthandler
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
dist.destroy_process_group()
PYEOF
py_tui_start "" -n 1 -- "$TMP/slow_dump.py" "$TMP/go"
wait_for 60 hasE "at slow_dump\.py:[0-9]+" || dies "the rank's row never named its line"
tmux send-keys -t "$S" w
wait_for 15 has "Thread 0x00007f0000000001" || dies "the first part never showed"
wait_for 10 has "in the_second_part" || dies "the page did not take the dump's second part"
has "2 threads, most recent call first" || dies "the head does not count both threads"
tmux send-keys -t "$S" Escape
touch "$TMP/go"
wait_for 30 has "job done" || dies "the job did not end after the script's last line"
tmux send-keys -t "$S" q
wait_for 15 test -s "$TMP/exit" || dies "ddptop did not leave after q"
[ "$(cat "$TMP/exit")" = 0 ] || { cat "$TMP/after.txt"; die "ddptop exited $(cat "$TMP/exit")"; }
wait_for 15 no_ranks || dies "ranks left running: $(our_ranks)"
echo "PASS: the stacks page takes a dump written in parts"
