/* comm.c — comm.h's dispatch: one Comm, whichever backend.
 *
 * Owns: picking the backend's operations table by CommConfig.backend (the
 * tables live beside their backends: comm_gloo.cc, comm_nccl.cu or
 * comm_nccl_none.c), the tickets that name collectives for comm_timing and
 * the host-measured times of backends whose calls finish before they
 * return, and — for device "cuda" with a host-only backend (Gloo) — the
 * GpuStage through which device buffers go to host memory and back (4 or 2
 * bytes an element, as the call's dtype).
 * Does not own any library state: that is the backend's `impl`.
 *
 * Threads: as comm.h — one thread at a time per Comm, except comm_abort,
 * which reads only the fields comm_new set.
 */
#include "comm/comm.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm_backend.h"
#include "cuda/gpu.h"
#include "base/clock.h"
#include "base/err.h"

static const CommOps *const backends[] = { &comm_gloo_ops, &comm_nccl_ops };
#define N_BACKENDS (sizeof backends / sizeof backends[0])

struct Comm {
    const CommOps *ops;
    void *impl;
    GpuStage *stage; /* device "cuda" over a host-only backend */
    int64_t last_ticket;
    /* Host-measured times, for backends without a timing operation. */
    struct {
        int64_t ticket;
        CommTiming t;
    } times[COMM_TIMING_KEEP];
    char failed[256]; /* a staging copy failed: every later call refuses */
};

/* "comm.c:LINE: what" into the caller's buffer (err_set). */
#define put_err(err, errlen, line, fmt, ...) ((void)err_set((err), (errlen), "comm.c:%d: " fmt, (line), ##__VA_ARGS__))

/* The clock of proto_now_ns, so times go into coll messages unchanged. */
static const CommOps *find_backend(const char *name)
{
    for (size_t i = 0; name && i < N_BACKENDS; i++)
        if (!strcmp(backends[i]->name, name)) return backends[i];
    return NULL;
}

static int usable(const Comm *c, const char *op, int line, char *err, size_t errlen)
{
    if (!c) {
        put_err(err, errlen, line, "%s: no communicator", op);
        return -1;
    }
    if (c->failed[0]) {
        put_err(err, errlen, line, "%s: communicator failed earlier (%s)", op, c->failed);
        return -1;
    }
    return 0;
}

/* Keep the first staging failure for later calls, as the backends do. */
static int stage_failed(Comm *c, const char *err)
{
    if (!c->failed[0]) snprintf(c->failed, sizeof c->failed, "%s", err ? err : "staging failed");
    return -1;
}

int comm_new(Comm **out, const CommConfig *cfg, char *err, size_t errlen)
{
    if (!out) {
        put_err(err, errlen, __LINE__, "comm_new: out is NULL");
        return -1;
    }
    *out = NULL;
    if (!cfg) {
        put_err(err, errlen, __LINE__, "comm_new: missing config");
        return -1;
    }
    const CommOps *ops = find_backend(cfg->backend);
    if (!ops) {
        put_err(err, errlen, __LINE__, "comm_new: unknown backend '%s' (gloo, nccl)",
                cfg->backend ? cfg->backend : "(null)");
        return -1;
    }
    int cuda = 0;
    if (cfg->device && strcmp(cfg->device, "cpu") != 0) {
        if (strcmp(cfg->device, "cuda") != 0) {
            put_err(err, errlen, __LINE__, "comm_new: unknown device '%s' (cpu, cuda)", cfg->device);
            return -1;
        }
        cuda = 1;
    }
    Comm *c = calloc(1, sizeof *c);
    if (!c) {
        put_err(err, errlen, __LINE__, "comm_new: out of memory");
        return -1;
    }
    c->ops = ops;
    /* Stage before the rendezvous: without a GPU this fails at once, not
     * after every peer has connected. */
    int ngpu = 0;
    if (cuda && ops->compiled && !ops->device_buffers &&
        (gpu_count(&ngpu, err, errlen) != 0 || gpu_stage_new(&c->stage, cfg->stream, err, errlen) != 0)) {
        free(c);
        return -1;
    }
    if (ops->create(&c->impl, cfg, err, errlen) != 0) {
        gpu_stage_free(&c->stage);
        free(c);
        return -1;
    }
    *out = c;
    return 0;
}

static void keep_time(Comm *c, int64_t ticket, int64_t t0, int64_t t1)
{
    if (c->ops->timing) return;
    int k = (int)(ticket % COMM_TIMING_KEEP);
    c->times[k].ticket = ticket;
    c->times[k].t.start_ns = t0;
    c->times[k].t.done_ns = t1;
}

/* A device buffer's `bytes` into the stage's pinned host memory (once
 * `ready` has completed), *host what the backend then reduces; stage_out
 * copies the result back. -1 with err; a failed copy fails the Comm. */
static int stage_in(Comm *c, const char *what, int line, void *buf, size_t bytes, void *ready, void **host, char *err,
                    size_t errlen)
{
    if (!buf) {
        put_err(err, errlen, line, "%s: buffer is NULL", what);
        return -1;
    }
    if (gpu_stage_to_host(c->stage, buf, bytes, ready, host, err, errlen) != 0) return stage_failed(c, err);
    return 0;
}

static int stage_out(Comm *c, void *buf, size_t bytes, char *err, size_t errlen)
{
    if (gpu_stage_to_device(c->stage, buf, bytes, err, errlen) != 0) return stage_failed(c, err);
    return 0;
}

