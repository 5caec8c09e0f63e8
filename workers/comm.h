/* comm.h — the collective backend the trainer talks to.
 *
 * Implementations side by side: comm_gloo.cc (Gloo over TCP, CPU buffers);
 * comm_nccl.cu later. Plain C face; exceptions and library errors never
 * cross it: every call returns 0 or -1 with a reason (file:line) in err.
 * A Comm is used by one thread at a time; ranks issue the same calls in the
 * same order. After a call returns -1 only comm_free is valid. The store is
 * used only inside comm_new (which may take up to twice timeout_ms, and sets
 * SIGPIPE to ignored if it was at its default: Gloo writes unprotected).
 */
#ifndef DDPTOP_COMM_H
#define DDPTOP_COMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The rendezvous store, provided by the caller (ddptop's store over ZeroMQ). */
typedef struct {
    void *ctx;
    /* Store key = value. Returns 0 or -1 with err. */
    int (*set)(void *ctx, const char *key, const void *val, size_t len,
               char *err, size_t errlen);
    /* Wait until key exists (at most timeout_ms), then return its value in a
     * malloc'd *val (caller frees). Returns 0, 1 on timeout, -1 on error. */
    int (*get)(void *ctx, const char *key, void **val, size_t *len, int64_t timeout_ms,
               char *err, size_t errlen);
} CommStore;

typedef struct Comm Comm;

typedef struct {
    const char *backend;    /* "gloo" */
    int rank, world;
    const char *host;       /* address this rank listens on, e.g. "127.0.0.1" */
    const char *prefix;     /* store key prefix, unique per job (and restart) */
    int64_t timeout_ms;     /* collectives and rendezvous fail after this */
    const CommStore *store;
} CommConfig;

/* Rendezvous and connect every rank. Returns 0 or -1 with err. */
int comm_new(Comm **out, const CommConfig *cfg, char *err, size_t errlen);
/* In-place sum over all ranks. `tag` must be the same on all ranks for the
 * same call and differ between calls that may be in flight together. */
int comm_allreduce_sum_f32(Comm *c, float *buf, size_t n, uint32_t tag, char *err, size_t errlen);
int comm_broadcast_f32(Comm *c, float *buf, size_t n, int root, char *err, size_t errlen);
int comm_barrier(Comm *c, char *err, size_t errlen);
/* Destroy the communicator (Gloo: close pairs, free the context). */
void comm_free(Comm **c);
/* e.g. "gloo 0.5.0". */
const char *comm_version(const char *backend);

#ifdef __cplusplus
}
#endif

#endif
