/* comm_backend.h — what a collective backend gives comm.c: one table of
 * operations (nccl-tests' struct testColl, redis ae.c's api files).
 *
 * Backends: comm_gloo.cc (comm_gloo_ops), comm_nccl.cu or, built without
 * nvcc, comm_nccl_none.c (comm_nccl_ops). comm.c picks the table by name,
 * checks the Comm handle and the arguments every backend would check the
 * same way, and stages device buffers through host memory for backends
 * that take host buffers only (Gloo). Everything else — including the
 * checks whose messages carry the backend's file:line, which tests look
 * for — stays in the backend.
 *
 * `impl` is the backend's own object. Each call has comm.h's contract for
 * its public counterpart; errors are -1 with "file.ext:LINE: ..." in err.
 */
#ifndef DDPTOP_COMM_BACKEND_H
#define DDPTOP_COMM_BACKEND_H

#include "comm/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *name;   /* "gloo", "nccl" */
    int compiled;       /* 0: a stand-in whose create explains why not */
    int device_buffers; /* 1: takes device pointers itself (nccl); 0: host only */
    int (*create)(void **impl, const CommConfig *cfg, char *err, size_t errlen);
    /* buf holds n elements of dtype (float or bf16 bits), summed in that
     * type: for bf16 every partial sum is rounded to bf16 (c10::BFloat16's
     * a + b: the float sum, rounded to nearest even).
     * async = 1: may only queue it (the result is there after join);
     * ready: a cudaEvent_t or NULL (device_buffers backends only);
     * ticket: comm.c's id for this collective, for timing. */
    int (*allreduce)(void *impl, void *buf, size_t n, CommDtype dtype, uint32_t tag, void *ready, int async,
                     int64_t ticket, char *err, size_t errlen);
    int (*broadcast)(void *impl, float *buf, size_t n, int root, int64_t ticket, char *err, size_t errlen);
    int (*barrier)(void *impl, char *err, size_t errlen);
    /* NULL: every call has finished when it returns (join is a no-op and
     * comm.c keeps the host times). */
    int (*join)(void *impl, char *err, size_t errlen);
    int (*timing)(void *impl, int64_t ticket, CommTiming *out, char *err, size_t errlen);
    /* Always frees impl. */
    int (*destroy)(void *impl, char *err, size_t errlen);
    /* NULL: no abort; calls end at the timeout. */
    void (*abort)(void *impl);
    const char *(*version)(void);
    /* NULL: the name says it all. Else how this communicator moves data,
     * for the user ("gloo, all-reduce through shared memory ..."). */
    const char *(*describe)(void *impl);
} CommOps;

extern const CommOps comm_gloo_ops;
extern const CommOps comm_nccl_ops;

#ifdef __cplusplus
}
#endif

#endif
