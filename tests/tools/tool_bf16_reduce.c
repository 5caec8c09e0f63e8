/* tool_bf16_reduce.c — one gradient bucket through ddptop's --grad-dtype
 * bf16 path, for comparing with torch's bf16_compress_hook
 * (tests/scenario/train/t_grad_bf16.sh).
 *
 *   tool_bf16_reduce WORLD N DIR
 *
 * Forks WORLD ranks on this host that rendezvous through a store in a
 * temporary directory, as test_comm.c's do. Rank r reads N float32 from
 * DIR/grad-r.f32, runs them as one bucket op through the reducer exactly as
 * the CPU trainer queues it (RedOp dtype COMM_BF16, div WORLD: cast, divide
 * in bf16, all-reduce in bf16 over Gloo, copy back) and writes the N float32
 * it got to DIR/out-r.f32. DDPTOP_SHM=0 takes Gloo over TCP; otherwise the
 * shared-memory all-reduce. Prints the path rank 0 used; exit 0 when every
 * rank did its part, 1 otherwise, 2 for bad arguments.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm/comm.h"
#include "ddp/reducer.h"
#include "dir_store.h"

static int rank_main(int rank, int world, size_t n, const char *dir, const CommStore *cs, const char *prefix)
{
    char path[4096], err[512] = "";
    float *g = malloc(n * sizeof *g);
    uint16_t *wire = malloc(n * sizeof *wire);
    if (!g || !wire) return 1;
    snprintf(path, sizeof path, "%s/grad-%d.f32", dir, rank);
    FILE *f = fopen(path, "rb");
    if (!f || fread(g, sizeof *g, n, f) != n) {
        fprintf(stderr, "tool_bf16_reduce: rank %d: cannot read %zu floats from %s\n", rank, n, path);
        return 1;
    }
    fclose(f);
    CommConfig cfg = { .backend = "gloo",
                       .rank = rank,
                       .world = world,
                       .host = "127.0.0.1",
                       .prefix = prefix,
                       .timeout_ms = 30000,
                       .store = cs };
    Comm *c = NULL;
    Reducer *r = NULL;
    if (comm_new(&c, &cfg, err, sizeof err) || reducer_new(&r, c, err, sizeof err)) {
        fprintf(stderr, "tool_bf16_reduce: rank %d: %s\n", rank, err);
        return 1;
    }
    if (rank == 0) printf("path: %s\n", comm_describe(c));
    RedOp op;
    memset(&op, 0, sizeof op);
    op.kind = RED_ALLREDUCE;
    op.buf = g;
    op.n = n;
    op.tag = 0;
    op.scale = 1.0f;
    op.dtype = COMM_BF16;
    op.wire = wire;
    op.div = world;
    op.bucket = 0;
    if (reducer_run(r, &op, NULL, NULL, 0, err, sizeof err)) {
        fprintf(stderr, "tool_bf16_reduce: rank %d: %s\n", rank, err);
        return 1;
    }
    reducer_free(&r);
    if (comm_barrier(c, err, sizeof err) || comm_destroy(&c, err, sizeof err)) {
        fprintf(stderr, "tool_bf16_reduce: rank %d: %s\n", rank, err);
        return 1;
    }
    snprintf(path, sizeof path, "%s/out-%d.f32", dir, rank);
    f = fopen(path, "wb");
    if (!f || fwrite(g, sizeof *g, n, f) != n || fclose(f)) {
        fprintf(stderr, "tool_bf16_reduce: rank %d: cannot write %s\n", rank, path);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    char *end1 = NULL, *end2 = NULL;
    long world = argc == 4 ? strtol(argv[1], &end1, 10) : 0;
    long long n = argc == 4 ? strtoll(argv[2], &end2, 10) : 0;
    if (argc != 4 || *end1 || *end2 || world < 1 || world > 32 || n < 1) {
        fprintf(stderr, "usage: tool_bf16_reduce WORLD(1..32) N(>0) DIR\n");
        return 2;
    }
    DirStore store;
    if (dir_store_open(&store, "tool_bf16_reduce")) {
        fprintf(stderr, "tool_bf16_reduce: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    CommStore cs = { .ctx = &store, .set = ds_set, .get = ds_get };
    char prefix[64];
    snprintf(prefix, sizeof prefix, "bf16-reduce-%d", (int)getpid());
    fflush(stdout);
    pid_t pid[32];
    for (int r = 0; r < world; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            alarm(120);
            int rc = rank_main(r, (int)world, (size_t)n, argv[3], &cs, prefix);
            fflush(stdout);
            _exit(rc);
        }
    }
    int bad = 0;
    for (int r = 0; r < world; r++) {
        int st = 0;
        if (pid[r] < 0 || waitpid(pid[r], &st, 0) != pid[r] || !WIFEXITED(st) || WEXITSTATUS(st)) bad = 1;
    }
    dir_store_remove(&store);
    return bad;
}
