/* shm_reduce.c — all-reduce through shared memory. See shm_reduce.h.
 *
 * Layout: a header (the bell, the waiters count, each rank's pid and
 * arrival counter on its own cache line), then two sets of `world` slots
 * of SLOT_BYTES bytes (floats or bf16). Chunk k of a call goes through set k % 2: each
 * rank copies its chunk into its slot, announces arrival k (release), waits
 * until every rank has (acquire), then sums the slots in rank order into
 * its buffer. No second barrier is needed before a set is written again:
 * a rank writes set k % 2 for chunk k + 2 only after passing arrival k + 1,
 * and every rank arrives there only after it finished reading chunk k.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "comm/shm_reduce.h"
#include "base/clock.h"
#include "nn/bf16.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Bytes per rank per set: 2 MiB (512 Ki floats, 1 Mi bf16); a 1 MB bucket
 * is one chunk. */
#define SLOT_BYTES (2u << 20)
#define MAGIC      0x64647073686d3031ull /* "ddpshm01" */

typedef struct {
    _Atomic uint64_t arrived; /* chunks this rank has put in its slot */
    _Atomic int32_t pid;
    char pad[64 - sizeof(uint64_t) - sizeof(int32_t)];
} RankLine;

typedef struct {
    uint64_t magic;
    int32_t world;
    char pad0[52];
    _Atomic uint32_t bell;   /* futex word: bumped at every arrival */
    _Atomic int32_t waiters; /* ranks asleep on the bell */
    char pad1[56];
    RankLine rank[SHM_REDUCE_MAX_WORLD];
} Header;

struct ShmReduce {
    Header *h;
    char *slots; /* [2][world][SLOT_BYTES] */
    size_t map_len;
    int rank, world;
    int64_t timeout_ms;
    uint64_t chunks;       /* chunks done by this rank */
    unsigned spin, yields; /* wait: pause-spins, then yields, then sleep */
    atomic_int aborted;
    bool broken;
};

static size_t map_size(int world) { return sizeof(Header) + 2u * (size_t)world * SLOT_BYTES; }

static int read_small(const char *path, char *out, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, out, len - 1);
    close(fd);
    if (n <= 0) return -1;
    out[n] = 0;
    out[strcspn(out, "\n")] = 0;
    return 0;
}

int shm_host_key(char *out, size_t outlen)
{
    char boot[64], host[256], ns[4][64];
    static const char *const names[4] = { "pid", "net", "ipc", "mnt" };
    if (read_small("/proc/sys/kernel/random/boot_id", boot, sizeof boot) || gethostname(host, sizeof host)) return -1;
    host[sizeof host - 1] = 0;
    for (int i = 0; i < 4; i++) {
        char p[64];
        snprintf(p, sizeof p, "/proc/self/ns/%s", names[i]);
        ssize_t n = readlink(p, ns[i], sizeof ns[i] - 1);
        if (n <= 0) return -1;
        ns[i][n] = 0;
    }
    int n = snprintf(out, outlen, "%s %s %s %s %s %s", boot, host, ns[0], ns[1], ns[2], ns[3]);
    return n > 0 && (size_t)n < outlen ? 0 : -1;
}

void shm_reduce_name(char *out, size_t outlen)
{
    uint64_t r = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, &r, sizeof r) != (ssize_t)sizeof r) {
        r = (uint64_t)wall_ns() * 0x9e3779b97f4a7c15ull;
    }
    if (fd >= 0) close(fd);
    /* ddptop's launcher (tui/launch/launcher.c) removes names of this form left by
     * a reaped rank: keep the two in step */
    snprintf(out, outlen, "/ddptop-%d-%016llx", (int)getpid(), (unsigned long long)r);
}

