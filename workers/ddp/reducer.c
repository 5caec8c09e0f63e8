/* reducer.c — the communication thread and its queue. See reducer.h.
 *
 * State machine, all under one mutex: ids 1..submitted were queued, ids
 * 1..taken were started (by either thread), ids 1..done finished. At most
 * one op runs at a time (taken == done or taken == done + 1), which is what
 * keeps a Comm single-threaded and the collectives in the same order on
 * every rank. Two condition variables, so that finishing an op wakes only
 * the thread that may care: `work` wakes the communication thread, `fin`
 * the main thread.
 */
#include "ddp/reducer.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wire/protocol.h"
#include "base/clock.h"
#include "nn/bf16.h"

struct Reducer {
    Comm *comm;
    pthread_t th;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t work, fin;
    RedOp ring[REDUCER_KEEP];
    int64_t submitted, taken, done;
    bool stop;
    bool failed;
    char err[512];
};

const char *reducer_kind_name(RedKind k)
{
    switch (k) {
    case RED_ALLREDUCE: return "allreduce";
    case RED_BROADCAST: return "broadcast";
    case RED_BARRIER: return "barrier";
    }
    return "?";
}

/* bf16_compress_hook's `buffer.to(torch.bfloat16).div_(world)`: one
 * rounding for the cast, one for the quotient (torch's bf16 division: the
 * float quotient of the two, rounded). Blocks of 16, which the compiler
 * vectorizes at -O2 (2.5x on 270k elements; it leaves the plain loop
 * scalar for bf16_from_f32's NaN test). */
static void compress_bf16(const float *buf, uint16_t *wire, size_t n, int div)
{
    const float d = div > 1 ? (float)div : 1.0f;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (size_t k = 0; k < 16; k++) wire[i + k] = bf16_from_f32(bf16_round(buf[i + k]) / d);
    for (; i < n; i++) wire[i] = bf16_from_f32(bf16_round(buf[i]) / d);
}

/* The hook's decompress: bucket.buffer().copy_(the bf16 sum), exact. */
static void decompress_bf16(const uint16_t *wire, float *buf, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (size_t k = 0; k < 16; k++) buf[i + k] = bf16_to_f32(wire[i + k]);
    for (; i < n; i++) buf[i] = bf16_to_f32(wire[i]);
}

/* Runs op on the calling thread. Called without the lock; `skip` is the
 * failed flag read under the lock (a failed Comm is not touched again). */
static void exec_op(Reducer *r, RedOp *op, bool skip, char *err, size_t errlen)
{
    if (skip) {
        op->start_ns = op->done_ns = proto_now_ns();
        op->rc = -1;
        return;
    }
    if (op->kind == RED_ALLREDUCE && op->scale != 1.0f) {
        const float s = op->scale;
        float *b = op->buf;
        size_t i = op->scale_from;
        /* blocks of 16 the compiler turns into vector multiplies at -O2 */
        for (; i + 16 <= op->n; i += 16)
            for (size_t k = 0; k < 16; k++) b[i + k] *= s;
        for (; i < op->n; i++) b[i] *= s;
    }
    const bool bf16 = op->kind == RED_ALLREDUCE && op->dtype == COMM_BF16;
    if (bf16) compress_bf16(op->buf, op->wire, op->n, op->div);
    op->start_ns = proto_now_ns();
    switch (op->kind) {
    case RED_ALLREDUCE:
        op->rc = bf16 ? comm_allreduce_sum_bf16(r->comm, op->wire, op->n, op->tag, err, errlen)
                      : comm_allreduce_sum_f32(r->comm, op->buf, op->n, op->tag, err, errlen);
        break;
    case RED_BROADCAST: op->rc = comm_broadcast_f32(r->comm, op->buf, op->n, op->root, err, errlen); break;
    case RED_BARRIER: op->rc = comm_barrier(r->comm, err, errlen); break;
    default: snprintf(err, errlen, "reducer: unknown op kind %d", (int)op->kind); op->rc = -1;
    }
    op->done_ns = proto_now_ns();
    if (bf16 && op->rc == 0) decompress_bf16(op->wire, op->buf, op->n);
}

/* Take the next queued op, run it unlocked, record the result. Called and
 * returns with the lock held. */
static void run_next_locked(Reducer *r, bool on_main)
{
    RedOp *op = &r->ring[(r->taken + 1) % REDUCER_KEEP];
    r->taken++;
    bool skip = r->failed;
    op->inline_run = on_main;
    pthread_mutex_unlock(&r->mu);
    char err[512] = "";
    exec_op(r, op, skip, err, sizeof err);
    pthread_mutex_lock(&r->mu);
    if (op->rc != 0 && !r->failed) {
        r->failed = true;
        snprintf(r->err, sizeof r->err, "%s", err[0] ? err : "collective failed");
    }
    r->done++;
    pthread_cond_signal(&r->fin);
    /* More queued: if the main thread ran this one, the communication
     * thread may be asleep while work waits. */
    if (on_main && r->taken < r->submitted) pthread_cond_signal(&r->work);
}

static void *comm_thread(void *arg)
{
    Reducer *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stop && (r->taken > r->done || r->taken == r->submitted)) pthread_cond_wait(&r->work, &r->mu);
        if (r->taken > r->done || r->taken == r->submitted) {
            if (r->stop) break;
            continue;
        }
        run_next_locked(r, false);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

