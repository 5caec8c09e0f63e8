/* job_comm.c — the job model's collectives: each collective matched across
 * ranks by its sequence number (who arrived first and last, who has not
 * arrived yet, whether they agree on its op and shape), its transfer and
 * wait (nccl-tests' figures), per-bucket transfer and bandwidth over steps,
 * and the comm share of a step.
 *
 * Owns: the collectives ring (and its arrival bitsets) in Job.book,
 * Job.buckets and their accumulators. Arrivals come
 * from completed collectives (their enqueue time) and from heartbeats (a
 * collective in flight since), so a hang shows who never came. Main thread.
 */
#include "model/job_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t seen_words(const Job *j) { return ((size_t)j->world + 63) / 64; }

/* Slot k's arrival bitset. */
static uint64_t *seen_at(const Job *j, size_t k) { return j->book->seen + seen_words(j) * k; }

/* Slot c's arrival bitset. */
static uint64_t *seen_of(const Job *j, const JobColl *c) { return seen_at(j, (size_t)(c - j->book->colls)); }

static void bucket_books_reset(Job *j)
{
    for (int b = 0; b < JOB_MAX_BUCKETS; b++) {
        JobBucketBook *k = &j->book->bucket_book[b];
        memset(k->at, 0, sizeof k->at);
        for (int i = 0; i < JOB_BUCKET_STEPS; i++) k->at[i].step = -1;
        k->newest = k->full = -1;
        j->buckets[b].last_step = -1;
    }
}

int job_comm_init(Job *j)
{
    /* one block for every slot's bitset */
    j->book->seen = calloc(seen_words(j) * JOB_COLL_RING, sizeof *j->book->seen);
    if (!j->book->seen) return -1;
    for (int i = 0; i < JOB_COLL_RING; i++) {
        memset(&j->book->colls[i], 0, sizeof j->book->colls[i]);
        j->book->colls[i].seq = -1;
    }
    j->book->coll_max_seq = -1;
    j->book->mismatch_seq = -1;
    j->book->mismatch_text[0] = '\0';
    for (int b = 0; b < JOB_MAX_BUCKETS; b++) series_init(&j->buckets[b].ms);
    bucket_books_reset(j);
    return 0;
}

void job_comm_done(Job *j)
{
    free(j->book->seen);
    j->book->seen = NULL;
}

/* slot_for's slot c claimed for seq (cleared) when it held an older one;
 * NULL when it has moved on past seq already. Once per collective. */
__attribute__((noinline)) static JobColl *slot_claim(Job *j, JobColl *c, int64_t seq)
{
    if (c->seq > seq) return NULL;
    memset(seen_of(j, c), 0, seen_words(j) * sizeof *j->book->seen);
    memset(c, 0, sizeof *c);
    c->seq = seq;
    c->bucket = -1;
    c->first_rank = c->last_rank = c->op_rank = c->shape_rank = c->odd_rank = -1;
    c->count = -1;
    if (seq > j->book->coll_max_seq) j->book->coll_max_seq = seq;
    return c;
}

/* The slot for seq, claimed (and cleared) when it held an older one; NULL
 * when the slot has moved on past seq already. Every rank's report of a
 * collective after the first finds it in place, without a call. */
static inline JobColl *slot_for(Job *j, int64_t seq)
{
    if (seq < 0 || !j->book->seen) return NULL;
    JobColl *c = &j->book->colls[(uint64_t)seq % JOB_COLL_RING];
    if (c->seq == seq) return c;
    return slot_claim(j, c, seq);
}

