/* comm.h — the collective backend the trainer talks to.
 *
 * Implementations side by side, chosen at run time by CommConfig.backend
 * through comm.c: comm_gloo.cc (Gloo over TCP, host buffers) and
 * comm_nccl.cu (NCCL, device buffers; comm_nccl_none.c stands in when the
 * worker was built without nvcc, and fails comm_new with a clear message).
 * Plain C face; exceptions and library errors never cross it: every call
 * returns 0 or -1 with a reason (file:line) in err.
 *
 * Buffers. With device NULL or "cpu" every float * is host memory. With
 * device "cuda" every float * is device memory on the CUDA device that was
 * current on the thread that called comm_new (cudaSetDevice(LOCAL_RANK) is
 * the caller's), and collectives are ordered after the work the caller
 * queued on CommConfig.stream: NCCL runs them on a stream of its own that
 * waits for the compute stream (or for a `ready` event, see
 * comm_allreduce_sum_f32_start), so they overlap the rest of backward;
 * Gloo stages them through pinned host memory, as PyTorch's Gloo backend
 * does with CUDA tensors (the way to run more ranks than GPUs: NCCL refuses
 * two ranks on one GPU).
 *
 * Threads. A Comm is used by one thread at a time, except comm_abort, which
 * any thread may call while another is blocked in a call. Ranks issue the
 * same calls in the same order. After a call returns -1 only comm_free (or
 * comm_destroy) is valid. The clean end is comm_barrier then comm_destroy;
 * every other way out is comm_free. The store is used only inside comm_new (which may
 * take up to twice timeout_ms, and sets SIGPIPE to ignored if it was at its
 * default: Gloo writes unprotected).
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
    int (*set)(void *ctx, const char *key, const void *val, size_t len, char *err, size_t errlen);
    /* Wait until key exists (at most timeout_ms), then return its value in a
     * malloc'd *val (caller frees). Returns 0, 1 on timeout, -1 on error. */
    int (*get)(void *ctx, const char *key, void **val, size_t *len, int64_t timeout_ms, char *err, size_t errlen);
    /* Optional (NULL: none). Asked every few ms while the rendezvous waits
     * outside the store (Gloo connecting to its peers, which a peer's death
     * leaves waiting until timeout_ms): 1 with why gives up at once
     * (comm_new fails, err naming why), 0 goes on. Never called at the
     * same time as set or get. */
    int (*interrupted)(void *ctx, char *why, size_t whylen);
} CommStore;

typedef struct Comm Comm;

/* The element type gradients travel in (--grad-dtype). COMM_BF16 is DDP's
 * bf16_compress_hook: the FP32 bucket is cast to bf16 and divided by the
 * world size, all-reduced in bf16, and cast back. */
typedef enum { COMM_F32 = 0, COMM_BF16 } CommDtype;

/* "fp32", "bf16" (the names --grad-dtype takes). */
const char *comm_dtype_name(CommDtype d);
/* Parse a comm_dtype_name; 0, or -1 for an unknown name. */
int comm_dtype_parse(const char *s, CommDtype *out);
/* Bytes an element of d takes on the wire: 4 or 2. */
size_t comm_dtype_size(CommDtype d);

typedef struct {
    const char *backend; /* "gloo" or "nccl" */
    int rank, world;
    const char *host;   /* gloo: address this rank listens on, e.g. "127.0.0.1";
                               nccl finds its own interfaces (NCCL_SOCKET_IFNAME) */
    const char *prefix; /* store key prefix, unique per job (and restart) */
    int64_t timeout_ms; /* collectives and rendezvous fail after this */
    const CommStore *store;
    const char *device; /* NULL or "cpu": host buffers; "cuda": device buffers
                               (nccl requires it); see the file comment */
    void *stream;       /* "cuda": the caller's compute stream, a cudaStream_t
                               (NULL: the legacy default stream) */
} CommConfig;

/* Times of one collective, on the wall clock of proto_now_ns (CLOCK_REALTIME
 * ns). NCCL: from CUDA events on its stream, mapped to the host clock
 * (start = the stream reached it: its gradients were ready and earlier
 * collectives done). Gloo: measured around the call, staging copies
 * included. */
typedef struct {
    int64_t start_ns, done_ns;
} CommTiming;

/* Rendezvous and connect every rank. Returns 0 or -1 with err.
 * nccl: rank 0 makes the ncclUniqueId and the others read it from the
 * store; every rank publishes its GPU's UUID first, and ranks that share a
 * GPU all fail at once with an error that suggests --backend gloo. Without
 * a usable GPU it fails at once, naming the CUDA error. */
