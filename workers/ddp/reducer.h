/* reducer.h — the communication thread: every collective of a rank, in order.
 *
 * Owns: one thread that runs collectives on the rank's Comm while the main
 * thread goes on with backward (DDP's overlap), the queue between them, and
 * each operation's timing (enqueued / started / completed). Does not own the
 * Comm (the caller creates and frees it, after reducer_free) nor telemetry
 * (the main thread reads the timings and reports them).
 *
 * Threads: reducer_* calls come from the main thread only. A Comm is used by
 * one thread at a time: an operation runs either on the communication thread
 * or, when the main thread is waiting for it and the communication thread
 * has not taken it yet, on the main thread itself ("hand-over": no thread
 * switch when there is nothing left to overlap with). Operations never run
 * concurrently and always run in submission order, which is the same on
 * every rank, so the collectives pair up across ranks.
 */
#ifndef DDPTOP_REDUCER_H
#define DDPTOP_REDUCER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"

typedef enum { RED_ALLREDUCE = 0, RED_BROADCAST, RED_BARRIER } RedKind;

typedef struct {
    RedKind kind;
    float *buf;   /* in place; must stay valid until the op is done */
    size_t n;     /* floats */
    uint32_t tag; /* all-reduce: same on every rank for this call */
    int root;     /* broadcast */
    /* All-reduce only: buf[scale_from..n) is multiplied by `scale` just
     * before the all-reduce, on the thread that runs it (DDP divides a
     * gradient by the world size as it enters its bucket). 1 = no scaling. */
    float scale;
    size_t scale_from;
    /* All-reduce only: the type on the wire (--grad-dtype). COMM_BF16 is
     * DDP's bf16_compress_hook, on the thread that runs the op: buf (after
     * `scale`, in FP32) cast to bf16 into `wire`, divided by `div` there
     * (each quotient rounded to bf16: the hook's .div_(world)), summed in
     * bf16 (comm_allreduce_sum_bf16), cast back into buf. `wire` holds n
     * elements, is the caller's and must stay valid until the op is done;
     * div 0 or 1: none. COMM_F32 (0): buf is summed as it is. */
    CommDtype dtype;
    uint16_t *wire;
    int div;
    int bucket; /* for the caller's reports: -1 when not a bucket */
    /* Filled by the reducer: */
    int64_t id;                        /* 1, 2, ... in submission order (same on every rank) */
    int64_t enq_ns, start_ns, done_ns; /* wall clock */
    int rc;                            /* 0 ok, -1 failed */
    bool inline_run;                   /* ran on the main thread (hand-over) */
} RedOp;

typedef struct Reducer Reducer;

/* Start the communication thread for comm. Returns 0 or -1 with err. */
int reducer_new(Reducer **out, Comm *comm, char *err, size_t errlen);
/* Stop and join the thread (after waiting for queued ops to finish or
 * fail). Safe on NULL; sets *r to NULL. Does not free the Comm. */
void reducer_free(Reducer **r);

/* Queue op (copied; kind, buf, n, tag, root, scale, scale_from, dtype,
 * wire, div, bucket are read). wake = false leaves the communication thread asleep: use it for an
 * op the caller is about to wait for anyway, so the main thread runs it
 * itself without a thread switch. Returns the op id (> 0), or -1 with err
 * when the queue is full or the reducer has failed. */
int64_t reducer_submit(Reducer *r, const RedOp *op, bool wake, char *err, size_t errlen);

/* Wait until every op up to `id` is done, running queued ops on this
 * thread when the communication thread is idle. Calls beat(ctx) about every
 * beat_ms while it waits (beat may be NULL). Returns 0, or -1 with err (the
 * first failure; every later op fails too, the Comm being unusable). */
int reducer_wait(Reducer *r, int64_t id, void (*beat)(void *ctx), void *ctx, int beat_ms, char *err, size_t errlen);

/* A finished op's record (timings), or NULL when id is unknown, not done
 * yet, or too old (the last REDUCER_KEEP ops are kept). */
#define REDUCER_KEEP 256
const RedOp *reducer_op(const Reducer *r, int64_t id);

/* The oldest op not yet done: *id, *kind, *enq_ns, *bucket (its RedOp's,
 * -1 when not a bucket). Returns false when idle. */
bool reducer_in_flight(Reducer *r, int64_t *id, RedKind *kind, int64_t *enq_ns, int *bucket);

/* Submit and wait, for one-off collectives (broadcast, barrier, the eval
 * counts, the flags while paused). Returns 0 or -1 with err. */
int reducer_run(Reducer *r, RedOp *op, void (*beat)(void *ctx), void *ctx, int beat_ms, char *err, size_t errlen);

const char *reducer_kind_name(RedKind k);

#endif