/* Rank (0..world-1) arrived in c (its bitset seen) at at_ns. */
static inline void arrive(JobColl *c, uint64_t *seen, int rank, int64_t at_ns)
{
    uint64_t bit = 1ULL << ((unsigned)rank % 64);
    uint64_t *w = &seen[(unsigned)rank / 64];
    if (*w & bit) return;
    *w |= bit;
    if (c->arrived++ == 0) {
        c->first_ns = c->last_ns = c->prev_last_ns = at_ns;
        c->first_rank = c->last_rank = rank;
        return;
    }
    if (at_ns < c->first_ns) {
        c->first_ns = at_ns;
        c->first_rank = rank;
    }
    if (at_ns >= c->last_ns) {
        c->prev_last_ns = c->last_ns;
        c->last_ns = at_ns;
        c->last_rank = rank;
    } else if (at_ns > c->prev_last_ns || c->arrived == 2) {
        c->prev_last_ns = at_ns;
    }
}

/* A rank's report's start: when it entered the collective (its enqueue
 * when it says no start). */
static inline int64_t coll_in_ns(const MsgColl *c) { return c->start_ns ? c->start_ns : c->enq_ns; }

/* nccl-tests' bus bandwidth factor of op over n ranks (its *_perf.c). */
static double bus_factor(const char *op, int n)
{
    if (n < 1) return 0;
    if (!strcmp(op, "allreduce")) return 2.0 * (n - 1) / n;
    if (!strcmp(op, "allgather") || !strcmp(op, "reducescatter") || !strcmp(op, "alltoall")) return (double)(n - 1) / n;
    if (!strcmp(op, "barrier")) return 0;
    return 1; /* broadcast, reduce, gather, scatter */
}

/* The figures of a collective of `bytes` a rank whose ranks started
 * between in_first and in_last and were all done at done_last (wall ns):
 * the transfer is what nccl-tests times, the data moving once everybody is
 * in; the wait before it is the ranks' lateness, no bandwidth's. A
 * negative transfer (clocks of two hosts apart) is no figure: 0. */
static void times_of(JobCollTimes *t, const char *op, int n, int64_t bytes, int64_t in_first, int64_t in_last,
                     int64_t done_last)
{
    int64_t x = done_last - in_last;
    t->xfer_ms = x > 0 ? (double)x / 1e6 : 0;
    t->wait_ms = in_last > in_first ? (double)(in_last - in_first) / 1e6 : 0;
    /* bytes per ns is GB/s */
    t->algbw_gbs = x > 0 && strcmp(op, "barrier") ? (double)bytes / (double)x : 0;
    t->busbw_gbs = t->algbw_gbs * bus_factor(op, n);
}

/* A span's first and last start and its last done, with one more report. */
static inline void span_add(int64_t *in_first, int64_t *in_last, int64_t *done_last, bool first, int64_t in,
                            int64_t done)
{
    if (first) {
        *in_first = *in_last = in;
        *done_last = done;
        return;
    }
    if (in < *in_first) *in_first = in;
    if (in > *in_last) *in_last = in;
    if (done > *done_last) *done_last = done;
}

/* A rank's report of bucket i at a step, into that step's span. Ranks
 * report in bursts (a rank's steps of 50 ms together, then the next rank's),
 * so each recent step keeps a span of its own; the newest step every rank
 * reported is the one shown (JobBucket.last) and the one the series gets.
 * A report older than the steps kept (a straggler JOB_BUCKET_STEPS behind)
 * is left out. */
static void bucket_add(Job *j, const MsgColl *c)
{
    int i = c->bucket < JOB_MAX_BUCKETS ? c->bucket : JOB_MAX_BUCKETS - 1;
    JobBucket *b = &j->buckets[i];
    JobBucketBook *k = &j->book->bucket_book[i];
    b->used = true;
    b->bytes = c->bytes;
    if (i + 1 > j->n_buckets) j->n_buckets = i + 1;
    JobBucketAcc *a = &k->at[(uint64_t)c->step % JOB_BUCKET_STEPS];
    if (a->step != c->step) {
        if (c->step < a->step) return; /* its slot holds a newer step */
        *a = (JobBucketAcc){ .step = c->step };
    }
    span_add(&a->in_first_ns, &a->in_last_ns, &a->done_last_ns, a->n++ == 0, coll_in_ns(c), c->done_ns);
    a->bytes = c->bytes;
    if (c->step > k->newest) k->newest = c->step;
    if (a->n == j->world && c->step >= k->full) { /* every rank reported this step */
        k->full = c->step;
        times_of(&b->last, "allreduce", j->world, a->bytes, a->in_first_ns, a->in_last_ns, a->done_last_ns);
        b->last_step = c->step;
        series_add(&b->ms, c->step, b->last.xfer_ms);
    }
}

