/* comm_nccl.cu — comm.h's NCCL backend: device buffers, one GPU per rank.
 *
 * Owns, per Comm: the NCCL communicator (non-blocking, so that every wait
 * has a deadline and a stuck peer ends in an error, not a hang), a
 * high-priority stream of its own on which every collective runs after a
 * cudaStreamWaitEvent on the compute stream (or on the caller's "gradient
 * ready" event), CUDA events around each collective for comm_timing, and
 * an anchor event that maps event times to the host's wall clock. Does not
 * own the compute stream or the buffers (the caller's), nor the device:
 * cudaSetDevice(LOCAL_RANK) is the caller's, before comm_new.
 *
 * Rendezvous through the caller's CommStore under cfg->prefix: every rank
 * sets "<prefix>/dev/<rank>" (its GPU's UUID, PCI address, host, name);
 * rank 0 sets "<prefix>/id" (the ncclUniqueId). Every rank reads every
 * record before ncclCommInitRankConfig, so ranks that share a GPU — which
 * NCCL does not support and which would hang or fail obscurely inside
 * init — all fail at once with an error that suggests Gloo.
 *
 * Threads: one caller thread at a time (comm.h), plus nccl_abort from any
 * thread. `mu` serialises every NCCL call on the communicator against
 * that abort (ncclCommAbort frees it); waits for completion poll events
 * without holding it.
 *
 * Errors carry "comm_nccl.cu:LINE:". After a failure the communicator is
 * aborted (NCCL's rule: nothing can be assumed after an error) and every
 * later call fails at once, naming the first failure.
 */
#include "comm/comm_backend.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <new>

#include "cuda/cuda_check.cuh"
#include "base/clock.h"

