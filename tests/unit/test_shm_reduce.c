/* test_shm_reduce.c — the shared-memory all-reduce (workers/comm/shm_reduce.c)
 * with real processes: sums over 3 ranks at sizes around the chunk size,
 * bit-identical on every rank and equal to the sum in rank order; a peer
 * that dies is named at once; a stopped peer ends in the timeout; the
 * segment's name is gone once every rank mapped it; host keys agree.
 * Every wait in the children is bounded, so a broken build fails instead
 * of hanging.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "comm/shm_reduce.h"

#define W 3
static const size_t sizes[] = { 1, 7, 1000, 524288, 524289, 1300000, 3 };

static float value(int rank, size_t call, size_t j)
{
    /* values whose float sums depend on the order: checks the rank order */
    return (float)((rank + 1) * 0.1 + (double)((j * 2654435761u + call) % 1000) * 1e-3 + 1e-7 * (double)rank);
}

/* child: every size, then write a checksum of the results to fd */
static int child_sums(const char *name, int rank, int fd)
{
    char err[256];
    ShmReduce *s = NULL;
    for (int tries = 0; tries < 200 && shm_reduce_open(&s, name, rank, W, 5000, err, sizeof err); tries++)
        usleep(10000); /* rank 0 creates it */
    if (!s) {
        fprintf(stderr, "rank %d: %s\n", rank, err);
        return 1;
    }
    unsigned long long h = 1469598103934665603ull;
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        size_t n = sizes[c];
        float *buf = malloc(n * sizeof *buf);
        for (size_t j = 0; j < n; j++) buf[j] = value(rank, c, j);
        if (shm_reduce_allreduce(s, buf, n, err, sizeof err)) {
            fprintf(stderr, "rank %d: %s\n", rank, err);
            return 1;
        }
        for (size_t j = 0; j < n; j++) {
            float want = value(0, c, j) + value(1, c, j);
            for (int r = 2; r < W; r++) want += value(r, c, j);
            if (memcmp(&want, &buf[j], sizeof want)) {
                fprintf(stderr, "rank %d size %zu [%zu]: %.9g, want %.9g\n", rank, n, j, buf[j], want);
                return 1;
            }
            unsigned int bits;
            memcpy(&bits, &buf[j], sizeof bits);
            h = (h ^ bits) * 1099511628211ull;
        }
        free(buf);
    }
    if (write(fd, &h, sizeof h) != (ssize_t)sizeof h) return 1;
    shm_reduce_close(&s);
    return 0;
}

static void test_sums(void)
{
    TEST_BEGIN("sums_bit_identical_in_rank_order");
    char name[96];
    shm_reduce_name(name, sizeof name);
    int pfd[2];
    CHECK(pipe(pfd) == 0, "pipe");
    pid_t pid[W];
    for (int r = 0; r < W; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            alarm(30);
            _exit(child_sums(name, r, pfd[1]));
        }
    }
    close(pfd[1]);
    unsigned long long h[W];
    int got = 0;
    while (got < W && read(pfd[0], &h[got], sizeof h[0]) == (ssize_t)sizeof h[0]) got++;
    close(pfd[0]);
    for (int r = 0; r < W; r++) {
        int st = 0;
        waitpid(pid[r], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d ended with status %d", r, st);
    }
    CHECK(got == W, "%d checksums", got);
    for (int r = 1; r < got; r++) CHECK(h[r] == h[0], "rank %d's results differ from rank 0's", r);
    shm_reduce_unlink(name);
    TEST_END();
}

/* rank 0 in this process, rank 1 a child that does `what` */
static void test_peer(const char *what)
{
    char title[64];
    snprintf(title, sizeof title, "peer_%s", what);
    TEST_BEGIN(title);
    char name[96], err[256] = "";
    shm_reduce_name(name, sizeof name);
    ShmReduce *s = NULL;
    CHECK(shm_reduce_open(&s, name, 0, 2, 600, err, sizeof err) == 0, "%s", err);
    pid_t child = fork();
    if (child == 0) {
        alarm(10);
        ShmReduce *c = NULL;
        char e[256];
        if (shm_reduce_open(&c, name, 1, 2, 600, e, sizeof e)) _exit(2);
        float x = 1;
        if (shm_reduce_allreduce(c, &x, 1, e, sizeof e)) _exit(3); /* one good call */
        if (!strcmp(what, "dies")) _exit(0);
        raise(SIGSTOP);
        _exit(0);
    }
    float x = 2;
    CHECK(s && shm_reduce_allreduce(s, &x, 1, err, sizeof err) == 0 && x == 3.0f, "first call: %s (%g)", err, x);
    shm_reduce_unlink(name);
    CHECK(shm_open(name, O_RDWR, 0) < 0 && errno == ENOENT, "the name is still there after unlink");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = s ? shm_reduce_allreduce(s, &x, 1, err, sizeof err) : 0;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    CHECK(rc == -1, "a call without the peer succeeded");
    if (!strcmp(what, "dies")) {
        CHECK(strstr(err, "rank 1 (pid") && strstr(err, "is gone"), "error: %s", err);
        CHECK(ms < 500, "a dead peer took %.0f ms to notice", ms);
    } else {
        CHECK(strstr(err, "timed out after 600 ms waiting for rank 1"), "error: %s", err);
        CHECK(ms >= 550 && ms < 3000, "the timeout took %.0f ms", ms);
        kill(child, SIGKILL);
    }
    CHECK(s && shm_reduce_allreduce(s, &x, 1, err, sizeof err) == -1 && strstr(err, "failed earlier"),
          "a failed mapping was used again: %s", err);
    waitpid(child, NULL, 0);
    shm_reduce_close(&s);
    TEST_END();
}

static void test_keys(void)
{
    TEST_BEGIN("host_key_and_refusals");
    char a[512], b[512] = "", err[256];
    CHECK(shm_host_key(a, sizeof a) == 0 && strlen(a) > 20, "host key: %s", a);
    int pfd[2];
    CHECK(pipe(pfd) == 0, "pipe");
    if (fork() == 0) {
        char k[512];
        int ok = shm_host_key(k, sizeof k) == 0;
        if (ok && write(pfd[1], k, strlen(k) + 1) < 0) _exit(1);
        _exit(ok ? 0 : 1);
    }
    close(pfd[1]);
    ssize_t n = read(pfd[0], b, sizeof b - 1);
    close(pfd[0]);
    wait(NULL);
    CHECK(n > 0 && !strcmp(a, b), "a child's key differs: %s / %s", a, b);
    char small[8];
    CHECK(shm_host_key(small, sizeof small) == -1, "a key into 8 bytes");
    ShmReduce *s = NULL;
    CHECK(shm_reduce_open(&s, "/ddptop-test-none", 1, 2, 100, err, sizeof err) == -1 && strstr(err, "shm_open"),
          "opening a missing segment: %s", err);
    CHECK(shm_reduce_open(&s, "/x", 0, 1, 100, err, sizeof err) == -1 && strstr(err, "2.."), "world 1: %s", err);
    TEST_END();
}

int main(void)
{
    test_keys();
    test_sums();
    test_peer("dies");
    test_peer("stops");
    CHECK_EXIT();
}