int comm_new(Comm **out, const CommConfig *cfg, char *err, size_t errlen);

/* In-place sum over all ranks; returns when the sum is in buf (device "cuda":
 * for any later use, host or stream). `tag` must be the same on all ranks
 * for the same call and differ between calls that may be in flight
 * together. */
int comm_allreduce_sum_f32(Comm *c, float *buf, size_t n, uint32_t tag, char *err, size_t errlen);

/* The same sum for buffers that kernels are still writing: it starts once
 * `ready` has completed (a cudaEvent_t recorded on the compute stream; NULL:
 * once the work queued on the compute stream so far is done). NCCL only
 * queues it on its own stream and returns at once: the result is there for
 * work queued on the compute stream after comm_join. Gloo runs it now and
 * returns when it is done, waiting for `ready` first when device is "cuda".
 * *ticket (may be NULL) gets an id for comm_timing. */
int comm_allreduce_sum_f32_start(Comm *c, float *buf, size_t n, uint32_t tag, void *ready, int64_t *ticket, char *err,
                                 size_t errlen);

/* The same two calls for bf16 elements (uint16_t bits, nn/bf16.h), the
 * wire of --grad-dtype bf16: the sum is taken in bf16, every partial sum
 * rounded to nearest even as torch's c10::BFloat16 arithmetic does, so the
 * result is what DDP's bf16_compress_hook all-reduces (the cast and the
 * division by the world size are the caller's: reducer.c). Every rank gets
 * the same bits. Which partial sums are taken depends on the path: the
 * shared-memory all-reduce adds in rank order ((r0 + r1) + r2) + ...;
 * Gloo's ring (gloo::allreduce, the call torch's ProcessGroupGloo makes)
 * in ring order per segment; NCCL (ncclBfloat16, ncclSum) in its own. */
int comm_allreduce_sum_bf16(Comm *c, uint16_t *buf, size_t n, uint32_t tag, char *err, size_t errlen);
int comm_allreduce_sum_bf16_start(Comm *c, uint16_t *buf, size_t n, uint32_t tag, void *ready, int64_t *ticket,
                                  char *err, size_t errlen);

/* Make work queued on the compute stream from now on wait for every
 * collective started so far (GPU side: the host does not wait). A no-op
 * for Gloo, whose calls have finished when they return. */
int comm_join(Comm *c, char *err, size_t errlen);

/* When collective `ticket` ran. Waits for it to finish (bounded by the
 * timeout). Returns 0, 1 when the times are no longer known (more than
 * COMM_TIMING_KEEP collectives since), or -1 with err. */
#define COMM_TIMING_KEEP 64
int comm_timing(Comm *c, int64_t ticket, CommTiming *out, char *err, size_t errlen);

/* In-place broadcast from root; returns when buf holds root's values. */
int comm_broadcast_f32(Comm *c, float *buf, size_t n, int root, char *err, size_t errlen);
/* Returns when every rank has entered it (NCCL: an all-reduce of one float). */
int comm_barrier(Comm *c, char *err, size_t errlen);

/* The watchdog's way out, from any thread, also while another thread is
 * blocked in a call on c: NCCL aborts the communicator (ncclCommAbort: its
 * kernels stop, the blocked call returns -1, later calls fail at once).
 * Gloo has no abort; its calls fail at the timeout. Safe on NULL. The owner
 * still calls comm_free. */
void comm_abort(Comm *c);

/* Clean destroy, after the final barrier: NCCL ncclCommFinalize (waited for,
 * at most the timeout) then ncclCommDestroy, or ncclCommAbort if the
 * communicator failed, was aborted or does not finalize in time; Gloo closes
 * its pairs and frees the context. Frees everything and sets *c to NULL in
 * every case. Returns 0, or -1 with err when the destroy was not clean. */
int comm_destroy(Comm **c, char *err, size_t errlen);
/* Teardown that never waits for peers, for error paths: NCCL aborts
 * (ncclCommAbort), Gloo frees as comm_destroy does. Sets *c to NULL. Safe on
 * NULL and on *c == NULL. */
void comm_free(Comm **c);

/* How c moves data, in words ("gloo over TCP", "gloo; all-reduce through
 * shared memory (...)", "nccl"). Static or c-owned storage. */
const char *comm_describe(const Comm *c);

/* "gloo 0.5.0", "nccl 2.28.9"; NULL for a backend not built in. */
const char *comm_version(const char *backend);
/* 1 when `backend` is built into this binary, else 0. */
int comm_available(const char *backend);

#ifdef __cplusplus
}
#endif

#endif