namespace
{

void sleep_us(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Back off while polling: yield for the first 2 ms (a step's collectives
 * usually finish by then and latency matters), then sleep, up to 1 ms. */
void backoff(int64_t since_ms)
{
    int64_t waited = mono_ms() - since_ms;
    if (waited < 2)
        sched_yield();
    else if (waited < 100)
        sleep_us(20);
    else
        sleep_us(1000);
}

/* What a rank tells the others about its GPU. */
struct DevRecord {
    unsigned char uuid[16];
    int32_t device, pci_domain, pci_bus, pci_dev;
    char host[64];
    char name[64];
};

struct Slot {
    int64_t ticket;
    cudaEvent_t start, done;
};

struct NcclComm {
    int rank = 0, world = 1, device = 0;
    int64_t timeout_ms = 0;
    ncclComm_t comm = nullptr;      /* NULL once aborted or destroyed */
    cudaStream_t compute = nullptr; /* the caller's */
    cudaStream_t stream = nullptr;  /* ours */
    cudaEvent_t mark = nullptr;     /* "the compute stream so far" */
    cudaEvent_t joined = nullptr;   /* everything started on our stream */
    cudaEvent_t barrier_done = nullptr;
    cudaEvent_t anchor = nullptr; /* recorded when the stream was idle ... */
    int64_t anchor_ns = 0;        /* ... at this wall-clock time */
    Slot slots[COMM_TIMING_KEEP] = {};
    float *scratch = nullptr; /* one float for the barrier */
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    std::atomic<int> aborted{ 0 };
    char failed[384] = "";
};

#define NCCL_ERR(what, r) CC_ERR("%s: %s (%s)", what, ncclGetErrorString(r), ncclGetLastError(nullptr))

/* Abort with mu held: kernels stop, resources go, the handle is gone. */
void abort_locked(NcclComm *c)
{
    if (c->comm) {
        ncclCommAbort(c->comm);
        c->comm = nullptr;
    }
}

/* Remember the first failure (already in err) and abort: after an NCCL
 * error nothing about queued work can be trusted. */
int poison(NcclComm *c, const char *err)
{
    if (!c->failed[0]) snprintf(c->failed, sizeof c->failed, "%s", err ? err : "failed");
    pthread_mutex_lock(&c->mu);
    abort_locked(c);
    pthread_mutex_unlock(&c->mu);
    return -1;
}

int check_usable(NcclComm *c, const char *op, char *err, size_t errlen)
{
    if (c->failed[0]) {
        CC_ERR("%s: communicator failed earlier (%s)", op, c->failed);
        return -1;
    }
    if (c->aborted.load()) {
        CC_ERR("%s: communicator was aborted (comm_abort)", op);
        return -1;
    }
    return 0;
}

/* A non-blocking communicator may answer ncclInProgress; then its state
 * must read ncclSuccess before anything else is queued on its stream.
 * Called with mu held, right after the call that returned r. */
int settle(NcclComm *c, ncclComm_t comm, ncclResult_t r, const char *what, char *err, size_t errlen)
{
    int64_t t0 = mono_ms();
    while (r == ncclInProgress) {
        if (mono_ms() - t0 > c->timeout_ms) {
            CC_ERR("%s: still in progress after %lld ms (a peer is missing or stuck)", what, (long long)c->timeout_ms);
            return -1;
        }
        backoff(t0);
        ncclResult_t st = ncclSuccess;
        ncclResult_t q = ncclCommGetAsyncError(comm, &st);
        r = q != ncclSuccess ? q : st;
    }
    if (r != ncclSuccess) {
        NCCL_ERR(what, r);
        return -1;
    }
    return 0;
}

/* Wait until `ev` (recorded on our stream) has completed. Fails — and
 * aborts the communicator — on a CUDA error, an NCCL error reported
 * asynchronously, an abort from another thread, or the timeout. */
int wait_done(NcclComm *c, cudaEvent_t ev, const char *op, char *err, size_t errlen)
{
    int64_t t0 = mono_ms();
    for (;;) {
        cudaError_t q = cudaEventQuery(ev);
        if (q == cudaSuccess) break;
        if (q != cudaErrorNotReady) {
            CC_ERR("%s: cudaEventQuery: %s (%s)", op, cudaGetErrorString(q), cudaGetErrorName(q));
            return poison(c, err);
        }
        if (c->aborted.load()) break;
        ncclResult_t st = ncclSuccess;
        pthread_mutex_lock(&c->mu);
        if (c->comm) ncclCommGetAsyncError(c->comm, &st);
        pthread_mutex_unlock(&c->mu);
        if (st != ncclSuccess && st != ncclInProgress) {
            NCCL_ERR(op, st);
            return poison(c, err);
        }
        if (mono_ms() - t0 > c->timeout_ms) {
            CC_ERR("%s: timed out after %lld ms (rank %d/%d; a peer is gone or stuck)", op, (long long)c->timeout_ms,
                   c->rank, c->world);
            return poison(c, err);
        }
        backoff(t0);
    }
    /* Aborted kernels end too: an abort means the data is not a sum. */
    if (c->aborted.load()) {
        CC_ERR("%s: communicator was aborted (comm_abort)", op);
        return -1;
    }
    return 0;
}

int store_get_exact(const CommStore *s, const char *key, void *out, size_t len, int64_t timeout_ms, char *err,
                    size_t errlen)
{
    void *val = nullptr;
    size_t n = 0;
    char serr[256] = "";
    int rc = s->get(s->ctx, key, &val, &n, timeout_ms, serr, sizeof serr);
    if (rc == 1) {
        free(val);
        CC_ERR("comm_new: store: timed out after %lld ms waiting for key '%s' (a rank did "
               "not start?)",
               (long long)timeout_ms, key);
        return -1;
    }
    if (rc != 0) {
        free(val);
        CC_ERR("comm_new: store get '%s': %s", key, serr);
        return -1;
    }
    if (n != len) {
        free(val);
        CC_ERR("comm_new: store key '%s' holds %zu bytes, expected %zu (another ddptop "
               "version?)",
               key, n, len);
        return -1;
    }
    memcpy(out, val, len);
    free(val);
    return 0;
}

int store_set(const CommStore *s, const char *key, const void *val, size_t len, char *err, size_t errlen)
{
    char serr[256] = "";
    if (s->set(s->ctx, key, val, len, serr, sizeof serr) != 0) {
        CC_ERR("comm_new: store set '%s': %s", key, serr);
        return -1;
    }
    return 0;
}

/* Every rank's GPU, and a refusal when two ranks share one. */
int check_one_gpu_per_rank(const CommConfig *cfg, const DevRecord *mine, char *err, size_t errlen)
{
    DevRecord *all = (DevRecord *)calloc((size_t)cfg->world, sizeof *all);
    if (!all) {
        CC_ERR("comm_new: out of memory for %d device records", cfg->world);
        return -1;
    }
    int rc = 0;
    for (int r = 0; r < cfg->world && rc == 0; r++) {
        if (r == cfg->rank) {
            all[r] = *mine;
            continue;
        }
        char key[512];
        snprintf(key, sizeof key, "%s/dev/%d", cfg->prefix, r);
        rc = store_get_exact(cfg->store, key, &all[r], sizeof all[r], cfg->timeout_ms, err, errlen);
    }
    for (int i = 0; i < cfg->world && rc == 0; i++)
        for (int j = i + 1; j < cfg->world && rc == 0; j++) {
            if (memcmp(all[i].uuid, all[j].uuid, sizeof all[i].uuid) != 0) continue;
            all[i].host[sizeof all[i].host - 1] = 0;
            all[i].name[sizeof all[i].name - 1] = 0;
            CC_ERR("comm_new: ranks %d and %d are both on GPU %d of %s (%s, pci "
                   "%04x:%02x:%02x.0); NCCL needs a GPU of its own for every rank: use "
                   "--backend gloo to run more ranks than GPUs (it stages gradients through "
                   "host memory), or fewer ranks",
                   i, j, all[i].device, all[i].host, all[i].name, all[i].pci_domain, all[i].pci_bus, all[i].pci_dev);
            rc = -1;
        }
    free(all);
    return rc;
}

void release(NcclComm *c)
{
    for (auto &s : c->slots) {
        if (s.start) cudaEventDestroy(s.start);
        if (s.done) cudaEventDestroy(s.done);
    }
    if (c->mark) cudaEventDestroy(c->mark);
    if (c->joined) cudaEventDestroy(c->joined);
    if (c->barrier_done) cudaEventDestroy(c->barrier_done);
    if (c->anchor) cudaEventDestroy(c->anchor);
    if (c->scratch) cudaFree(c->scratch);
    if (c->stream) cudaStreamDestroy(c->stream);
    pthread_mutex_destroy(&c->mu);
    delete c;
}

/* Resources that do not involve other ranks. */
int make_local(NcclComm *c, char *err, size_t errlen)
{
    int lo = 0, hi = 0;
    CUDA_TRY(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    /* Highest priority: while backward keeps every SM busy, the collective's
     * blocks are scheduled first, so communication overlaps compute
     * instead of queueing behind it. */
    CUDA_TRY(cudaStreamCreateWithPriority(&c->stream, cudaStreamNonBlocking, hi));
    CUDA_TRY(cudaEventCreateWithFlags(&c->mark, cudaEventDisableTiming));
    CUDA_TRY(cudaEventCreateWithFlags(&c->joined, cudaEventDisableTiming));
    CUDA_TRY(cudaEventCreateWithFlags(&c->barrier_done, cudaEventDisableTiming));
    CUDA_TRY(cudaEventCreate(&c->anchor));
    for (auto &s : c->slots) {
        s.ticket = 0;
        CUDA_TRY(cudaEventCreate(&s.start));
        CUDA_TRY(cudaEventCreate(&s.done));
    }
    CUDA_TRY(cudaMalloc(&c->scratch, sizeof(float)));
    CUDA_TRY(cudaMemset(c->scratch, 0, sizeof(float)));
    return 0;
}

/* Tie event times to the wall clock: an event recorded on the idle stream
 * completes at once, so wall time after it has completed is its time
 * (within the few microseconds of the poll). */
int reanchor(NcclComm *c, char *err, size_t errlen)
{
    CUDA_TRY(cudaEventRecord(c->anchor, c->stream));
    CUDA_TRY(cudaEventSynchronize(c->anchor));
    c->anchor_ns = wall_ns();
    return 0;
}

int nccl_create(void **out, const CommConfig *cfg, char *err, size_t errlen)
{
    *out = nullptr;
    if (!cfg->store || !cfg->store->set || !cfg->store->get) {
        CC_ERR("comm_new: missing config or store callbacks");
        return -1;
    }
    if (cfg->world < 1 || cfg->rank < 0 || cfg->rank >= cfg->world) {
        CC_ERR("comm_new: rank %d out of range for world size %d", cfg->rank, cfg->world);
        return -1;
    }
    if (!cfg->prefix || !*cfg->prefix) {
        CC_ERR("comm_new: prefix is required");
        return -1;
    }
    if (cfg->timeout_ms <= 0) {
        CC_ERR("comm_new: timeout_ms must be > 0 (got %lld)", (long long)cfg->timeout_ms);
        return -1;
    }
    if (!cfg->device || strcmp(cfg->device, "cuda") != 0) {
        CC_ERR("comm_new: nccl reduces GPU buffers: it needs --device cuda (for CPU training "
               "use --backend gloo)");
        return -1;
    }
    int ndev = 0;
    cudaError_t ce = cudaGetDeviceCount(&ndev);
    if (ce != cudaSuccess || ndev < 1) {
        char why[160];
        CC_ERR("comm_new: nccl needs a GPU and found none (cudaGetDeviceCount: %s): use "
               "--device cpu --backend gloo",
               cc_no_gpu_reason(ce, why, sizeof why));
        return -1;
    }

    DevRecord me;
    memset(&me, 0, sizeof me);
    cudaDeviceProp p;
    int dev = 0;
    CUDA_TRY(cudaGetDevice(&dev));
    CUDA_TRY(cudaGetDeviceProperties(&p, dev));
    memcpy(me.uuid, p.uuid.bytes, sizeof me.uuid);
    me.device = dev;
    me.pci_domain = p.pciDomainID;
    me.pci_bus = p.pciBusID;
    me.pci_dev = p.pciDeviceID;
    gethostname(me.host, sizeof me.host - 1);
    snprintf(me.name, sizeof me.name, "%.*s", (int)sizeof me.name - 1, p.name);

    char key[512];
    snprintf(key, sizeof key, "%s/dev/%d", cfg->prefix, cfg->rank);
    if (store_set(cfg->store, key, &me, sizeof me, err, errlen) != 0) return -1;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    snprintf(key, sizeof key, "%s/id", cfg->prefix);
    if (cfg->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) {
            NCCL_ERR("comm_new: ncclGetUniqueId", r);
            return -1;
        }
        if (store_set(cfg->store, key, &id, sizeof id, err, errlen) != 0) return -1;
    }
    if (check_one_gpu_per_rank(cfg, &me, err, errlen) != 0) return -1;
    if (cfg->rank != 0 && store_get_exact(cfg->store, key, &id, sizeof id, cfg->timeout_ms, err, errlen) != 0)
        return -1;

    NcclComm *c = new (std::nothrow) NcclComm();
    if (!c) {
        CC_ERR("comm_new: out of memory");
        return -1;
    }
    c->rank = cfg->rank;
    c->world = cfg->world;
    c->device = dev;
    c->timeout_ms = cfg->timeout_ms;
    c->compute = (cudaStream_t)cfg->stream;
    if (make_local(c, err, errlen) != 0) {
        release(c);
        return -1;
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&c->comm, cfg->world, id, cfg->rank, &config);
    char what[96];
    snprintf(what, sizeof what, "comm_new: ncclCommInitRankConfig (rank %d/%d)", cfg->rank, cfg->world);
    if (settle(c, c->comm, r, what, err, errlen) != 0 || reanchor(c, err, errlen) != 0) {
        abort_locked(c);
        release(c);
        return -1;
    }
    *out = c;
    return 0;
}

int nccl_allreduce(void *impl, void *buf, size_t n, CommDtype dtype, uint32_t tag, void *ready, int async,
                   int64_t ticket, char *err, size_t errlen)
{
    (void)tag; /* NCCL orders collectives by stream; tags are Gloo's */
    NcclComm *c = (NcclComm *)impl;
    const bool bf16 = dtype == COMM_BF16;
    char op[128];
    snprintf(op, sizeof op, "allreduce (rank %d/%d, %zu %s)", c->rank, c->world, n, bf16 ? "bf16" : "floats");
    if (check_usable(c, op, err, errlen) != 0) return -1;
    if (n > 0 && !buf) {
        CC_ERR("%s: buffer is NULL", op);
        return -1;
    }
    Slot *s = &c->slots[ticket % COMM_TIMING_KEEP];
    int rc = -1;
    pthread_mutex_lock(&c->mu);
    do {
        if (!c->comm) {
            CC_ERR("%s: communicator was aborted (comm_abort)", op);
            break;
        }
        cudaEvent_t ev = (cudaEvent_t)ready;
        if (!ev) {
            CUDA_GOTO(cudaEventRecord(c->mark, c->compute));
            ev = c->mark;
        }
        CUDA_GOTO(cudaStreamWaitEvent(c->stream, ev, 0));
        CUDA_GOTO(cudaEventRecord(s->start, c->stream));
        if (n > 0) {
            /* bf16: NCCL sums in bf16 on the GPU (ncclBfloat16, NCCL >= 2.10),
             * what DDP's bf16_compress_hook all-reduces on NCCL */
            ncclResult_t r =
                ncclAllReduce(buf, buf, n, bf16 ? ncclBfloat16 : ncclFloat32, ncclSum, c->comm, c->stream);
            if (settle(c, c->comm, r, op, err, errlen) != 0) break;
        }
        CUDA_GOTO(cudaEventRecord(s->done, c->stream));
        s->ticket = ticket;
        rc = 0;
    } while (0);
fail:
    pthread_mutex_unlock(&c->mu);
    if (rc != 0) return poison(c, err);
    return async ? 0 : wait_done(c, s->done, op, err, errlen);
}

int nccl_broadcast(void *impl, float *buf, size_t n, int root, int64_t ticket, char *err, size_t errlen)
{
    NcclComm *c = (NcclComm *)impl;
    char op[128];
    snprintf(op, sizeof op, "broadcast (rank %d/%d, %zu floats, root %d)", c->rank, c->world, n, root);
    if (check_usable(c, op, err, errlen) != 0) return -1;
    if (root < 0 || root >= c->world) {
        CC_ERR("broadcast: root %d out of range for world size %d", root, c->world);
        return -1;
    }
    if (n > 0 && !buf) {
        CC_ERR("%s: buffer is NULL", op);
        return -1;
    }
    Slot *s = &c->slots[ticket % COMM_TIMING_KEEP];
    int rc = -1;
    pthread_mutex_lock(&c->mu);
    do {
        if (!c->comm) {
            CC_ERR("%s: communicator was aborted (comm_abort)", op);
            break;
        }
        CUDA_GOTO(cudaEventRecord(c->mark, c->compute));
        CUDA_GOTO(cudaStreamWaitEvent(c->stream, c->mark, 0));
        CUDA_GOTO(cudaEventRecord(s->start, c->stream));
        if (n > 0) {
            ncclResult_t r = ncclBroadcast(buf, buf, n, ncclFloat32, root, c->comm, c->stream);
            if (settle(c, c->comm, r, op, err, errlen) != 0) break;
        }
        CUDA_GOTO(cudaEventRecord(s->done, c->stream));
        s->ticket = ticket;
        rc = 0;
    } while (0);
fail:
    pthread_mutex_unlock(&c->mu);
    if (rc != 0) return poison(c, err);
    return wait_done(c, s->done, op, err, errlen);
}

int nccl_barrier(void *impl, char *err, size_t errlen)
{
    NcclComm *c = (NcclComm *)impl;
    char op[64];
    snprintf(op, sizeof op, "barrier (rank %d/%d)", c->rank, c->world);
    if (check_usable(c, op, err, errlen) != 0) return -1;
    int rc = -1;
    pthread_mutex_lock(&c->mu);
    do {
        if (!c->comm) {
            CC_ERR("%s: communicator was aborted (comm_abort)", op);
            break;
        }
        ncclResult_t r = ncclAllReduce(c->scratch, c->scratch, 1, ncclFloat32, ncclSum, c->comm, c->stream);
        if (settle(c, c->comm, r, op, err, errlen) != 0) break;
        CUDA_GOTO(cudaEventRecord(c->barrier_done, c->stream));
        rc = 0;
    } while (0);
fail:
    pthread_mutex_unlock(&c->mu);
    if (rc != 0) return poison(c, err);
    return wait_done(c, c->barrier_done, op, err, errlen);
}

int nccl_join(void *impl, char *err, size_t errlen)
{
    NcclComm *c = (NcclComm *)impl;
    if (check_usable(c, "join", err, errlen) != 0) return -1;
    /* Only CUDA calls: no NCCL state is touched, so no lock. */
    CUDA_TRY(cudaEventRecord(c->joined, c->stream));
    CUDA_TRY(cudaStreamWaitEvent(c->compute, c->joined, 0));
    return 0;
}

int nccl_timing(void *impl, int64_t ticket, CommTiming *out, char *err, size_t errlen)
{
    NcclComm *c = (NcclComm *)impl;
    Slot *s = &c->slots[ticket % COMM_TIMING_KEEP];
    if (s->ticket != ticket) return 1;
    if (cudaEventQuery(s->done) != cudaSuccess && wait_done(c, s->done, "timing", err, errlen) != 0) return -1;
    /* Re-anchor now and then while the stream is idle: the GPU's and the
     * host's clocks drift apart slowly, and float ms lose precision far
     * from the anchor. */
    if (wall_ns() - c->anchor_ns > 1000000000LL && cudaStreamQuery(c->stream) == cudaSuccess &&
        reanchor(c, err, errlen) != 0)
        return -1;
    float a = 0, b = 0;
    CUDA_TRY(cudaEventElapsedTime(&a, c->anchor, s->start));
    CUDA_TRY(cudaEventElapsedTime(&b, c->anchor, s->done));
    out->start_ns = c->anchor_ns + (int64_t)((double)a * 1e6);
    out->done_ns = c->anchor_ns + (int64_t)((double)b * 1e6);
    return 0;
}

int nccl_destroy(void *impl, char *err, size_t errlen)
{
    NcclComm *c = (NcclComm *)impl;
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    if (c->comm && !c->failed[0] && !c->aborted.load()) {
        /* Finalize completes when every rank has flushed its work and the
         * communicator is quiescent everywhere: wait for it, bounded. */
        ncclResult_t r = ncclCommFinalize(c->comm);
        char what[64];
        snprintf(what, sizeof what, "destroy: ncclCommFinalize (rank %d/%d)", c->rank, c->world);
        if (settle(c, c->comm, r, what, err, errlen) == 0) {
            r = ncclCommDestroy(c->comm);
            c->comm = nullptr;
            if (r != ncclSuccess) {
                NCCL_ERR("destroy: ncclCommDestroy", r);
                rc = -1;
            }
        } else {
            rc = -1; /* err says why; abort below */
        }
    } else if (c->failed[0]) {
        CC_ERR("destroy: communicator aborted after a failure (%s)", c->failed);
        rc = -1;
    } else if (c->aborted.load()) {
        CC_ERR("destroy: communicator was aborted (comm_abort)");
        rc = -1;
    }
    abort_locked(c);
    pthread_mutex_unlock(&c->mu);
    cudaSetDevice(c->device);
    release(c);
    return rc;
}

void nccl_abort(void *impl)
{
    NcclComm *c = (NcclComm *)impl;
    pthread_mutex_lock(&c->mu);
    if (!c->aborted.exchange(1)) abort_locked(c);
    pthread_mutex_unlock(&c->mu);
}

const char *nccl_version(void)
{
    static char v[64];
    if (!v[0]) {
        int code = 0;
        if (ncclGetVersion(&code) != ncclSuccess) code = NCCL_VERSION_CODE;
        /* 2.9 and later: major * 10000 + minor * 100 + patch */
        snprintf(v, sizeof v, "nccl %d.%d.%d", code / 10000, code / 100 % 100, code % 100);
    }
    return v;
}

} // namespace

extern "C" const CommOps comm_nccl_ops = {
    "nccl",         /* name */
    1,              /* compiled */
    1,              /* device_buffers */
    nccl_create,    /* create */
    nccl_allreduce, /* allreduce */
    nccl_broadcast, /* broadcast */
    nccl_barrier,   /* barrier */
    nccl_join,      /* join */
    nccl_timing,    /* timing */
    nccl_destroy,   /* destroy */
    nccl_abort,     /* abort */
    nccl_version,   /* version */
    nullptr,        /* describe: "nccl" */
};