/* strncmp(a, b, PROTO_STR_SHORT) == 0 for two op fields (PROTO_STR_SHORT
 * bytes each), without the call in the usual case: every rank's
 * "allreduce", both fields as decoded (zeros after the string), are the
 * same bytes, one inline compare. Fields that differ anywhere (another op,
 * or bytes after the string) take strncmp. */
static inline bool op_equal(const char *a, const char *b)
{
    return memcmp(a, b, PROTO_STR_SHORT) == 0 || strncmp(a, b, PROTO_STR_SHORT) == 0;
}

/* A rank's report of e's op: the first one sets it; another rank's
 * different op is the desync lint. */
static inline void check_op(Job *j, JobColl *e, int rank, const char *op, JobTime at)
{
    if (e->op[0] && e->op_rank >= 0 && e->op_rank != rank && op[0] && !op_equal(e->op, op))
        job_lint_desync(j, at, e->seq, e->op_rank, e->op, rank, op);
}

void job_comm_restart(Job *j)
{
    if (!j->book->seen) return;
    memset(j->book->seen, 0, seen_words(j) * JOB_COLL_RING * sizeof *j->book->seen);
    for (int i = 0; i < JOB_COLL_RING; i++) {
        memset(&j->book->colls[i], 0, sizeof j->book->colls[i]);
        j->book->colls[i].seq = -1;
    }
    j->book->coll_max_seq = -1;
    bucket_books_reset(j); /* steps start again from the checkpoint's */
}

/* One rank's side of a mismatch: its op, count and dtype. */
typedef struct {
    int rank;
    const char *op, *dtype;
    int64_t count;
} Side;

/* e's two reports that differ, as job_coll_mismatch says them: the lower
 * rank first, whichever reported first, so a job reads the same every run. */
static void mismatch_say(const JobColl *e, char *buf, size_t len)
{
    Side x = { e->shape_rank, e->shape_op, e->dtype, e->count }, y = { e->odd_rank, e->odd_op, e->odd_dtype, e->odd_count };
    if (y.rank < x.rank) {
        Side t = x;
        x = y, y = t;
    }
    char a[64], b[64];
    bool dt_same = strcmp(x.dtype, y.dtype) == 0;
    const char *ydt = dt_same ? "" : y.dtype;
    if (op_equal(x.op, y.op)) {
        snprintf(a, sizeof a, "%lld%s%s", (long long)x.count, x.dtype[0] ? " " : "", x.dtype);
        snprintf(b, sizeof b, "%lld%s%s", (long long)y.count, ydt[0] ? " " : "", ydt);
        snprintf(buf, len, "%s #%lld: rank %d has %s, rank %d has %s", x.op, (long long)e->seq, x.rank, a, y.rank, b);
        return;
    }
    /* another op: each side whole (a barrier carries nothing) */
    if (x.count == 0 && !x.dtype[0])
        snprintf(a, sizeof a, "%s", x.op);
    else
        snprintf(a, sizeof a, "%s of %lld%s%s", x.op, (long long)x.count, x.dtype[0] ? " " : "", x.dtype);
    if (y.count == 0 && !y.dtype[0])
        snprintf(b, sizeof b, "%s", y.op);
    else
        snprintf(b, sizeof b, "%s of %lld%s%s", y.op, (long long)y.count, ydt[0] ? " " : "", ydt);
    snprintf(buf, len, "collective #%lld: rank %d has %s, rank %d has %s", (long long)e->seq, x.rank, a, y.rank, b);
}

/* A rank's report of e's op and payload (a completed one, or a beat in
 * it; count -1: an older worker, no shape): the first sets e's op and
 * shape; the first rank after it with another op, count or dtype is kept
 * beside it, and a count or dtype that differs under one op is the shape
 * lint (another op is check_op's). O(1): a few compares of short fields. */
