/* test_comm.c — the Gloo comm backend with real processes.
 *
 * Every case forks its ranks as child processes that rendezvous through a
 * CommStore kept in a temporary directory (one file per key, written by
 * rename, read by polling), as ddptop's store would serve them. The parent
 * never touches Gloo (its threads must not exist at fork time); it collects
 * each rank's verdict from its exit code, kills ranks when a case says so,
 * and checks that every child was reaped.
 *
 * Single-threaded parent; each child is single-threaded apart from Gloo's
 * device thread.
 */
#include "check.h"
#include "comm/comm.h"
#include "dir_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 8

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* ---- jobs: one forked process per rank ------------------------------ */

typedef struct Job Job;
/* Runs in the child as one rank; returns 0 when every check passed. */
typedef int (*RankFn)(const Job *job, int rank);

struct Job {
    const char *name;
    int world;
    int64_t timeout_ms;
    RankFn fn;
    const void *arg;
    int kill_rank;         /* parent SIGKILLs this rank ... (-1: none) */
    int64_t kill_after_ms; /* ... this long after the fork */
    int linger_rank;       /* SIGKILL this rank once all others have exited (-1: none) */
    /* filled in */
    DirStore store;
    CommStore cs;
    char prefix[128];
};

typedef struct {
    int status[MAX_RANKS];      /* exit code, 128+signal, or -1 if the parent had to kill it */
    int64_t exit_ms[MAX_RANKS]; /* when the parent reaped it, from the fork */
    int64_t kill_ms;            /* when kill_rank was killed, from the fork (-1: not) */
    int leftover;               /* children still there after the job: must be 0 */
} JobResult;

