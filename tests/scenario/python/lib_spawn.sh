# lib_spawn.sh — for the tests of scripts that start their own ranks (sourced
# after tests/lib.sh): every process of this test's (the spawned children
# carry the tag too; their command lines match SPAWN_PROCS, by default the
# adapter's, a spawned child's and the resource tracker's), killed at the end; and spawned_straggler, a 2-rank
# mp.spawn script whose rank 1 loops in straggle() until the file $2 exists
# while rank 0 waits in the barrier after three all-reduces.
tagged() {
    local p
    for p in $(pgrep -f -- "${SPAWN_PROCS:--m ddptop|--multiprocessing-fork|resource_tracker}"); do
        { tr '\0' '\n' </proc/$p/environ; } 2>/dev/null | grep -qx "DDPTOP_TEST_TAG=$DDPTOP_TEST_TAG" && echo "$p"
    done
}
none_tagged() { [ -z "$(tagged)" ]; }
CLEANUPS+=("for p in \$(tagged); do kill -9 \$p; done")

# spawned_straggler PATH: writes the script (args: PORT RELEASE_FILE)
spawned_straggler() {
    cat >"$1" <<'PYEOF'
import os, sys, time
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def straggle(release):
    while not os.path.exists(release):
        time.sleep(0.05)


def worker(rank, world, port, release):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    t = torch.ones(4)
    for _ in range(3):
        dist.all_reduce(t)
    if rank == 1:
        straggle(release)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(2, int(sys.argv[1]), sys.argv[2]), nprocs=2, join=True)
PYEOF
}