int reducer_new(Reducer **out, Comm *comm, char *err, size_t errlen)
{
    *out = NULL;
    Reducer *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "reducer: out of memory");
        return -1;
    }
    r->comm = comm;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->work, &ca);
    pthread_cond_init(&r->fin, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&r->th, NULL, comm_thread, r);
    if (rc) {
        snprintf(err, errlen, "reducer: cannot start the communication thread: %s", strerror(rc));
        pthread_cond_destroy(&r->work);
        pthread_cond_destroy(&r->fin);
        pthread_mutex_destroy(&r->mu);
        free(r);
        return -1;
    }
    r->started = true;
    *out = r;
    return 0;
}

void reducer_free(Reducer **pr)
{
    Reducer *r = pr ? *pr : NULL;
    if (!r) return;
    if (r->started) {
        pthread_mutex_lock(&r->mu);
        r->stop = true;
        pthread_cond_signal(&r->work);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->th, NULL);
    }
    pthread_cond_destroy(&r->work);
    pthread_cond_destroy(&r->fin);
    pthread_mutex_destroy(&r->mu);
    free(r);
    *pr = NULL;
}

int64_t reducer_submit(Reducer *r, const RedOp *op, bool wake, char *err, size_t errlen)
{
    pthread_mutex_lock(&r->mu);
    if (r->submitted - r->done >= REDUCER_KEEP) {
        pthread_mutex_unlock(&r->mu);
        snprintf(err, errlen, "reducer: more than %d collectives queued", REDUCER_KEEP);
        return -1;
    }
    int64_t id = r->submitted + 1;
    RedOp *slot = &r->ring[id % REDUCER_KEEP];
    *slot = *op;
    slot->id = id;
    slot->enq_ns = proto_now_ns();
    slot->start_ns = slot->done_ns = 0;
    slot->rc = 0;
    slot->inline_run = false;
    r->submitted = id;
    if (wake) pthread_cond_signal(&r->work);
    pthread_mutex_unlock(&r->mu);
    return id;
}

int reducer_wait(Reducer *r, int64_t id, void (*beat)(void *ctx), void *ctx, int beat_ms, char *err, size_t errlen)
{
    if (beat_ms <= 0) beat_ms = 1000;
    int64_t next_beat = mono_ms() + beat_ms;
    pthread_mutex_lock(&r->mu);
    if (id > r->submitted) id = r->submitted;
    while (r->done < id) {
        /* The communication thread is idle or asleep: run the op here
         * rather than wake it and wait (one thread switch less, and the
         * order is kept because only one op runs at a time) — but only when
         * the caller wants no heartbeats: a thread blocked inside a
         * collective cannot say so, and the hang view needs exactly that
         * beat. With beats, the comm thread runs it and this thread beats. */
        if (!beat && r->taken == r->done && r->taken < r->submitted) {
            run_next_locked(r, true);
            continue;
        }
        if (r->taken == r->done && r->taken < r->submitted) pthread_cond_signal(&r->work);
        struct timespec ts;
        int64_t dl = next_beat;
        ts.tv_sec = (time_t)(dl / 1000);
        ts.tv_nsec = (long)(dl % 1000) * 1000000L;
        int rc = pthread_cond_timedwait(&r->fin, &r->mu, &ts);
        if (rc == ETIMEDOUT || mono_ms() >= next_beat) {
            next_beat = mono_ms() + beat_ms;
            if (beat) {
                pthread_mutex_unlock(&r->mu);
                beat(ctx);
                pthread_mutex_lock(&r->mu);
            }
        }
    }
    int rc = 0;
    if (r->failed) {
        snprintf(err, errlen, "%s", r->err);
        rc = -1;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

const RedOp *reducer_op(const Reducer *r, int64_t id)
{
    Reducer *m = (Reducer *)r; /* the lock only orders the read of `done` */
    pthread_mutex_lock(&m->mu);
    bool ok = id > 0 && id <= m->done && id > m->submitted - REDUCER_KEEP;
    pthread_mutex_unlock(&m->mu);
    return ok ? &r->ring[id % REDUCER_KEEP] : NULL;
}

bool reducer_in_flight(Reducer *r, int64_t *id, RedKind *kind, int64_t *enq_ns, int *bucket)
{
    pthread_mutex_lock(&r->mu);
    bool busy = r->done < r->submitted;
    if (busy) {
        const RedOp *op = &r->ring[(r->done + 1) % REDUCER_KEEP];
        *id = op->id;
        *kind = op->kind;
        *enq_ns = op->enq_ns;
        *bucket = op->bucket;
    }
    pthread_mutex_unlock(&r->mu);
    return busy;
}

int reducer_run(Reducer *r, RedOp *op, void (*beat)(void *ctx), void *ctx, int beat_ms, char *err, size_t errlen)
{
    int64_t id = reducer_submit(r, op, false, err, errlen);
    if (id < 0) return -1;
    int rc = reducer_wait(r, id, beat, ctx, beat_ms, err, errlen);
    const RedOp *rec = reducer_op(r, id);
    if (rec) *op = *rec;
    return rc;
}