int shm_reduce_open(ShmReduce **out, const char *name, int rank, int world, int64_t timeout_ms, char *err,
                    size_t errlen)
{
    *out = NULL;
    if (world < 2 || world > SHM_REDUCE_MAX_WORLD || rank < 0 || rank >= world) {
        snprintf(err, errlen, "shm_reduce.c:%d: rank %d of %d: shared memory takes 2..%d ranks", __LINE__, rank, world,
                 SHM_REDUCE_MAX_WORLD);
        return -1;
    }
    size_t len = map_size(world);
    int fd =
        rank == 0 ? shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "shm_reduce.c:%d: shm_open %s: %s", __LINE__, name, strerror(errno));
        return -1;
    }
    /* posix_fallocate, not just ftruncate: a /dev/shm too small for the
     * slots (a container's 64 MB default) must fail here, cleanly (Gloo's
     * TCP then), not with SIGBUS at the first write into a missing page */
    int rc = rank == 0 ? posix_fallocate(fd, 0, (off_t)len) : 0;
    if (rc) {
        snprintf(err, errlen, "shm_reduce.c:%d: cannot reserve %zu bytes for %s: %s", __LINE__, len, name,
                 strerror(rc));
        close(fd);
        shm_unlink(name);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) || (size_t)st.st_size != len) {
        snprintf(err, errlen, "shm_reduce.c:%d: %s has %lld bytes, want %zu", __LINE__, name, (long long)st.st_size,
                 len);
        close(fd);
        return -1;
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "shm_reduce.c:%d: mmap %s: %s", __LINE__, name, strerror(errno));
        return -1;
    }
    ShmReduce *s = calloc(1, sizeof *s);
    if (!s) {
        munmap(p, len);
        snprintf(err, errlen, "shm_reduce.c:%d: out of memory", __LINE__);
        return -1;
    }
    s->h = p;
    s->slots = (char *)p + sizeof(Header);
    s->map_len = len;
    s->rank = rank;
    s->world = world;
    s->timeout_ms = timeout_ms > 0 ? timeout_ms : 300000;
    /* Spin briefly (a few us), yield a little, then sleep on the bell: a
     * long spin takes a core from the rank being waited for whenever ranks
     * and their helper threads (ZeroMQ's, Gloo's) outnumber the cores.
     * DDPTOP_SHM_SPIN / DDPTOP_SHM_YIELDS override, for measuring. */
    s->spin = 200;
    s->yields = 20;
    if (getenv("DDPTOP_SHM_SPIN")) s->spin = (unsigned)atoi(getenv("DDPTOP_SHM_SPIN"));
    if (getenv("DDPTOP_SHM_YIELDS")) s->yields = (unsigned)atoi(getenv("DDPTOP_SHM_YIELDS"));
    if (rank == 0) {
        s->h->magic = MAGIC;
        s->h->world = world;
    }
    atomic_store_explicit(&s->h->rank[rank].pid, (int32_t)getpid(), memory_order_release);
    *out = s;
    return 0;
}

void shm_reduce_unlink(const char *name) { shm_unlink(name); }

