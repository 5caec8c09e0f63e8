/* job_shard.c — the job model's view of DistributedSampler: each rank's
 * shard summary, the dataset's index space for the newest epoch (which rank
 * got each index, and which were handed out twice as padding), and the
 * check that a shuffled epoch does not repeat the previous epoch's order
 * (the classic forgotten sampler.set_epoch(epoch)).
 *
 * Owns: Job.shard (its owner/count arrays) and the shard fields of a
 * JobRank. Main thread.
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

static int map_reset(JobShardMap *m, const MsgShard *s)
{
    int64_t want = s->dataset_size > 0 ? s->dataset_size : 0;
    if (want > JOB_SHARD_MAP_MAX)
        want = JOB_SHARD_MAP_MAX;
    if (want > m->mapped || !m->owner) {
        int16_t *o = realloc(m->owner, (size_t)(want > 0 ? want : 1) * sizeof *o);
        if (o)
            m->owner = o;
        uint8_t *c = realloc(m->count, (size_t)(want > 0 ? want : 1));
        if (c)
            m->count = c;
        if (!o || !c) {
            m->mapped = 0;
            return -1;
        }
    }
    m->epoch = s->epoch;
    m->size = s->dataset_size;
    m->mapped = want;
    memset(m->owner, 0xff, (size_t)want * sizeof *m->owner);   /* -1 */
    memset(m->count, 0, (size_t)want);
    m->ranks = 0;
    m->num_samples = s->num_samples;
    m->total_size = s->total_size;
    m->padding = s->padding;
    m->seed = s->seed;
    m->shuffle = s->shuffle;
    m->drop_last = s->drop_last;
    m->dup_indices = 0;
    m->cut = false;
    return 0;
}

static void map_add(Job *j, JobRank *r, const MsgShard *s)
{
    JobShardMap *m = &j->shard;
    if (m->epoch < 0 || s->epoch > m->epoch) {
        if (map_reset(m, s))
            return;
    }
    if (s->epoch != m->epoch || r->shard_mapped_epoch == s->epoch)
        return;                      /* older epoch, or this rank's shard is in already */
    r->shard_mapped_epoch = s->epoch;
    m->ranks++;
    if (s->n_idx < (uint64_t)(s->num_samples > 0 ? s->num_samples : 0))
        m->cut = true;
    if (!s->idx)
        return;
    for (uint32_t k = 0; k < s->n_idx; k++) {
        int64_t i = s->idx[k];
        if (i < 0 || i >= m->mapped)
            continue;
        if (m->count[i] == 0)
            m->owner[i] = (int16_t)(r->rank < INT16_MAX ? r->rank : INT16_MAX);
        if (m->count[i] < 255)
            m->count[i]++;
        if (m->count[i] == 2)
            m->dup_indices++;
    }
}

void job_shard_on_shard(Job *j, JobRank *r, const MsgShard *s, JobTime at)
{
    uint64_t h = s->idx ? hash_idx(s->idx, s->n_idx) : 0;
    if (r->have_shard && s->epoch != r->shard_epoch) {
        r->have_prev_shard = true;
        r->prev_shard_epoch = r->shard_epoch;
        r->prev_shard_hash = r->shard_hash;
    }
    r->have_shard = true;
    r->shard_epoch = s->epoch;
    r->num_samples = s->num_samples;
    r->total_size = s->total_size;
    r->padding = s->padding;
    r->shard_shuffle = s->shuffle;
    r->shard_hash = h;
    r->n_first = 0;
    if (s->idx)
        for (uint32_t i = 0; i < s->n_idx && i < JOB_SHARD_FIRST; i++)
            r->first_idx[r->n_first++] = s->idx[i];
    map_add(j, r, s);

    /* Without shuffle every epoch is the same on purpose; with it, the same
     * order twice means the seed did not move: set_epoch was not called.
     * Told once per epoch (the first rank that shows it), not per rank. */
    if (s->shuffle && r->have_prev_shard && s->n_idx >= 2 && h == r->prev_shard_hash &&
        j->shard.same_order_epoch != s->epoch) {
        j->shard.same_order_rank = r->rank;
        j->shard.same_order_epoch = s->epoch;
        job_ev_add(j, at, r->rank, EV_WARN,
                   "rank %d: epoch %lld has the same sample order as epoch %lld: "
                   "sampler.set_epoch(epoch) not called?",
                   r->rank, (long long)s->epoch, (long long)r->prev_shard_epoch);
    }
}

void job_shard_done(Job *j)
{
    free(j->shard.owner);
    free(j->shard.count);
    j->shard.owner = NULL;
    j->shard.count = NULL;
}

int job_shard_owner(const Job *j, int64_t i, int *count)
{
    const JobShardMap *m = &j->shard;
    if (count)
        *count = 0;
    if (!m->owner || i < 0 || i >= m->mapped || m->count[i] == 0)
        return -1;
    if (count)
        *count = m->count[i];
    return m->owner[i];
}