static void check_shape(Job *j, JobColl *e, int rank, const char *op, int64_t count, const char *dtype, JobTime at)
{
    if (count < 0) return;
    if (e->shape_rank < 0) {
        e->shape_rank = rank;
        e->count = count;
        memcpy(e->dtype, dtype, sizeof e->dtype);
        e->dtype[sizeof e->dtype - 1] = '\0';
        memcpy(e->shape_op, op, sizeof e->shape_op);
        e->shape_op[sizeof e->shape_op - 1] = '\0';
        return;
    }
    if (e->odd_rank >= 0 || rank == e->shape_rank) return;
    bool dt_same = !dtype[0] || !e->dtype[0] || strncmp(dtype, e->dtype, sizeof e->dtype) == 0;
    bool op_same = op_equal(op, e->shape_op);
    if (count == e->count && dt_same && op_same) return;
    e->odd_rank = rank;
    e->odd_count = count;
    memcpy(e->odd_dtype, dtype, sizeof e->odd_dtype);
    e->odd_dtype[sizeof e->odd_dtype - 1] = '\0';
    memcpy(e->odd_op, op, sizeof e->odd_op);
    e->odd_op[sizeof e->odd_op - 1] = '\0';
    JobBook *bk = j->book;
    if (bk->mismatch_seq < 0 || e->seq < bk->mismatch_seq) {
        bk->mismatch_seq = e->seq;
        mismatch_say(e, bk->mismatch_text, sizeof bk->mismatch_text);
    }
    if (op_same) {
        char what[160];
        mismatch_say(e, what, sizeof what);
        job_lint_shape(j, at, e->shape_rank, rank, what);
    }
}

void job_comm_on_coll(Job *j, int rank, const MsgColl *c, double ms, JobTime at)
{
    (void)ms; /* the rank's own duration (its JobCollRec's): a collective's figures are the ranks' together */
    int64_t from = coll_in_ns(c);
    /* strcmp(op, "allreduce") == 0, as one compare of its 10 bytes (op is
     * PROTO_STR_SHORT long): no call for every collective */
    if (c->bucket >= 0 && memcmp(c->op, "allreduce", sizeof "allreduce") == 0) bucket_add(j, c);
    JobColl *e = slot_for(j, c->seq);
    if (!e) return;
    check_op(j, e, rank, c->op, at);
    if (!e->op[0] || e->done == 0) {
        memcpy(e->op, c->op, sizeof e->op);
        e->op[sizeof e->op - 1] = '\0';
        e->op_rank = rank;
        e->bucket = c->bucket;
        e->step = c->step;
        e->bytes = c->bytes;
    }
    arrive(e, seen_at(j, (uint64_t)c->seq % JOB_COLL_RING), rank, c->enq_ns ? c->enq_ns : from); /* e is seq's slot */
    span_add(&e->in_first_ns, &e->in_last_ns, &e->done_last_ns, e->done++ == 0, from, c->done_ns);
    check_shape(j, e, rank, c->op, c->count, c->dtype, at);
}

void job_comm_on_beat(Job *j, int rank, const MsgBeat *b, JobTime at)
{
    if (b->coll_seq < 0 || b->coll_since_ns <= 0) return;
    JobColl *e = slot_for(j, b->coll_seq);
    if (!e) return;
    check_op(j, e, rank, b->coll_op, at);
    if (!e->op[0]) {
        memcpy(e->op, b->coll_op, sizeof e->op);
        e->op[sizeof e->op - 1] = '\0';
        e->op_rank = rank;
        e->step = b->step + 1; /* in flight: part of the step after the last one done */
    }
    arrive(e, seen_at(j, (uint64_t)b->coll_seq % JOB_COLL_RING), rank, b->coll_since_ns); /* e is seq's slot */
    /* in flight: a shape desync that hangs (or aborts a rank) is named by
     * what the ranks said as they entered */
    if (b->coll_count >= 0) check_shape(j, e, rank, b->coll_op, b->coll_count, b->coll_dtype, at);
}

