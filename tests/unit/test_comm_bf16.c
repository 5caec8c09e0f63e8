/* test_comm_bf16.c — comm_allreduce_sum_bf16 (--grad-dtype bf16's wire) with
 * real processes, over 2 and 4 ranks, through Gloo over TCP (DDPTOP_SHM=0)
 * and through the shared-memory all-reduce (every rank on this host).
 *
 * Values are bf16 numbers of mixed signs and exponents whose sums do not
 * fit in bf16, so a sum that is not rounded at every partial sum (a float
 * sum rounded once, the bits added as integers, a truncation) fails. Each
 * rank checks its own result; the parent checks that every rank got the
 * same bits (a checksum per rank through a pipe). The shared-memory path
 * must equal the rank-order sum ((r0 + r1) + r2) + r3 exactly; Gloo's ring
 * adds each segment in ring order, so each element must be one of the
 * sequential sums that start at some rank and go round the ring.
 */
#include "check.h"
#include "comm/comm.h"
#include "dir_store.h"
#include "nn/bf16.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_W 4
/* 1048577: more than one shared-memory chunk (1 Mi bf16) */
static const size_t sizes[] = { 1, 7, 1000, 300001, 1048577 };
#define NSIZES (sizeof sizes / sizeof sizes[0])

static uint16_t value(int rank, size_t call, size_t j)
{
    uint32_t h = (uint32_t)(j * 2654435761u + (uint32_t)call * 40503u + (uint32_t)rank * 7919u);
    float mant = 1.0f + (float)(h % 255u) / 128.0f;
    float f = ldexpf(mant, (int)((h >> 8) % 6u) - 3);
    return bf16_from_f32(((h >> 12) & 1u) ? -f : f);
}

/* The sequential sum of the ranks' values starting at rank `from`, going
 * up (dir 1) or down (dir -1) round the ring, every partial sum rounded. */
static uint16_t seq_sum(int world, size_t call, size_t j, int from, int dir)
{
    int r = from;
    uint16_t acc = value(r, call, j);
    for (int k = 1; k < world; k++) {
        r = (r + dir + world) % world;
        acc = bf16_from_f32(bf16_to_f32(acc) + bf16_to_f32(value(r, call, j)));
    }
    return acc;
}

typedef struct {
    int world;
    int shm; /* 1: expect the shared-memory path; 0: Gloo over TCP */
    char prefix[128];
    DirStore store;
    CommStore cs;
} Job;

static int rank_main(Job *job, int rank, int fd)
{
    setenv("DDPTOP_SHM", job->shm ? "1" : "0", 1);
    CommConfig cfg = { .backend = "gloo",
                       .rank = rank,
                       .world = job->world,
                       .host = "127.0.0.1",
                       .prefix = job->prefix,
                       .timeout_ms = 20000,
                       .store = &job->cs };
    char err[512] = "";
    Comm *c = NULL;
    if (comm_new(&c, &cfg, err, sizeof err)) {
        printf("  rank %d: comm_new: %s\n", rank, err);
        return 1;
    }
    int is_shm = strstr(comm_describe(c), "shared memory") != NULL;
    if (is_shm != job->shm) {
        printf("  rank %d: path is '%s', want %s\n", rank, comm_describe(c), job->shm ? "shared memory" : "TCP");
        return 1;
    }
    unsigned long long h = 1469598103934665603ull;
    size_t rounded = 0; /* elements where one rounding of the exact sum differs */
    for (size_t call = 0; call < NSIZES; call++) {
        size_t n = sizes[call];
        uint16_t *buf = malloc(n * sizeof *buf);
        if (!buf) return 1;
        for (size_t j = 0; j < n; j++) buf[j] = value(rank, call, j);
        int rc = call % 2
                     ? comm_allreduce_sum_bf16(c, buf, n, (uint32_t)(200 + call), err, sizeof err)
                     : comm_allreduce_sum_bf16_start(c, buf, n, (uint32_t)(200 + call), NULL, NULL, err, sizeof err);
        if (rc) {
            printf("  rank %d: allreduce of %zu bf16: %s\n", rank, n, err);
            return 1;
        }
        for (size_t j = 0; j < n; j++) {
            uint16_t got = buf[j];
            int ok = got == seq_sum(job->world, call, j, 0, 1);
            for (int from = 0; !ok && !job->shm && from < job->world; from++)
                ok = got == seq_sum(job->world, call, j, from, 1) || got == seq_sum(job->world, call, j, from, -1);
            if (!ok) {
                printf("  rank %d: %zu bf16 [%zu] = %g (0x%04x), want %g (rank order)\n", rank, n, j, bf16_to_f32(got),
                       got, bf16_to_f32(seq_sum(job->world, call, j, 0, 1)));
                return 1;
            }
            double exact = 0;
            for (int r = 0; r < job->world; r++) exact += bf16_to_f32(value(r, call, j));
            rounded += bf16_from_f32((float)exact) != got;
            h = (h ^ got) * 1099511628211ull;
        }
        free(buf);
    }
    /* the values are chosen so that rounding every partial sum shows */
    if (job->world > 2 && rounded == 0) {
        printf("  rank %d: no element where the partial sums' rounding shows: the test proves nothing\n", rank);
        return 1;
    }
    if (write(fd, &h, sizeof h) != (ssize_t)sizeof h) return 1;
    if (comm_barrier(c, err, sizeof err) || comm_destroy(&c, err, sizeof err)) {
        printf("  rank %d: teardown: %s\n", rank, err);
        return 1;
    }
    return 0;
}

static void run(const char *title, int world, int shm)
{
    TEST_BEGIN(title);
    static int counter;
    Job job;
    memset(&job, 0, sizeof job);
    job.world = world;
    job.shm = shm;
    if (dir_store_open(&job.store, "test_comm_bf16")) {
        CHECK(0, "mkdtemp: %s", strerror(errno));
        TEST_END();
        return;
    }
    job.cs.ctx = &job.store;
    job.cs.set = ds_set;
    job.cs.get = ds_get;
    snprintf(job.prefix, sizeof job.prefix, "bf16-%d-%d", (int)getpid(), counter++);
    int pfd[2];
    CHECK(pipe(pfd) == 0, "pipe");
    fflush(stdout);
    pid_t pid[MAX_W];
    for (int r = 0; r < world; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            alarm(120); /* a broken build fails instead of hanging */
            close(pfd[0]);
            int rc = rank_main(&job, r, pfd[1]);
            fflush(stdout);
            _exit(rc);
        }
    }
    close(pfd[1]);
    unsigned long long h[MAX_W];
    int got = 0;
    while (got < world && read(pfd[0], &h[got], sizeof h[0]) == (ssize_t)sizeof h[0]) got++;
    close(pfd[0]);
    for (int r = 0; r < world; r++) {
        int st = 0;
        waitpid(pid[r], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d of %d ended with status %d", r, world, st);
    }
    CHECK(got == world, "%d checksums from %d ranks", got, world);
    for (int r = 1; r < got; r++) CHECK(h[r] == h[0], "a rank's bf16 sums differ from another's");
    dir_store_remove(&job.store);
    TEST_END();
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    run("bf16_gloo_tcp_2_ranks", 2, 0);
    run("bf16_gloo_tcp_4_ranks", 4, 0);
    run("bf16_shm_2_ranks", 2, 1);
    run("bf16_shm_4_ranks", 4, 1);
    CHECK_EXIT();
}
