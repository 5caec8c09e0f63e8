# w during rendezvous, in tmux: rank 1 of a two-rank torch script waits in
# init_process_group for rank 0, which has not started it yet (it waits for
# a file), so rank 1's TCPStore keeps trying to reach rank 0's, where torch
# 1.13 gives up on a signal's EINTR ("RuntimeError: Interrupted system
# call"). w on rank 1 shows its Python stacks with init_process_group in
# them, and the dump does not break the store: once rank 0 comes, both
# ranks meet, destroy the group and exit 0.
. tests/lib.sh
. tests/scenario/python/lib_py.sh
cat >"$TMP/held.py" <<'PYEOF'
import os, sys, time
import torch.distributed as dist
if os.environ["RANK"] == "0":
    while not os.path.exists(sys.argv[1]):      # rank 1 waits for it in init_process_group
        time.sleep(0.05)
dist.init_process_group("gloo")
dist.barrier()
print(f"rank {dist.get_rank()} met its peers", flush=True)
dist.destroy_process_group()
PYEOF
py_tui_start "" -n 2 --hang-after 600 -- "$TMP/held.py" "$TMP/go"
wait_for 60 hasE "^. +1 .* rendezvous " || dies "rank 1 never showed rendezvous"
sleep 1 # into the store's wait
tmux send-keys -t "$S" Down
tmux send-keys -t "$S" w
wait_for 15 has "rank 1 Python stacks" || dies "w did not open rank 1's stacks page in rendezvous"
wait_for 15 has "most recent call first" || dies "no stack shown"
for k in 1 2 3 4 5 6 7 8; do has "in init_process_group" && break; tmux send-keys -t "$S" PgDn; sleep 0.3; done
has "in init_process_group" || dies "init_process_group is not in rank 1's stack"
tmux send-keys -t "$S" Escape
touch "$TMP/go"
wait_for 60 no_ranks || dies "ranks still running after rank 1 came: $(our_ranks)"
wait_for 10 has "job done" || dies "the screen does not say the job is done"
has "every rank ended cleanly" || dies "a rank failed after w during rendezvous (the dump broke its store?)"
for r in 0 1; do grep -q "rank $r met its peer" "$TMP"/logs/rank-$r*.log || dies "rank $r never met the others"; done
tmux send-keys -t "$S" q
wait_for 15 test -s "$TMP/exit" || dies "ddptop did not leave after q"
[ "$(cat "$TMP/exit")" = 0 ] || { cat "$TMP/after.txt"; die "ddptop exited $(cat "$TMP/exit")"; }
echo "PASS: w shows a rank's Python stacks in rendezvous, and the rank goes on"