/* A process that is gone, or a zombie its parent has not reaped yet. */
static bool pid_gone(int32_t pid)
{
    if (pid <= 0) return false; /* not mapped yet: judged by the timeout */
    if (kill(pid, 0) && errno == ESRCH) return true;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (read_small(path, buf, sizeof buf)) return true;
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Wait until every rank has arrived at chunk `k`. */
static int wait_all(ShmReduce *s, uint64_t k, char *err, size_t errlen)
{
    Header *h = s->h;
    int64_t start = 0, last_check = 0;
    for (unsigned iter = 0;; iter++) {
        int missing = -1;
        for (int i = 0; i < s->world; i++) {
            if (atomic_load_explicit(&h->rank[i].arrived, memory_order_acquire) < k) {
                missing = i;
                break;
            }
        }
        if (missing < 0) return 0;
        if (iter < s->spin) {
            cpu_relax();
            continue;
        }
        if (iter < s->spin + s->yields) {
            sched_yield();
            continue;
        }
        int64_t t = mono_ms();
        if (!start) start = last_check = t;
        if (atomic_load(&s->aborted)) {
            snprintf(err, errlen, "shm_reduce.c:%d: aborted while waiting for rank %d", __LINE__, missing);
            return -1;
        }
        if (t - last_check >= 20) {
            last_check = t;
            for (int i = 0; i < s->world; i++) {
                if (atomic_load_explicit(&h->rank[i].arrived, memory_order_acquire) >= k) continue;
                int32_t pid = atomic_load_explicit(&h->rank[i].pid, memory_order_acquire);
                if (pid_gone(pid)) {
                    snprintf(err, errlen, "shm_reduce.c:%d: rank %d (pid %d) is gone", __LINE__, i, (int)pid);
                    return -1;
                }
            }
        }
        if (t - start > s->timeout_ms) {
            snprintf(err, errlen, "shm_reduce.c:%d: timed out after %lld ms waiting for rank %d", __LINE__,
                     (long long)s->timeout_ms, missing);
            return -1;
        }
        /* asleep on the bell; every arrival rings it */
        uint32_t seen = atomic_load_explicit(&h->bell, memory_order_acquire);
        atomic_fetch_add(&h->waiters, 1);
        if (atomic_load_explicit(&h->rank[missing].arrived, memory_order_acquire) < k) {
            struct timespec ts = { 0, 5 * 1000000L };
            syscall(SYS_futex, &h->bell, FUTEX_WAIT, seen, &ts, NULL, 0);
        }
        atomic_fetch_sub(&h->waiters, 1);
    }
}

/* dst = slot 0 + slot 1 + ... + slot world-1, in rank order, m elements of
 * chunk `set` (slots SLOT_BYTES apart). */
typedef void (*SumFn)(void *dst, const char *set, int world, size_t m);

static void sum_f32(void *dstv, const char *set, int world, size_t m)
{
    float *dst = dstv;
    const float *a = (const float *)set, *b = (const float *)(set + SLOT_BYTES);
    for (size_t j = 0; j < m; j++) dst[j] = a[j] + b[j];
    for (int r = 2; r < world; r++) {
        const float *c = (const float *)(set + (size_t)r * SLOT_BYTES);
        for (size_t j = 0; j < m; j++) dst[j] += c[j];
    }
}

/* out = a + b in bf16, as c10::BFloat16's a + b (the float sum, rounded).
 * Blocks of 16 through a local array: the compiler vectorizes them at -O2
 * (0.2 ms for 270k elements, as a float add; 0.65 ms scalar), where out
 * and a may be the same array. */
static void add_bf16(uint16_t *out, const uint16_t *a, const uint16_t *b, size_t m)
{
    size_t j = 0;
    for (; j + 16 <= m; j += 16) {
        uint16_t t[16];
        for (size_t k = 0; k < 16; k++) t[k] = bf16_from_f32(bf16_to_f32(a[j + k]) + bf16_to_f32(b[j + k]));
        memcpy(out + j, t, sizeof t);
    }
    for (; j < m; j++) out[j] = bf16_from_f32(bf16_to_f32(a[j]) + bf16_to_f32(b[j]));
}

/* Every partial sum rounded to bf16. */
static void sum_bf16(void *dstv, const char *set, int world, size_t m)
{
    uint16_t *dst = dstv;
    add_bf16(dst, (const uint16_t *)set, (const uint16_t *)(set + SLOT_BYTES), m);
    for (int r = 2; r < world; r++) add_bf16(dst, dst, (const uint16_t *)(set + (size_t)r * SLOT_BYTES), m);
}

static int allreduce(ShmReduce *s, char *buf, size_t n, size_t esize, SumFn sum, char *err, size_t errlen)
{
    if (s->broken) {
        snprintf(err, errlen, "shm_reduce.c:%d: the shared-memory all-reduce failed earlier", __LINE__);
        return -1;
    }
    Header *h = s->h;
    const int w = s->world;
    const size_t per = SLOT_BYTES / esize; /* elements per chunk */
    for (size_t off = 0; off < n; off += per) {
        size_t m = n - off < per ? n - off : per;
        uint64_t k = s->chunks + 1;
        char *set = s->slots + (size_t)(k % 2) * (size_t)w * SLOT_BYTES;
        memcpy(set + (size_t)s->rank * SLOT_BYTES, buf + off * esize, m * esize);
        atomic_store_explicit(&h->rank[s->rank].arrived, k, memory_order_release);
        atomic_fetch_add_explicit(&h->bell, 1, memory_order_release);
        if (atomic_load(&h->waiters) > 0) syscall(SYS_futex, &h->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        if (wait_all(s, k, err, errlen)) {
            s->broken = true;
            return -1;
        }
        /* the same order on every rank: the same bits everywhere */
        sum(buf + off * esize, set, w, m);
        s->chunks = k;
    }
    return 0;
}

int shm_reduce_allreduce(ShmReduce *s, float *buf, size_t n, char *err, size_t errlen)
{
    return allreduce(s, (char *)buf, n, sizeof(float), sum_f32, err, errlen);
}

int shm_reduce_allreduce_bf16(ShmReduce *s, uint16_t *buf, size_t n, char *err, size_t errlen)
{
    return allreduce(s, (char *)buf, n, sizeof(uint16_t), sum_bf16, err, errlen);
}

void shm_reduce_abort(ShmReduce *s)
{
    if (!s) return;
    atomic_store(&s->aborted, 1);
    syscall(SYS_futex, &s->h->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void shm_reduce_close(ShmReduce **ps)
{
    ShmReduce *s = ps ? *ps : NULL;
    if (!s) return;
    munmap(s->h, s->map_len);
    free(s);
    *ps = NULL;
}