/* Child-side reporting: lines on stdout so tests/run.sh shows them. */
static void rank_fail(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rank_fail(int rank, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("  %s: rank %d: ", check_case_, rank);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    va_end(ap);
}

static CommConfig job_config(const Job *job, int rank, int world)
{
    CommConfig cfg = { .backend = "gloo",
                       .rank = rank,
                       .world = world,
                       .host = "127.0.0.1",
                       .prefix = job->prefix,
                       .timeout_ms = job->timeout_ms,
                       .store = &job->cs };
    return cfg;
}

static int job_comm(const Job *job, int rank, Comm **c)
{
    char err[512] = "";
    CommConfig cfg = job_config(job, rank, job->world);
    if (comm_new(c, &cfg, err, sizeof err) != 0) {
        rank_fail(rank, "comm_new: %s", err);
        return -1;
    }
    return 0;
}

static int job_counter;

static JobResult run_job(Job *job, int64_t deadline_ms)
{
    JobResult res;
    memset(&res, 0, sizeof res);
    res.kill_ms = -1;
    pid_t pid[MAX_RANKS];
    int done[MAX_RANKS] = { 0 };

    if (dir_store_open(&job->store, "test_comm")) {
        printf("  mkdtemp: %s\n", strerror(errno));
        for (int r = 0; r < job->world; r++) res.status[r] = -1;
        return res;
    }
    job->cs.ctx = &job->store;
    job->cs.set = ds_set;
    job->cs.get = ds_get;
    /* fresh prefix per job, as ddptop uses one per run */
    snprintf(job->prefix, sizeof job->prefix, "test-%s-%d-%d", job->name, (int)getpid(), job_counter++);

    fflush(stdout);
    int64_t t0 = now_ms();
    pid_t parent = getpid();
    for (int r = 0; r < job->world; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            /* no orphans if the test itself is killed */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(99);
            int rc = job->fn(job, r);
            fflush(stdout);
            _exit(rc == 0 ? 0 : 1);
        }
        if (pid[r] < 0) {
            printf("  fork: %s\n", strerror(errno));
            res.status[r] = -1;
            done[r] = 1;
        }
    }

    int left = 0;
    for (int r = 0; r < job->world; r++) left += !done[r];
    while (left > 0) {
        int64_t t = now_ms() - t0;
        if (job->kill_rank >= 0 && res.kill_ms < 0 && t >= job->kill_after_ms && !done[job->kill_rank]) {
            kill(pid[job->kill_rank], SIGKILL);
            res.kill_ms = now_ms() - t0;
        }
        if (job->linger_rank >= 0 && !done[job->linger_rank] && left == 1) kill(pid[job->linger_rank], SIGKILL);
        if (t > deadline_ms) {
            for (int r = 0; r < job->world; r++)
                if (!done[r]) {
                    kill(pid[r], SIGKILL);
                    waitpid(pid[r], NULL, 0);
                    done[r] = 1;
                    res.status[r] = -1;
                    res.exit_ms[r] = t;
                    printf("  %s: rank %d still running after %lld ms, killed\n", job->name, r, (long long)deadline_ms);
                }
            break;
        }
        for (int r = 0; r < job->world; r++) {
            int st;
            if (done[r] || waitpid(pid[r], &st, WNOHANG) != pid[r]) continue;
            done[r] = 1;
            left--;
            res.exit_ms[r] = now_ms() - t0;
            res.status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        if (left > 0) sleep_ms(2);
    }
    /* everything forked must have been reaped by now */
    res.leftover = !(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD);
    dir_store_remove(&job->store);
    return res;
}

static Job job_make(const char *name, int world, RankFn fn, const void *arg)
{
    Job j;
    memset(&j, 0, sizeof j);
    j.name = name;
    j.world = world;
    j.timeout_ms = 3000;
    j.fn = fn;
    j.arg = arg;
    j.kill_rank = -1;
    j.linger_rank = -1;
    return j;
}

/* Runs a job in which every rank must exit 0; records failures in the case. */
static void expect_all_pass(Job *job, int64_t deadline_ms)
{
    JobResult res = run_job(job, deadline_ms);
    for (int r = 0; r < job->world; r++)
        CHECK(res.status[r] == 0, "%s: rank %d of %d exited with status %d", job->name, r, job->world, res.status[r]);
    CHECK(res.leftover == 0, "%s: children left unreaped", job->name);
}

/* ---- rank bodies ---------------------------------------------------- */

static float pattern(size_t i, int rank, int round) { return (float)((rank + 1) * (int)((i % 251) + 1) + round); }

/* Exact in float: small integers. */
static float pattern_sum(size_t i, int world, int round)
{
    return (float)((int)((i % 251) + 1) * world * (world + 1) / 2 + round * world);
}

static const size_t kSizes[] = { 1, 3, 1024, 65536, 262144, 1 << 20 };
#define NSIZES (sizeof kSizes / sizeof kSizes[0])

/* arg: NULL, or the DDPTOP_GLOO_ALLREDUCE value to force. */
static int rank_allreduce(const Job *job, int rank)
{
    if (job->arg) setenv("DDPTOP_GLOO_ALLREDUCE", (const char *)job->arg, 1);
    Comm *c = NULL;
    if (job_comm(job, rank, &c) != 0) return 1;
    int bad = 0;
    char err[512];
    /* Two rounds on two different buffers with the same tag: the second
     * reuses whatever the first set up, at a new address and new values. */
    for (int round = 0; round < 2 && !bad; round++) {
        for (size_t s = 0; s < NSIZES && !bad; s++) {
            size_t n = kSizes[s];
            float *buf = malloc(n * sizeof *buf);
            if (!buf) return 1;
            for (size_t i = 0; i < n; i++) buf[i] = pattern(i, rank, round);
            if (comm_allreduce_sum_f32(c, buf, n, (uint32_t)(100 + s), err, sizeof err) != 0) {
                rank_fail(rank, "allreduce n=%zu round %d: %s", n, round, err);
                bad = 1;
            }
            for (size_t i = 0; i < n && !bad; i++)
                if (buf[i] != pattern_sum(i, job->world, round)) {
                    rank_fail(rank, "allreduce n=%zu round %d: [%zu] = %g, want %g", n, round, i, buf[i],
                              pattern_sum(i, job->world, round));
                    bad = 1;
                }
            free(buf);
        }
    }
    comm_free(&c);
    if (c != NULL) {
        rank_fail(rank, "comm_free left the pointer set");
        bad = 1;
    }
    return bad;
}

static int rank_broadcast(const Job *job, int rank)
{
    Comm *c = NULL;
    if (job_comm(job, rank, &c) != 0) return 1;
    int bad = 0;
    char err[512];
    static const size_t sizes[] = { 1, 1000, 1 << 20 };
    for (int root = 0; root < job->world && !bad; root++) {
        for (size_t s = 0; s < 3 && !bad; s++) {
            size_t n = sizes[s];
            float *buf = malloc(n * sizeof *buf);
            if (!buf) return 1;
            for (size_t i = 0; i < n; i++) buf[i] = rank == root ? pattern(i, root, 7) : -1.0f;
            if (comm_broadcast_f32(c, buf, n, root, err, sizeof err) != 0) {
                rank_fail(rank, "broadcast root %d n=%zu: %s", root, n, err);
                bad = 1;
            }
            for (size_t i = 0; i < n && !bad; i++)
                if (buf[i] != pattern(i, root, 7)) {
                    rank_fail(rank, "broadcast root %d n=%zu: [%zu] = %g, want %g", root, n, i, buf[i],
                              pattern(i, root, 7));
                    bad = 1;
                }
            free(buf);
        }
    }
    float x = 1;
    if (!bad && comm_broadcast_f32(c, &x, 1, job->world, err, sizeof err) == 0) {
        rank_fail(rank, "broadcast from root %d (out of range) succeeded", job->world);
        bad = 1;
    }
    comm_free(&c);
    return bad;
}

/* The last rank arrives late; nobody may leave the barrier before it. */
static int rank_barrier(const Job *job, int rank)
{
    Comm *c = NULL;
    if (job_comm(job, rank, &c) != 0) return 1;
    int bad = 0;
    char err[512];
    if (comm_barrier(c, err, sizeof err) != 0) { /* line everyone up first */
        rank_fail(rank, "first barrier: %s", err);
        bad = 1;
    }
    int64_t t0 = now_ms();
    if (rank == job->world - 1) sleep_ms(300);
    if (!bad && comm_barrier(c, err, sizeof err) != 0) {
        rank_fail(rank, "barrier: %s", err);
        bad = 1;
    }
    int64_t dt = now_ms() - t0;
    if (!bad && dt < 250) {
        rank_fail(rank, "left the barrier after %lld ms, before the late rank arrived", (long long)dt);
        bad = 1;
    }
    comm_free(&c);
    return bad;
}

static int rank_world1(const Job *job, int rank)
{
    (void)job;
    int bad = 0;
    char err[512];
    Comm *c = NULL;
    if (job_comm(job, rank, &c) != 0) return 1;
    size_t n = 1 << 20;
    float *buf = malloc(n * sizeof *buf);
    if (!buf) return 1;
    for (size_t s = 0; s < NSIZES; s++) {
        for (size_t i = 0; i < kSizes[s]; i++) buf[i] = pattern(i, 0, 3);
        if (comm_allreduce_sum_f32(c, buf, kSizes[s], (uint32_t)s, err, sizeof err) != 0) {
            rank_fail(rank, "allreduce n=%zu: %s", kSizes[s], err);
            bad = 1;
        }
        for (size_t i = 0; i < kSizes[s] && !bad; i++)
            if (buf[i] != pattern(i, 0, 3)) {
                rank_fail(rank, "allreduce changed [%zu] to %g", i, buf[i]);
                bad = 1;
            }
    }
    for (size_t i = 0; i < 1000; i++) buf[i] = pattern(i, 0, 4);
    if (comm_broadcast_f32(c, buf, 1000, 0, err, sizeof err) != 0) {
        rank_fail(rank, "broadcast: %s", err);
        bad = 1;
    }
    for (size_t i = 0; i < 1000 && !bad; i++)
        if (buf[i] != pattern(i, 0, 4)) {
            rank_fail(rank, "broadcast changed [%zu] to %g", i, buf[i]);
            bad = 1;
        }
    if (comm_broadcast_f32(c, buf, 10, 1, err, sizeof err) == 0) {
        rank_fail(rank, "broadcast from root 1 in a world of 1 succeeded");
        bad = 1;
    }
    if (comm_barrier(c, err, sizeof err) != 0) {
        rank_fail(rank, "barrier: %s", err);
        bad = 1;
    }
    free(buf);
    comm_free(&c);
    if (c) {
        rank_fail(rank, "comm_free left the pointer set");
        bad = 1;
    }
    return bad;
}

static int starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

static int rank_bad_config(const Job *job, int rank)
{
    int bad = 0;
    char err[512];
    Comm *c = (Comm *)&bad; /* must come back NULL */
    CommConfig cfg = job_config(job, 2, 2);
    if (comm_new(&c, &cfg, err, sizeof err) == 0 || c != NULL || !starts_with(err, "comm_gloo.cc:")) {
        rank_fail(rank, "rank 2 of 2 accepted or bad message: %s", err);
        bad = 1;
    }
    cfg = job_config(job, 0, 1);
    cfg.backend = "nccl";
    if (comm_new(&c, &cfg, err, sizeof err) == 0 || !strstr(err, "nccl")) {
        rank_fail(rank, "backend nccl accepted or not named: %s", err);
        bad = 1;
    }
    cfg = job_config(job, 0, 1);
    cfg.store = NULL;
    if (comm_new(&c, &cfg, err, sizeof err) == 0) {
        rank_fail(rank, "NULL store accepted");
        bad = 1;
    }
    cfg = job_config(job, 0, 1);
    cfg.timeout_ms = 0;
    if (comm_new(&c, &cfg, err, sizeof err) == 0) {
        rank_fail(rank, "timeout 0 accepted");
        bad = 1;
    }
    cfg = job_config(job, 0, 1);
    cfg.host = "192.0.2.1"; /* TEST-NET: numeric, not ours, so bind fails */
    if (comm_new(&c, &cfg, err, sizeof err) == 0 || !starts_with(err, "comm_gloo.cc:")) {
        rank_fail(rank, "bad host accepted or bad message: %s", err);
        bad = 1;
    }
    float x = 1;
    if (comm_allreduce_sum_f32(NULL, &x, 1, 0, err, sizeof err) == 0 ||
        comm_broadcast_f32(NULL, &x, 1, 0, err, sizeof err) == 0 || comm_barrier(NULL, err, sizeof err) == 0) {
        rank_fail(rank, "an operation on a NULL Comm succeeded");
        bad = 1;
    }
    comm_free(NULL);
    c = NULL;
    comm_free(&c);
    return bad;
}

/* Rank 1 never shows up: rank 0's comm_new must give up at the timeout. */
static int rank_rendezvous_timeout(const Job *job, int rank)
{
    if (rank == 1) return 0;
    Comm *c = NULL;
    char err[512] = "";
    int64_t t0 = now_ms();
    int rc = comm_new(&c,
                      &(CommConfig){ .backend = "gloo",
                                     .rank = rank,
                                     .world = job->world,
                                     .host = "127.0.0.1",
                                     .prefix = job->prefix,
                                     .timeout_ms = job->timeout_ms,
                                     .store = &job->cs },
                      err, sizeof err);
    int64_t dt = now_ms() - t0;
    if (rc == 0 || c != NULL) {
        rank_fail(rank, "comm_new without a peer succeeded");
        comm_free(&c);
        return 1;
    }
    if (!starts_with(err, "comm_gloo.cc:") || !strstr(err, "timed out") || !strstr(err, job->prefix)) {
        rank_fail(rank, "error does not say what timed out: %s", err);
        return 1;
    }
    if (dt < job->timeout_ms - 100 || dt > job->timeout_ms + 2000) {
        rank_fail(rank, "gave up after %lld ms with timeout %lld", (long long)dt, (long long)job->timeout_ms);
        return 1;
    }
    return 0;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* new/use/free three times: threads and descriptors come back each time. */
static int rank_free_cleans_up(const Job *job, int rank)
{
    int threads0 = count_entries("/proc/self/task");
    int fds0 = count_entries("/proc/self/fd");
    char err[512];
    for (int cycle = 0; cycle < 3; cycle++) {
        char prefix[160];
        snprintf(prefix, sizeof prefix, "%s-cycle%d", job->prefix, cycle);
        CommConfig cfg = job_config(job, rank, job->world);
        cfg.prefix = prefix;
        Comm *c = NULL;
        if (comm_new(&c, &cfg, err, sizeof err) != 0) {
            rank_fail(rank, "cycle %d: comm_new: %s", cycle, err);
            return 1;
        }
        float buf[64];
        for (int i = 0; i < 64; i++) buf[i] = 1;
        static float big[1 << 20];
        if (comm_allreduce_sum_f32(c, buf, 64, 1, err, sizeof err) != 0 ||
            comm_allreduce_sum_f32(c, big, 1 << 20, 2, err, sizeof err) != 0 || comm_barrier(c, err, sizeof err) != 0) {
            rank_fail(rank, "cycle %d: %s", cycle, err);
            return 1;
        }
        if (buf[0] != job->world) {
            rank_fail(rank, "cycle %d: sum %g", cycle, buf[0]);
            return 1;
        }
        comm_free(&c);
        if (c) {
            rank_fail(rank, "comm_free left the pointer set");
            return 1;
        }
        int threads = count_entries("/proc/self/task"), fds = count_entries("/proc/self/fd");
        if (threads != threads0 || fds != fds0) {
            rank_fail(rank, "cycle %d: after comm_free %d threads, %d fds; before %d, %d", cycle, threads, fds,
                      threads0, fds0);
            return 1;
        }
    }
    return 0;
}

/* All-reduce in a loop until it fails (the parent kills a rank); the
 * failure must be an error naming this file, and the Comm must then refuse
 * further work at once. arg: element count. */
static int rank_until_failure(const Job *job, int rank)
{
    size_t n = *(const size_t *)job->arg;
    Comm *c = NULL;
    if (job_comm(job, rank, &c) != 0) return 1;
    float *buf = calloc(n, sizeof *buf);
    if (!buf) return 1;
    char err[512] = "";
    int ok_calls = 0;
    int64_t give_up = now_ms() + 20000;
    while (now_ms() < give_up) {
        if (comm_allreduce_sum_f32(c, buf, n, 5, err, sizeof err) != 0) break;
        ok_calls++;
    }
    int bad = 0;
    if (now_ms() >= give_up) {
        rank_fail(rank, "all-reduce kept succeeding after a peer was killed");
        bad = 1;
    } else if (ok_calls == 0) {
        rank_fail(rank, "first all-reduce failed, before any peer was killed: %s", err);
        bad = 1;
    } else if (!starts_with(err, "comm_gloo.cc:")) {
        rank_fail(rank, "error without file:line: %s", err);
        bad = 1;
    }
    int64_t t0 = now_ms();
    if (!bad && (comm_allreduce_sum_f32(c, buf, n, 6, err, sizeof err) == 0 || comm_barrier(c, err, sizeof err) == 0 ||
                 now_ms() - t0 > 100)) {
        rank_fail(rank, "a failed Comm accepted more work or was slow to refuse it");
        bad = 1;
    }
    if (!bad && !strstr(err, "failed earlier")) {
        rank_fail(rank, "second error does not point at the first: %s", err);
        bad = 1;
    }
    free(buf);
    comm_free(&c);
    return bad;
}

/* The last rank stops (SIGSTOP) after one good all-reduce: the others must
 * fail at the timeout, not hang. arg: element count. */
static int rank_peer_stopped(const Job *job, int rank)
{
    size_t n = *(const size_t *)job->arg;
    Comm *c = NULL;
    if (job_comm(job, rank, &c) != 0) return 1;
    float *buf = calloc(n, sizeof *buf);
    if (!buf) return 1;
    char err[512] = "";
    int bad = 0;
    if (comm_allreduce_sum_f32(c, buf, n, 1, err, sizeof err) != 0) {
        rank_fail(rank, "first all-reduce: %s", err);
        bad = 1;
    }
    if (rank == job->world - 1) raise(SIGSTOP); /* the parent kills us later */
    int64_t t0 = now_ms();
    int rc = comm_allreduce_sum_f32(c, buf, n, 2, err, sizeof err);
    int64_t dt = now_ms() - t0;
    if (!bad && rc == 0) {
        rank_fail(rank, "all-reduce with a stopped peer succeeded");
        bad = 1;
    }
    if (!bad && (dt < job->timeout_ms / 2 || dt > job->timeout_ms + 1500)) {
        rank_fail(rank, "all-reduce gave up after %lld ms with timeout %lld: %s", (long long)dt,
                  (long long)job->timeout_ms, err);
        bad = 1;
    }
    if (!bad && !starts_with(err, "comm_gloo.cc:")) {
        rank_fail(rank, "error without file:line: %s", err);
        bad = 1;
    }
    free(buf);
    comm_free(&c);
    return bad;
}

/* More (tag, n) pairs than the backend keeps set up, used twice over in
 * the same order on every rank: whatever it evicts and rebuilds must stay
 * matched across ranks. */
/* Sums that round: every rank must still end with the same bits (DDP's
 * replicas stay identical only if they do). Gloo over TCP alone
 * (DDPTOP_SHM=0), every size the automatic choice covers; rank 0's result
 * is broadcast and compared bit for bit. */
static int rank_same_bits(const Job *job, int rank)
{
    setenv("DDPTOP_SHM", "0", 1);
    Comm *c = NULL;
    if (job_comm(job, rank, &c) != 0) return 1;
    int bad = 0;
    char err[512];
    for (size_t s = 0; s < NSIZES && !bad; s++) {
        size_t n = kSizes[s];
        float *buf = malloc(n * sizeof *buf), *ref = malloc(n * sizeof *ref);
        if (!buf || !ref) return 1;
        uint32_t x = 2463534242u + 977u * (uint32_t)rank + (uint32_t)n;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            buf[i] = ((float)(x >> 8) / (float)(1 << 24) - 0.5f) * (float)(1 + rank * 1000);
        }
        if (comm_allreduce_sum_f32(c, buf, n, (uint32_t)(300 + s), err, sizeof err) != 0) {
            rank_fail(rank, "allreduce n=%zu: %s", n, err);
            bad = 1;
            break;
        }
        memcpy(ref, buf, n * sizeof *buf);
        if (comm_broadcast_f32(c, ref, n, 0, err, sizeof err) != 0) {
            rank_fail(rank, "broadcast n=%zu: %s", n, err);
            bad = 1;
        }
        for (size_t i = 0; i < n && !bad; i++)
            if (memcmp(&buf[i], &ref[i], sizeof buf[i]) != 0) {
                rank_fail(rank, "allreduce n=%zu: [%zu] = %.9g here, %.9g on rank 0", n, i, buf[i], ref[i]);
                bad = 1;
            }
        free(buf);
        free(ref);
    }
    comm_free(&c);
    return bad;
}

static int rank_many_tags(const Job *job, int rank)
{
    Comm *c = NULL;
    if (job_comm(job, rank, &c) != 0) return 1;
    char err[512];
    float buf[300];
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t tag = 0; tag < 150; tag++) {
            size_t n = 1 + tag % 7 * 40;
            for (size_t i = 0; i < n; i++) buf[i] = pattern(i, rank, (int)tag);
            if (comm_allreduce_sum_f32(c, buf, n, tag, err, sizeof err) != 0) {
                rank_fail(rank, "pass %d tag %u: %s", pass, tag, err);
                comm_free(&c);
                return 1;
            }
            for (size_t i = 0; i < n; i++)
                if (buf[i] != pattern_sum(i, job->world, (int)tag)) {
                    rank_fail(rank, "pass %d tag %u: [%zu] = %g, want %g", pass, tag, i, buf[i],
                              pattern_sum(i, job->world, (int)tag));
                    comm_free(&c);
                    return 1;
                }
        }
    comm_free(&c);
    return 0;
}

