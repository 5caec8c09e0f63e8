/* bench_comm.c — all-reduce latency of the Gloo backend, by size and
 * implementation, with forked ranks on one machine. Not part of the test
 * suite; its numbers chose the size switch in workers/comm/comm_gloo.cc.
 *
 *   bench_comm [-n WORLD] [-a ring,opts,bcube,auto] [-t SECONDS] [BYTES...]
 *
 * Rank 0 prints one row per (implementation, size): the first call (which
 * includes any setup), then the median, mean, 10th and 90th percentile of
 * the rest.
 * Ranks rendezvous through files in a temporary directory. Single-threaded.
 */
#include "comm/comm.h"
#include "dir_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Ranks rendezvous through files (tests/dir_store.h); forked after it is made. */
static DirStore store;

/* ---- the benchmark -------------------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int bench_rank(int rank, int world, const char *algo, const size_t *bytes, int nsizes, double seconds, int run)
{
    setenv("DDPTOP_GLOO_ALLREDUCE", algo, 1);
    CommStore cs = { .ctx = &store, .set = ds_set, .get = ds_get };
    char prefix[64], err[512];
    snprintf(prefix, sizeof prefix, "bench-%d-%s", run, algo);
    CommConfig cfg = { .backend = "gloo",
                       .rank = rank,
                       .world = world,
                       .host = "127.0.0.1",
                       .prefix = prefix,
                       .timeout_ms = 30000,
                       .store = &cs };
    Comm *c = NULL;
    if (comm_new(&c, &cfg, err, sizeof err) != 0) {
        fprintf(stderr, "rank %d: %s\n", rank, err);
        return 1;
    }
    enum { MAX_ITERS = 2000 };
    int64_t *t = malloc(MAX_ITERS * sizeof *t);
    for (int s = 0; s < nsizes; s++) {
        size_t n = bytes[s] / sizeof(float);
        float *buf = calloc(n, sizeof *buf);
        if (!buf || !t) return 1;
        if (comm_barrier(c, err, sizeof err) != 0) goto fail;
        int64_t t0 = now_ns();
        if (comm_allreduce_sum_f32(c, buf, n, (uint32_t)s, err, sizeof err) != 0) goto fail;
        int64_t first = now_ns() - t0;
        /* every rank must run the same number of calls: rank 0 decides
         * from its own clock and tells the others by a broadcast */
        int iters = 0;
        int64_t end = now_ns() + (int64_t)(seconds * 1e9);
        for (;;) {
            float more = rank == 0 && iters < MAX_ITERS && now_ns() < end ? 1.0f : 0.0f;
            if ((iters & 15) == 0) {
                if (comm_broadcast_f32(c, &more, 1, 0, err, sizeof err) != 0) goto fail;
                if (more == 0.0f) break;
            }
            if (iters >= MAX_ITERS) break;
            int64_t a = now_ns();
            if (comm_allreduce_sum_f32(c, buf, n, (uint32_t)s, err, sizeof err) != 0) goto fail;
            t[iters++] = now_ns() - a;
        }
        double mean = 0;
        for (int i = 0; i < iters; i++) mean += (double)t[i];
        mean /= iters > 0 ? iters : 1;
        qsort(t, (size_t)iters, sizeof *t, cmp_i64);
        if (rank == 0)
            printf("%-5s %d ranks %8zu B  first %7.3f  median %7.3f  mean %7.3f  p10 %7.3f"
                   "  p90 %7.3f ms  (%d calls)\n",
                   algo, world, bytes[s], first / 1e6, t[iters / 2] / 1e6, mean / 1e6, t[iters / 10] / 1e6,
                   t[iters * 9 / 10] / 1e6, iters);
        fflush(stdout);
        free(buf);
    }
    free(t);
    comm_free(&c);
    return 0;
fail:
    fprintf(stderr, "rank %d: %s\n", rank, err);
    comm_free(&c);
    return 1;
}

int main(int argc, char **argv)
{
    int world = 2;
    double seconds = 1.0;
    char algos[256] = "ring,opts";
    size_t bytes[32] = { 4096, 256 * 1024, 1 << 20, 4 << 20 };
    int nsizes = 4, opt;
    while ((opt = getopt(argc, argv, "n:a:t:")) != -1) {
        if (opt == 'n')
            world = atoi(optarg);
        else if (opt == 'a')
            snprintf(algos, sizeof algos, "%s", optarg);
        else if (opt == 't')
            seconds = atof(optarg);
        else {
            fprintf(stderr, "usage: %s [-n WORLD] [-a ring,opts,bcube,auto] [-t S] [BYTES...]\n", argv[0]);
            return 2;
        }
    }
    if (optind < argc) {
        nsizes = 0;
        for (int i = optind; i < argc; i++) {
            char *end;
            errno = 0;
            unsigned long long b = strtoull(argv[i], &end, 0);
            if (argv[i][0] == '-' || end == argv[i] || *end || errno || b == 0 || b > (1ull << 30) || nsizes == 32) {
                fprintf(stderr, "bench_comm: size \"%s\": want a byte count 1..%llu, at most 32 sizes\n", argv[i],
                        1ull << 30);
                return 2;
            }
            bytes[nsizes++] = (size_t)b;
        }
    }
    char check[256];
    snprintf(check, sizeof check, "%s", algos);
    for (char *a = strtok(check, ","); a; a = strtok(NULL, ","))
        if (strcmp(a, "ring") && strcmp(a, "opts") && strcmp(a, "bcube") && strcmp(a, "auto")) {
            fprintf(stderr, "bench_comm: -a %s: want ring, opts, bcube or auto (comma-separated)\n", a);
            return 2;
        }
    if (seconds <= 0) {
        fprintf(stderr, "bench_comm: -t %g: want seconds > 0\n", seconds);
        return 2;
    }
    if (world < 1 || world > 64) {
        fprintf(stderr, "bench_comm: world must be 1..64\n");
        return 2;
    }
    if (dir_store_open(&store, "bench_comm")) {
        perror("mkdtemp");
        return 1;
    }
    int rc = 0, run = (int)getpid();
    for (char *algo = strtok(algos, ","); algo; algo = strtok(NULL, ",")) {
        fflush(stdout);
        pid_t pid[64];
        for (int r = 0; r < world; r++) {
            pid[r] = fork();
            if (pid[r] == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                _exit(bench_rank(r, world, algo, bytes, nsizes, seconds, run));
            }
        }
        for (int r = 0; r < world; r++) {
            int st;
            waitpid(pid[r], &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
        }
    }
    dir_store_remove(&store);
    return rc;
}
