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

/* A new epoch: the filling map starts over with its size and sampler
 * settings (the set_epoch warning's record, same_order_*, outlives it). */
static int map_reset(Job *j, const MsgShard *s)
{
    JobShardMap *m = &j->book->fill;
    JobBook *b = j->book;
    int64_t want = s->dataset_size > 0 ? s->dataset_size : 0;
    if (want > JOB_SHARD_MAP_MAX) want = JOB_SHARD_MAP_MAX;
    if (want > b->fill_cap || !b->fill_owner) {
        int16_t *o = realloc(b->fill_owner, (size_t)(want > 0 ? want : 1) * sizeof *o);
        if (o) b->fill_owner = o;
        uint8_t *c = realloc(b->fill_count, (size_t)(want > 0 ? want : 1));
        if (c) b->fill_count = c;
        if (!o || !c) {
            m->mapped = 0;
            return -1;
        }
        b->fill_cap = want;
    }
    memset(b->fill_owner, 0xff, (size_t)want * sizeof *b->fill_owner); /* -1 */
    memset(b->fill_count, 0, (size_t)want);
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
        .same_order_rank = j->shard.same_order_rank,
        .same_order_epoch = j->shard.same_order_epoch,
    };
    return 0;
}

/* Ranks whose shards the map waits for: every rank still running. */
static int shard_ranks_expected(const Job *j)
{
    int n = 0;
    for (int i = 0; i < j->world; i++) {
        RankState st = j->ranks[i].state;
        n += st == RANK_ALIVE || st == RANK_WAITING;
    }
    return n;
}

/* The filling epoch has every rank's shard: it becomes the one shown. Until
 * then the views keep the previous complete epoch, so a new epoch's first
 * shards (a rank's message arrives before the others') never read as ranks
 * missing and indices "in no shard". Before any epoch is complete the
 * filling one is shown as it comes. */
static void map_publish(Job *j)
{
    JobBook *b = j->book;
    bool complete = b->fill.ranks >= shard_ranks_expected(j);
    if (!complete) {
        if (b->fill_shown || j->shard.epoch < 0) {
            b->fill_shown = true;
            j->shard = b->fill;
        }
        return;
    }
    int16_t *o = b->shard_owner;
    uint8_t *c = b->shard_count;
    int64_t cap = b->shard_cap;
    b->shard_owner = b->fill_owner;
    b->shard_count = b->fill_count;
    b->shard_cap = b->fill_cap;
    b->fill_owner = o;
    b->fill_count = c;
    b->fill_cap = cap;
    j->shard = b->fill;
    b->fill_shown = false;
    /* the filling map is now the shown one's twin; the next epoch resets it */
    b->fill.epoch = j->shard.epoch;
    b->fill.ranks = 0;
    b->fill.mapped = 0;
    b->fill_done_epoch = j->shard.epoch;
}

static void map_add(Job *j, JobRank *r, const MsgShard *s)
{
    JobBook *b = j->book;
    JobShardMap *m = &b->fill;
    if (s->epoch <= b->fill_done_epoch) return; /* an epoch already complete and shown, or older */
    if (s->epoch < m->epoch) return;
    if (s->epoch > m->epoch && map_reset(j, s)) return;
    if (s->epoch != m->epoch || r->book->shard_mapped_epoch == s->epoch)
        return; /* older epoch, or this rank's shard is in already */
    int16_t *owner = b->fill_owner;
    uint8_t *count = b->fill_count;
    r->book->shard_mapped_epoch = s->epoch;
    m->ranks++;
    if (s->n_idx < (uint64_t)(s->num_samples > 0 ? s->num_samples : 0)) m->cut = true;
    for (uint32_t k = 0; s->idx && k < s->n_idx; k++) {
        int64_t i = s->idx[k];
        if (i < 0 || i >= m->mapped) continue;
        if (count[i] == 0) owner[i] = (int16_t)(r->rank < INT16_MAX ? r->rank : INT16_MAX);
        if (count[i] < 255) count[i]++;
        if (count[i] == 2) m->dup_indices++;
    }
    map_publish(j);
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
        j->shard.same_order_rank = j->book->fill.same_order_rank = r->rank;
        j->shard.same_order_epoch = j->book->fill.same_order_epoch = s->epoch;
        job_ev_add(j, at, r->rank, EV_WARN,
                   "rank %d: epoch %lld has the same sample order as epoch %lld: "
                   "sampler.set_epoch(epoch) not called?",
                   r->rank, (long long)s->epoch, (long long)r->book->prev_shard_epoch);
    }
}

void job_shard_done(Job *j)
{
    JobBook *b = j->book;
    free(b->shard_owner);
    free(b->shard_count);
    free(b->fill_owner);
    free(b->fill_count);
    b->shard_owner = b->fill_owner = NULL;
    b->shard_count = b->fill_count = NULL;
}

int job_shard_owner(const Job *j, int64_t i, int *count)
{
    const JobBook *b = j->book;
    const int16_t *owner = b->fill_shown ? b->fill_owner : b->shard_owner;
    const uint8_t *cnt = b->fill_shown ? b->fill_count : b->shard_count;
    if (count) *count = 0;
    if (!owner || i < 0 || i >= j->shard.mapped || cnt[i] == 0) return -1;
    if (count) *count = cnt[i];
    return owner[i];
}