/* Small all-reduces first, then large ones: the large must run at
 * bandwidth speed. (Gloo's old-style ring pins a socket's send buffer at
 * its own small message size; if the large path shared those sockets a
 * 4 MB all-reduce with 4 ranks took seconds instead of milliseconds.) */
static int rank_large_after_small(const Job *job, int rank)
{
    Comm *c = NULL;
    if (job_comm(job, rank, &c) != 0) return 1;
    char err[512];
    int bad = 0;
    size_t n = 1 << 20;
    float *buf = calloc(n, sizeof *buf);
    if (!buf) return 1;
    for (uint32_t tag = 0; tag < 4 && !bad; tag++)
        if (comm_allreduce_sum_f32(c, buf, 1024, tag, err, sizeof err) != 0) {
            rank_fail(rank, "small all-reduce: %s", err);
            bad = 1;
        }
    int64_t t0 = now_ms(), dt = 0;
    for (int i = 0; i < 5 && !bad && dt < 1500; i++) {
        if (comm_allreduce_sum_f32(c, buf, n, 9, err, sizeof err) != 0) {
            rank_fail(rank, "large all-reduce: %s", err);
            bad = 1;
        }
        dt = now_ms() - t0;
    }
    if (!bad && dt >= 1500) {
        rank_fail(rank, "five 4 MB all-reduces after small ones took %lld ms or more", (long long)dt);
        bad = 1;
    }
    free(buf);
    comm_free(&c);
    return bad;
}