static int allreduce(Comm *c, void *buf, size_t n, CommDtype dtype, uint32_t tag, void *ready, int async,
                     int64_t *ticket, char *err, size_t errlen)
{
    if (usable(c, "allreduce", __LINE__, err, errlen) != 0) return -1;
    int64_t tk = ++c->last_ticket;
    if (ticket) *ticket = tk;
    int64_t t0 = wall_ns();
    int rc;
    if (c->stage && n > 0) {
        const size_t bytes = n * comm_dtype_size(dtype);
        void *host = NULL;
        if (stage_in(c, "allreduce", __LINE__, buf, bytes, ready, &host, err, errlen)) return -1;
        rc = c->ops->allreduce(c->impl, host, n, dtype, tag, NULL, 0, tk, err, errlen);
        if (rc == 0 && stage_out(c, buf, bytes, err, errlen)) return -1;
    } else {
        rc = c->ops->allreduce(c->impl, buf, n, dtype, tag, ready, async, tk, err, errlen);
    }
    if (rc == 0) keep_time(c, tk, t0, wall_ns());
    return rc;
}

int comm_allreduce_sum_f32(Comm *c, float *buf, size_t n, uint32_t tag, char *err, size_t errlen)
{
    return allreduce(c, buf, n, COMM_F32, tag, NULL, 0, NULL, err, errlen);
}

int comm_allreduce_sum_f32_start(Comm *c, float *buf, size_t n, uint32_t tag, void *ready, int64_t *ticket, char *err,
                                 size_t errlen)
{
    return allreduce(c, buf, n, COMM_F32, tag, ready, 1, ticket, err, errlen);
}

int comm_allreduce_sum_bf16(Comm *c, uint16_t *buf, size_t n, uint32_t tag, char *err, size_t errlen)
{
    return allreduce(c, buf, n, COMM_BF16, tag, NULL, 0, NULL, err, errlen);
}

int comm_allreduce_sum_bf16_start(Comm *c, uint16_t *buf, size_t n, uint32_t tag, void *ready, int64_t *ticket,
                                  char *err, size_t errlen)
{
    return allreduce(c, buf, n, COMM_BF16, tag, ready, 1, ticket, err, errlen);
}

int comm_join(Comm *c, char *err, size_t errlen)
{
    if (usable(c, "join", __LINE__, err, errlen) != 0) return -1;
    return c->ops->join ? c->ops->join(c->impl, err, errlen) : 0;
}

int comm_timing(Comm *c, int64_t ticket, CommTiming *out, char *err, size_t errlen)
{
    if (!c) {
        put_err(err, errlen, __LINE__, "timing: no communicator");
        return -1;
    }
    if (ticket < 1 || ticket > c->last_ticket) {
        put_err(err, errlen, __LINE__, "timing: no collective %lld (last is %lld)", (long long)ticket,
                (long long)c->last_ticket);
        return -1;
    }
    if (ticket <= c->last_ticket - COMM_TIMING_KEEP) return 1;
    if (c->ops->timing) return c->ops->timing(c->impl, ticket, out, err, errlen);
    int k = (int)(ticket % COMM_TIMING_KEEP);
    if (c->times[k].ticket != ticket) return 1; /* that call failed */
    *out = c->times[k].t;
    return 0;
}

int comm_broadcast_f32(Comm *c, float *buf, size_t n, int root, char *err, size_t errlen)
{
    if (usable(c, "broadcast", __LINE__, err, errlen) != 0) return -1;
    int64_t tk = ++c->last_ticket;
    int64_t t0 = wall_ns();
    int rc;
    if (c->stage && n > 0) {
        void *host = NULL;
        if (stage_in(c, "broadcast", __LINE__, buf, n * sizeof(float), NULL, &host, err, errlen)) return -1;
        rc = c->ops->broadcast(c->impl, host, n, root, tk, err, errlen);
        if (rc == 0 && stage_out(c, buf, n * sizeof(float), err, errlen)) return -1;
    } else {
        rc = c->ops->broadcast(c->impl, buf, n, root, tk, err, errlen);
    }
    if (rc == 0) keep_time(c, tk, t0, wall_ns());
    return rc;
}

int comm_barrier(Comm *c, char *err, size_t errlen)
{
    if (usable(c, "barrier", __LINE__, err, errlen) != 0) return -1;
    return c->ops->barrier(c->impl, err, errlen);
}

void comm_abort(Comm *c)
{
    if (c && c->ops->abort) c->ops->abort(c->impl);
}

int comm_destroy(Comm **pc, char *err, size_t errlen)
{
    if (!pc || !*pc) return 0;
    Comm *c = *pc;
    int rc = c->ops->destroy(c->impl, err, errlen);
    gpu_stage_free(&c->stage);
    free(c);
    *pc = NULL;
    return rc;
}

void comm_free(Comm **pc)
{
    char err[256];
    if (pc) comm_abort(*pc); /* never wait for peers that may be gone */
    comm_destroy(pc, err, sizeof err);
}

const char *comm_describe(const Comm *c)
{
    if (!c) return "none";
    return c->ops->describe ? c->ops->describe(c->impl) : c->ops->name;
}

const char *comm_dtype_name(CommDtype d) { return d == COMM_BF16 ? "bf16" : "fp32"; }

int comm_dtype_parse(const char *s, CommDtype *out)
{
    if (!strcmp(s, "fp32"))
        *out = COMM_F32;
    else if (!strcmp(s, "bf16"))
        *out = COMM_BF16;
    else
        return -1;
    return 0;
}

size_t comm_dtype_size(CommDtype d) { return d == COMM_BF16 ? 2 : 4; }

const char *comm_version(const char *backend)
{
    const CommOps *ops = find_backend(backend);
    return ops && ops->compiled ? ops->version() : NULL;
}

int comm_available(const char *backend)
{
    const CommOps *ops = find_backend(backend);
    return ops && ops->compiled;
}
