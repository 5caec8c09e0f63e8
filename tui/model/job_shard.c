/* job_shard.c — the job model's view of DistributedSampler: each rank's
 * shard summary, the dataset's index space for the newest epoch (which rank
 * got each index, and which were handed out twice as padding), and the
 * check that a shuffled epoch does not repeat the previous epoch's order
 * (the classic forgotten sampler.set_epoch(epoch)).
 *
 * Owns: Job.shard (and its owner/count arrays in Job.book) and the shard
 * fields of a JobRank (and of its book). Main thread.
 */
#include "model/job_priv.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a over the indices in order: equal lists, equal hashes; a shuffle
 * that moved anything changes it. */
static uint64_t hash_idx(const int64_t *idx, uint32_t n)
{
    /* one multiply a whole index (not FNV's eight, one a byte): a shard of
     * 30000 indices arrives every epoch from every rank */
    uint64_t h = 1469598103934665603ULL;
    for (uint32_t i = 0; i < n; i++) {
        h = (h ^ (uint64_t)idx[i]) * 0x9e3779b97f4a7c15ULL;
        h ^= h >> 29;
    }
    return h ^ n;
}

/* A new epoch: the map starts over with its size and sampler settings
 * (the set_epoch warning's record, same_order_*, outlives it). */
static int map_reset(Job *j, const MsgShard *s)
{
    JobShardMap *m = &j->shard;
    JobBook *b = j->book;
    int64_t want = s->dataset_size > 0 ? s->dataset_size : 0;
    if (want > JOB_SHARD_MAP_MAX) want = JOB_SHARD_MAP_MAX;
    if (want > m->mapped || !b->shard_owner) {
        int16_t *o = realloc(b->shard_owner, (size_t)(want > 0 ? want : 1) * sizeof *o);
        if (o) b->shard_owner = o;
        uint8_t *c = realloc(b->shard_count, (size_t)(want > 0 ? want : 1));
        if (c) b->shard_count = c;
        if (!o || !c) {
            m->mapped = 0;
            return -1;
        }
    }
    memset(b->shard_owner, 0xff, (size_t)want * sizeof *b->shard_owner); /* -1 */
    memset(b->shard_count, 0, (size_t)want);
    *m = (JobShardMap){
        .epoch = s->epoch,
        .size = s->dataset_size,
        .mapped = want,
        .num_samples = s->num_samples,
        .total_size = s->total_size,
        .padding = s->padding,
        .seed = s->seed,
        .shuffle = s->shuffle,
        .drop_last = s->drop_last,
        .same_order_rank = m->same_order_rank,
        .same_order_epoch = m->same_order_epoch,
    };
    return 0;
}

static void map_add(Job *j, JobRank *r, const MsgShard *s)
{
    JobShardMap *m = &j->shard;
    int16_t *owner = j->book->shard_owner;
    uint8_t *count = j->book->shard_count;
    if (m->epoch < 0 || s->epoch > m->epoch) {
        if (map_reset(j, s)) return;
        owner = j->book->shard_owner;
        count = j->book->shard_count;
    }
    if (s->epoch != m->epoch || r->book->shard_mapped_epoch == s->epoch)
        return; /* older epoch, or this rank's shard is in already */
    r->book->shard_mapped_epoch = s->epoch;
    m->ranks++;
    if (s->n_idx < (uint64_t)(s->num_samples > 0 ? s->num_samples : 0)) m->cut = true;
    if (!s->idx) return;
    for (uint32_t k = 0; k < s->n_idx; k++) {
        int64_t i = s->idx[k];
        if (i < 0 || i >= m->mapped) continue;
        if (count[i] == 0) owner[i] = (int16_t)(r->rank < INT16_MAX ? r->rank : INT16_MAX);
        if (count[i] < 255) count[i]++;
        if (count[i] == 2) m->dup_indices++;
    }
}

void job_shard_on_shard(Job *j, JobRank *r, const MsgShard *s, JobTime at)
{
    uint64_t h = s->idx ? hash_idx(s->idx, s->n_idx) : 0;
    if (r->have_shard && s->epoch != r->shard_epoch) {
        r->book->have_prev_shard = true;
        r->book->prev_shard_epoch = r->shard_epoch;
        r->book->prev_shard_hash = r->book->shard_hash;
    }
    r->have_shard = true;
    r->shard_epoch = s->epoch;
    r->num_samples = s->num_samples;
    r->total_size = s->total_size;
    r->padding = s->padding;
    r->shard_shuffle = s->shuffle;
    r->book->shard_hash = h;
    r->n_first = 0;
    if (s->idx)
        for (uint32_t i = 0; i < s->n_idx && i < JOB_SHARD_FIRST; i++) r->first_idx[r->n_first++] = s->idx[i];
    map_add(j, r, s);

    /* Without shuffle every epoch is the same on purpose; with it, the same
     * order twice means the seed did not move: set_epoch was not called.
     * Told once per epoch (the first rank that shows it), not per rank. */
    bool repeated = s->shuffle && r->book->have_prev_shard && s->n_idx >= 2 && h == r->book->prev_shard_hash;
    if (repeated) job_lint_mark(j, r, JOB_LINT_SET_EPOCH, at, NULL); /* every rank's row shows it */
    if (repeated && j->shard.same_order_epoch != s->epoch) {
        j->shard.same_order_rank = r->rank;
        j->shard.same_order_epoch = s->epoch;
        job_ev_add(j, at, r->rank, EV_WARN,
                   "rank %d: epoch %lld has the same sample order as epoch %lld: "
                   "sampler.set_epoch(epoch) not called?",
                   r->rank, (long long)s->epoch, (long long)r->book->prev_shard_epoch);
    }
}

void job_shard_done(Job *j)
{
    free(j->book->shard_owner);
    free(j->book->shard_count);
    j->book->shard_owner = NULL;
    j->book->shard_count = NULL;
}

int job_shard_owner(const Job *j, int64_t i, int *count)
{
    const JobBook *b = j->book;
    if (count) *count = 0;
    if (!b->shard_owner || i < 0 || i >= j->shard.mapped || b->shard_count[i] == 0) return -1;
    if (count) *count = b->shard_count[i];
    return b->shard_owner[i];
}