/* ---- cases ---------------------------------------------------------- */

static void test_peer_killed(const char *name, int world, size_t n)
{
    Job j = job_make(name, world, rank_until_failure, &n);
    j.kill_rank = world - 1;
    j.kill_after_ms = 600; /* after rendezvous, mid-loop */
    JobResult res = run_job(&j, 15000);
    CHECK(res.kill_ms >= 0, "rank %d was not killed (it exited with %d)", world - 1, res.status[world - 1]);
    for (int r = 0; r < world - 1; r++) {
        CHECK(res.status[r] == 0, "surviving rank %d exited with status %d", r, res.status[r]);
        /* dead peers are noticed from the socket, well before the timeout */
        CHECK(res.kill_ms < 0 || res.exit_ms[r] - res.kill_ms < 2000,
              "surviving rank %d took %lld ms after the kill to finish", r, (long long)(res.exit_ms[r] - res.kill_ms));
    }
    CHECK(res.leftover == 0, "children left unreaped");
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);

    TEST_BEGIN("version");
    {
        const char *v = comm_version("gloo");
        CHECK(v && !strcmp(v, "gloo 0.5.0"), "comm_version(gloo) = %s", v ? v : "(null)");
        /* nccl is built in wherever nvcc was found (mk/cuda.mk). */
        const char *nv = comm_version("nccl");
        CHECK(comm_available("nccl") ? nv && !strncmp(nv, "nccl ", 5) : nv == NULL, "comm_version(nccl) = %s",
              nv ? nv : "(null)");
        CHECK(comm_version("mpi") == NULL, "a backend not built in has a version");
        CHECK(comm_version(NULL) == NULL, "NULL backend has a version");
    }
    TEST_END();

    TEST_BEGIN("bad_config");
    {
        Job j = job_make("bad_config", 1, rank_bad_config, NULL);
        expect_all_pass(&j, 10000);
    }
    TEST_END();

    TEST_BEGIN("world1");
    {
        Job j = job_make("world1", 1, rank_world1, NULL);
        expect_all_pass(&j, 10000);
    }
    TEST_END();

    TEST_BEGIN("allreduce_2_ranks");
    {
        Job j = job_make("allreduce2", 2, rank_allreduce, NULL);
        expect_all_pass(&j, 15000);
    }
    TEST_END();

    TEST_BEGIN("allreduce_4_ranks");
    {
        Job j = job_make("allreduce4", 4, rank_allreduce, NULL);
        expect_all_pass(&j, 15000);
    }
    TEST_END();

    /* each implementation alone, over every size, so that neither side of
     * the size switch goes untested */
    TEST_BEGIN("allreduce_each_algorithm");
    {
        static const char *algos[] = { "ring", "opts", "bcube" };
        for (int a = 0; a < 3; a++) {
            Job j = job_make(algos[a], 3, rank_allreduce, algos[a]);
            expect_all_pass(&j, 15000);
        }
    }
    TEST_END();

    TEST_BEGIN("allreduce_same_bits_on_every_rank");
    for (int w = 3; w <= 4; w++) {
        Job j = job_make(w == 3 ? "same_bits3" : "same_bits4", w, rank_same_bits, NULL);
        expect_all_pass(&j, 20000);
    }
    TEST_END();

    TEST_BEGIN("allreduce_many_tags");
    {
        Job j = job_make("many_tags", 3, rank_many_tags, NULL);
        expect_all_pass(&j, 15000);
    }
    TEST_END();

    TEST_BEGIN("allreduce_large_after_small");
    {
        Job j = job_make("large_after_small", 4, rank_large_after_small, NULL);
        expect_all_pass(&j, 15000);
    }
    TEST_END();

    TEST_BEGIN("broadcast");
    {
        Job j2 = job_make("broadcast2", 2, rank_broadcast, NULL);
        expect_all_pass(&j2, 15000);
        Job j4 = job_make("broadcast4", 4, rank_broadcast, NULL);
        expect_all_pass(&j4, 15000);
    }
    TEST_END();

    TEST_BEGIN("barrier");
    {
        Job j2 = job_make("barrier2", 2, rank_barrier, NULL);
        expect_all_pass(&j2, 10000);
        Job j4 = job_make("barrier4", 4, rank_barrier, NULL);
        expect_all_pass(&j4, 10000);
    }
    TEST_END();

    TEST_BEGIN("rendezvous_timeout");
    {
        Job j = job_make("rdzv_timeout", 2, rank_rendezvous_timeout, NULL);
        j.timeout_ms = 1000;
        expect_all_pass(&j, 10000);
    }
    TEST_END();

    TEST_BEGIN("free_cleans_up");
    {
        Job j = job_make("free", 2, rank_free_cleans_up, NULL);
        expect_all_pass(&j, 15000);
    }
    TEST_END();

    TEST_BEGIN("peer_killed_small");
    test_peer_killed("killed_small", 3, 256);
    TEST_END();

    TEST_BEGIN("peer_killed_large");
    test_peer_killed("killed_large", 2, 1 << 20);
    TEST_END();

    TEST_BEGIN("peer_stopped_times_out");
    {
        static const size_t small = 256, large = 1 << 20;
        Job j = job_make("stopped_small", 2, rank_peer_stopped, &small);
        j.timeout_ms = 1500;
        j.linger_rank = 1;
        JobResult res = run_job(&j, 10000);
        CHECK(res.status[0] == 0, "small: rank 0 exited with status %d", res.status[0]);
        CHECK(res.leftover == 0, "small: children left unreaped");
        Job k = job_make("stopped_large", 2, rank_peer_stopped, &large);
        k.timeout_ms = 1500;
        k.linger_rank = 1;
        res = run_job(&k, 10000);
        CHECK(res.status[0] == 0, "large: rank 0 exited with status %d", res.status[0]);
        CHECK(res.leftover == 0, "large: children left unreaped");
    }
    TEST_END();

    CHECK_EXIT();
}