bool job_bucket_times(const Job *j, int b, JobCollTimes *out)
{
    memset(out, 0, sizeof *out);
    if (b < 0 || b >= JOB_MAX_BUCKETS || j->buckets[b].last_step < 0) return false;
    *out = j->buckets[b].last;
    return true;
}

bool job_coll_times(const Job *j, const JobColl *c, JobCollTimes *out)
{
    memset(out, 0, sizeof *out);
    if (!c || c->done < j->world) return false;
    times_of(out, c->op, j->world, c->bytes, c->in_first_ns, c->in_last_ns, c->done_last_ns);
    return true;
}

bool job_rank_coll_times(const Job *j, const JobCollRec *rec, double *waited_ms, JobCollTimes *out)
{
    *waited_ms = 0;
    memset(out, 0, sizeof *out);
    if (!rec || rec->c.seq < 0 || !j->book->seen) return false;
    const JobColl *c = &j->book->colls[(uint64_t)rec->c.seq % JOB_COLL_RING];
    if (c->seq != rec->c.seq || !job_coll_times(j, c, out)) return false;
    int64_t in = coll_in_ns(&rec->c);
    *waited_ms = c->in_last_ns > in ? (double)(c->in_last_ns - in) / 1e6 : 0;
    return true;
}

bool job_coll_mismatch(const Job *j, int64_t seq, char *buf, size_t len)
{
    if (len) buf[0] = '\0';
    if (seq < 0 || !j->book->seen) return false;
    const JobColl *e = &j->book->colls[(uint64_t)seq % JOB_COLL_RING];
    if (e->seq != seq || e->odd_rank < 0) return false;
    if (len) mismatch_say(e, buf, len);
    return true;
}

int64_t job_coll_mismatch_first(const Job *j, char *buf, size_t len)
{
    if (len) snprintf(buf, len, "%s", j->book->mismatch_text);
    return j->book->mismatch_seq;
}

int job_colls_recent(const Job *j, const JobColl **out, int max)
{
    int n = 0;
    for (int64_t s = j->book->coll_max_seq; s >= 0 && s > j->book->coll_max_seq - JOB_COLL_RING && n < max; s--) {
        const JobColl *c = &j->book->colls[s % JOB_COLL_RING];
        if (c->seq == s && c->arrived > 0) out[n++] = c;
    }
    return n;
}

bool job_coll_arrived(const Job *j, const JobColl *c, int rank)
{
    /* c must be one of j's slots (from job_colls_recent) */
    if (!c || !j->book->seen || c < j->book->colls || c >= j->book->colls + JOB_COLL_RING || rank < 0 ||
        rank >= j->world)
        return false;
    return (seen_of(j, c)[rank / 64] >> (rank % 64)) & 1;
}

bool job_comm_share(const Job *j, double *comm_frac, double *exposed_frac, double *hidden_frac, double *comm_ms,
                    double *exposed_ms)
{
    double step = 0, comm = 0, exposed = 0;
    int n = 0;
    for (int i = 0; i < j->world; i++) {
        const JobRank *r = &j->ranks[i];
        if (!r->have_step || !(r->last.step_ms > 0)) continue;
        step += r->last.step_ms;
        comm += r->last.comm_ms;
        exposed += r->last.exposed_ms;
        n++;
    }
    if (n == 0) return false;
    if (comm_frac) *comm_frac = comm / step;
    if (exposed_frac) *exposed_frac = exposed / step;
    /* what the step waited for cannot exceed what comm took; where a worker's
     * two clocks say it did, nothing was hidden (never a negative share) */
    if (hidden_frac) *hidden_frac = comm > 0 && exposed < comm ? 1.0 - exposed / comm : 0.0;
    if (comm_ms) *comm_ms = comm / n;
    if (exposed_ms) *exposed_ms = exposed / n;
    return true;
}
