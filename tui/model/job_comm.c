/* job_comm.c — the job model's collectives: each collective matched across
 * ranks by its sequence number (who arrived first and last, who has not
 * arrived yet), per-bucket all-reduce latency and bandwidth over steps, and
 * the comm share of a step.
 *
 * Owns: the collectives ring (and its arrival bitsets) in Job.book,
 * Job.buckets and their accumulators. Arrivals come
 * from completed collectives (their enqueue time) and from heartbeats (a
 * collective in flight since), so a hang shows who never came. Main thread.
 */
#include "model/job_priv.h"

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
    c->first_rank = c->last_rank = c->ms_max_rank = c->op_rank = -1;
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

/* A rank's figures of bucket i at a step, into that step's sums. Ranks
 * report in bursts (a rank's steps of 50 ms together, then the next rank's),
 * so each recent step keeps sums of its own; the newest step every rank
 * reported is the one shown (JobBucket.last_*). A report older than the
 * steps kept (a straggler JOB_BUCKET_STEPS behind) is left out of the
 * means, not of the series. */
static void bucket_add(Job *j, const MsgColl *c, double ms)
{
    int i = c->bucket < JOB_MAX_BUCKETS ? c->bucket : JOB_MAX_BUCKETS - 1;
    JobBucket *b = &j->buckets[i];
    JobBucketBook *k = &j->book->bucket_book[i];
    b->used = true;
    b->bytes = c->bytes;
    series_add(&b->ms, c->step, ms);
    if (i + 1 > j->n_buckets) j->n_buckets = i + 1;
    JobBucketAcc *a = &k->at[(uint64_t)c->step % JOB_BUCKET_STEPS];
    if (a->step != c->step) {
        if (c->step < a->step) return; /* its slot holds a newer step */
        *a = (JobBucketAcc){ .step = c->step };
    }
    a->ms += ms;
    a->algbw += c->algbw_gbs;
    a->busbw += c->busbw_gbs;
    a->n++;
    if (c->step > k->newest) k->newest = c->step;
    if (a->n >= j->world && c->step >= k->full) { /* every rank reported this step */
        k->full = c->step;
        b->last_ms = a->ms / a->n;
        b->last_algbw = a->algbw / a->n;
        b->last_busbw = a->busbw / a->n;
        b->last_n = a->n;
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

void job_comm_on_coll(Job *j, int rank, const MsgColl *c, double ms, JobTime at)
{
    int64_t from = c->start_ns ? c->start_ns : c->enq_ns;
    /* strcmp(op, "allreduce") == 0, as one compare of its 10 bytes (op is
     * PROTO_STR_SHORT long): no call for every collective */
    if (c->bucket >= 0 && memcmp(c->op, "allreduce", sizeof "allreduce") == 0) bucket_add(j, c, ms);
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
    e->done++;
    e->ms_sum += ms;
    if (e->ms_max_rank < 0 || ms > e->ms_max) {
        e->ms_max = ms;
        e->ms_max_rank = rank;
    }
    e->algbw_sum += c->algbw_gbs;
    e->busbw_sum += c->busbw_gbs;
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
}

void job_bucket_means(const Job *j, int b, double *ms, double *algbw, double *busbw)
{
    *ms = *algbw = *busbw = 0;
    if (b < 0 || b >= JOB_MAX_BUCKETS) return;
    const JobBucket *k = &j->buckets[b];
    const JobBucketBook *bk = &j->book->bucket_book[b];
    const JobBucketAcc *a = bk->newest >= 0 ? &bk->at[(uint64_t)bk->newest % JOB_BUCKET_STEPS] : NULL;
    if (k->last_n) {
        *ms = k->last_ms;
        *algbw = k->last_algbw;
        *busbw = k->last_busbw;
    } else if (a && a->n) {
        *ms = a->ms / a->n;
        *algbw = a->algbw / a->n;
        *busbw = a->busbw / a->n;
    }
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
    if (hidden_frac) *hidden_frac = comm > 0 ? 1.0 - exposed / comm : 0.0;
    if (comm_ms) *comm_ms = comm / n;
    if (exposed_ms) *exposed_ms = exposed / n;
    return true;
}
