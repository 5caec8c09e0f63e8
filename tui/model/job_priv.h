/* job_priv.h — what the job model's source files share and nobody else
 * may use: the private halves of Job and JobRank (rings and bookkeeping),
 * the event adder with an explicit time, and the per-subject hooks job.c
 * calls as messages arrive. Main thread only.
 */
#ifndef DDPTOP_JOB_PRIV_H
#define DDPTOP_JOB_PRIV_H

#include "model/job.h"

/* samples/s snapshots are taken at most this often (the ring must span
 * JOB_RATE_WINDOW_NS). */
#define JOB_RATE_SNAP_NS 100000000LL
#define JOB_RATE_RING    32

/* Step number n (0 = the first pushed) sits in ring slot n & (size - 1). */
_Static_assert((JOB_STEP_RING & (JOB_STEP_RING - 1)) == 0, "JOB_STEP_RING must be a power of two");

/* A rank's histories (the counts are JobRank's *_len; each head is the next
 * write position) and what the set_epoch check remembers of its shards. */
struct JobRankBook {
    JobStepRec ring[JOB_STEP_RING];
    int ring_head;
    /* samples/s over the newest second of steps, kept as each step lands
     * (job_rate.c) so the screen reads it in O(1): absolute step indices
     * (0 = the first step pushed) of the first step after the newest gap of
     * over a second, and of the newest step at least a second older than
     * the newest (-1: none yet) */
    int64_t ring_pushed, rate_gap, rate_old;
    JobPhaseRec phases[JOB_PHASE_HIST];
    int phases_head;
    JobCollRec colls[JOB_RANK_COLLS];
    int colls_head;
    /* the highest seq of a collective it completed (-1: none): colls may
     * arrive out of their order (DDP's buckets go at a step's end or with
     * the next phase, after a later wrapped collective's), so a beat's
     * collective is done once any coll with its number or a later one came */
    int64_t coll_seq_done;
    JobLogRec logs[JOB_RANK_LOGS];
    int logs_head;
    uint64_t shard_hash; /* of the whole index list, in order */
    bool have_prev_shard;
    int64_t prev_shard_epoch;
    uint64_t prev_shard_hash;
    int64_t shard_mapped_epoch; /* epoch whose indices are in Job.shard (-1) */
    /* steps per epoch (the uneven-epochs lint): the last step of the epoch
     * before the current one, when known */
    bool epoch_start_known;
    int64_t epoch_start_step;
    /* what the diagnosis knows of its failure (job_diagnosis.c) */
    uint64_t fail_order;            /* 0 none; else the job's count of failures when its own came */
    bool fail_own;                  /* its own (an exception, a death), not a peer's consequence */
    bool tb_open;                   /* its traceback's lines are arriving */
    char tb_where[PROTO_STR_MED];   /* its traceback's innermost frame of the user's own code */
    char tb_call[PROTO_STR_SHORT];  /* the torch.distributed function that frame called, "" */
    char linger_why[PROTO_STR_LONG]; /* its adapter's "non-daemon thread 'x' at f.py:9 in run" */
    char linger_text[JOB_DIAG_TEXT]; /* the finding, as noted (job_note_linger) */
    bool linger_late;                /* noted after a rank had failed: not that failure's cause */
    int64_t silent_from_ns;          /* job_note_silent: its last_msg_ns when noted silent (0 never); the
                                      * silence lasts while last_msg_ns is still that */
    int64_t silent_for_ns;           /* how long it had been silent at the newest note */
};

/* A bucket's figures of one step, summed over the ranks that reported it
 * (job_comm.c). */
typedef struct {
    int64_t step;
    int64_t in_first_ns, in_last_ns, done_last_ns; /* wall, as JobColl's */
    int64_t bytes;
    int n;
} JobBucketAcc;

/* A bucket's recent steps (slot step % JOB_BUCKET_STEPS), the newest one
 * begun, and the newest every rank reported (published in JobBucket). */
typedef struct {
    JobBucketAcc at[JOB_BUCKET_STEPS];
    int64_t newest, full; /* -1: none */
} JobBucketBook;

struct JobBook {
    JobEvent events[JOB_EVENTS]; /* event n sits in slot n % JOB_EVENTS */
    JobEventRow rows[JOB_EVENTS]; /* the screen's rows (job_events.c): row n in slot n % JOB_EVENTS */
    uint64_t rows_total;          /* rows ever begun */
    JobEval evals[JOB_EVALS];    /* eval n sits in slot n % JOB_EVALS */
    /* job_comm.c */
    JobColl colls[JOB_COLL_RING]; /* slot seq % JOB_COLL_RING */
    uint64_t *seen;               /* [JOB_COLL_RING][ceil(world/64)]: who arrived */
    int64_t coll_max_seq;
    int64_t mismatch_seq;   /* job_coll_mismatch_first: -1 none */
    char mismatch_text[160];
    JobBucketBook bucket_book[JOB_MAX_BUCKETS];
    /* job_shard.c: Job.shard's index map (the newest epoch every rank has
     * reported), and the one being filled as a new epoch's shards arrive */
    int16_t *shard_owner; /* [shard.mapped] -1 none, else the (first) rank */
    uint8_t *shard_count; /* [shard.mapped] times handed out (saturates) */
    int64_t shard_cap;    /* indices allocated in shard_owner/count */
    JobShardMap fill;     /* the epoch being filled (fill.epoch -1: none) */
    int16_t *fill_owner;
    uint8_t *fill_count;
    int64_t fill_cap;
    bool fill_shown;         /* no epoch complete yet: the views read the one filling */
    int64_t fill_done_epoch; /* the newest epoch complete (and shown); -1 */
    /* job.c */
    int step_min_count;    /* stepped ranks that sit at Job.step */
    int64_t step_above;    /* every stepped rank not at Job.step is at this step or past it */
    int64_t samples_total; /* sum of ranks' last `samples` */
    int64_t rate_t_ns[JOB_RATE_RING], rate_samples[JOB_RATE_RING];
    int rate_len, rate_head;  /* snapshots of samples_total; head = next write */
    int64_t rate_taken;       /* snapshots ever taken: the newest is number rate_taken - 1 */
    int64_t rate_base;        /* the number of the window's base at the last update */
    double rate_before_pause; /* samples_per_s when the job paused: back on resume */
    /* the last update's time, and its base's samples and age, for the next
     * update at that same time (a burst's messages share their arrival) */
    int64_t rate_at_ns, rate_dt, rate_base_samples;
    /* lints (job_lint.c) */
    unsigned lints_told;        /* JobLint bits already told as events */
    int64_t ep_epoch, ep_steps; /* the newest finished epoch's steps, as the first rank to */
    int ep_rank;                /* finish it counted them (-1: none yet) */
    int early_rank, early_by;   /* JOB_LINT_EARLY: the rank that had finished, the one that failed (-1) */
    int64_t early_step;         /* the finished rank's last step */
    uint64_t fail_count;        /* ranks' failures seen (JobRankBook.fail_order) */
    int64_t desync_seq;         /* JOB_LINT_DESYNC's first collective, -1 none; its two ranks and ops */
    int desync_rank[2];
    char desync_op[2][PROTO_STR_SHORT];
    JobRankBook ranks[];        /* [world]: JobRank.book points here */
};

/* When an entry point's caller saw what it reports, on both clocks (the
 * model reads none): mono_ns for intervals, wall_ns for event stamps. */
typedef struct {
    int64_t mono_ns, wall_ns;
} JobTime;

/* Add an event seen at `at` (printf-style). */
/* Drop the bytes of UTF-8 characters that a byte-counted cut ("%.200s")
 * split, in place; well-formed text stays as it is. */
void job_text_mend(char *s);
void job_ev_add(Job *j, JobTime at, int rank, JobEventLevel level, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* job_outcome.c: a ckpt message (written or lost) into the job. */
void job_apply_ckpt(Job *j, JobRank *r, const MsgCkpt *c, JobTime at);

/* job_comm.c: allocate/free the collective tables; fold a completed
 * collective (ms: its duration, job_coll_ms) or a heartbeat (collective in
 * flight) into them. */
static inline double job_coll_ms(const MsgColl *c)
{
    int64_t from = c->start_ns ? c->start_ns : c->enq_ns; /* the start; the enqueue when it is unknown */
    return (c->done_ns > from && from > 0) ? (double)(c->done_ns - from) / 1e6 : 0.0;
}
int job_comm_init(Job *j);
void job_comm_done(Job *j);
void job_comm_on_coll(Job *j, int rank, const MsgColl *c, double ms, JobTime at);
void job_comm_on_beat(Job *j, int rank, const MsgBeat *b, JobTime at);
/* A restart: the ranks number their collectives from 0 again, so the
 * matched collectives of the run before go (bucket histories stay). */
void job_comm_restart(Job *j);

/* job_lint.c: the lints (JobLint) as messages and exits arrive. A rank
 * moved on to a new epoch (its previous step was prev_step in prev_epoch);
 * two ranks' reports of one collective number disagree on its op; the
 * ranks' states changed (a beat, a phase, an exit): is someone alone in a
 * collective the others will never reach? Mark a rank's lint and tell it
 * once (the text is the event's). */
void job_lint_epoch(Job *j, JobRank *r, const MsgStep *s, bool had, int64_t prev_step, int64_t prev_epoch, JobTime at);
void job_lint_desync(Job *j, JobTime at, int64_t seq, int rank_a, const char *op_a, int rank_b, const char *op_b);
/* Collective reports of rank_a and rank_b disagree on its count or dtype
 * (what: job_coll_mismatch's text). */
void job_lint_shape(Job *j, JobTime at, int rank_a, int rank_b, const char *what);
void job_lint_alone(Job *j, JobTime at);
/* Rank r reports an error (its text `error`) while training: had another
 * rank finished by then at r's step or before, and does the error say a
 * peer went away? (JOB_LINT_EARLY) */
void job_lint_early(Job *j, JobRank *r, const char *error, JobTime at);
/* A peer went away under a collective: Gloo's "Connection closed by peer"
 * / "reset by peer", a broken pipe (a consequence, not a cause). */
bool job_error_peer_gone(const char *error);

/* ---- the diagnosis's evidence (job_diagnosis.c) ---- */
/* r entered the error phase for the first time with this text. */
void job_diag_on_error(Job *j, JobRank *r, const char *error);
/* r logged a line at this level (its traceback comes so). */
void job_diag_on_log(Job *j, JobRank *r, JobEventLevel level, const char *text);
/* job_verdict's line for a failed job: "job failed: " + the diagnosis,
 * then how the other ranks ended, as consequences. */
bool job_diag_verdict(const Job *j, char *buf, size_t len);
/* r's process ended not cleanly (r->how_ended set). */
void job_diag_on_exit(Job *j, JobRank *r);
void job_lint_mark(Job *j, JobRank *r, JobLint lint, JobTime at, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* job_rate.c: fold the time of a message into samples/s (job_rate_update,
 * on every message, so the figure falls to zero when steps stop but beats
 * go on; job_rate_update_long when the time is not the last update's); the
 * job has just paused (paused) or stopped being paused (training: ranks
 * train again). */
void job_rate_update_long(Job *j, int64_t now_ns);
static inline void job_rate_update(Job *j, int64_t now_ns)
{
    JobBook *b = j->book;
    if (j->paused) return; /* 0 until resumed (pause_update) */
    /* A burst's messages share their frame's arrival: at the time of the
     * last update no snapshot is due, the base stays where that update left
     * it (a fixpoint of job_rate_update_long's search) and so do its samples
     * and age; only the summed counters may have moved. job_rate_pause
     * empties the ring (rate_len 0), which sends the next update the long
     * way. Inline: every message comes here. */
    if (now_ns != b->rate_at_ns || b->rate_len == 0) {
        job_rate_update_long(j, now_ns);
        return;
    }
    if (b->rate_dt < JOB_RATE_WINDOW_NS / 4) return; /* as the long way: the old figure stays */
    double rate = (double)(b->samples_total - b->rate_base_samples) * 1e9 / (double)b->rate_dt;
    j->samples_per_s = rate > 0 ? rate : 0;
}
/* Would an update at now_ns take a snapshot of the summed counters (the
 * ring empty, or its newest JOB_RATE_SNAP_NS old)? */
static inline bool job_rate_snap_due(const Job *j, int64_t now_ns)
{
    const JobBook *b = j->book;
    return b->rate_len == 0 ||
           now_ns - b->rate_t_ns[(b->rate_head + JOB_RATE_RING - 1) % JOB_RATE_RING] >= JOB_RATE_SNAP_NS;
}
void job_rate_pause(Job *j, bool paused, bool training);
/* Each rank's samples/s is over its newest steps spanning about a second:
 * fast enough to follow a change of pace, long enough to smooth single slow
 * steps. */
#define JOB_RANK_RATE_NS 1000000000LL

/* After a step that arrived at t_ns was pushed on r's ring: moves r's
 * samples/s window (amortised O(1); arrival times never go back), which
 * job_rank_samples_per_s reads. Inline: every step message comes here. */
static inline void job_rate_rank_push(JobRank *r, int64_t t_ns)
{
    JobRankBook *bk = r->book;
    int64_t n = bk->ring_pushed++;
    /* a second between two steps is a pause (or a stall), not a pace: the
     * rate is of the steps after it */
    if (n > 0 && t_ns - bk->ring[(uint64_t)(n - 1) & (JOB_STEP_RING - 1)].t_ns > JOB_RANK_RATE_NS) bk->rate_gap = n;
    int64_t lo = bk->ring_pushed - r->ring_len;
    if (lo < bk->rate_gap) lo = bk->rate_gap;
    int64_t old = bk->rate_old < lo - 1 ? lo - 1 : bk->rate_old;
    while (old + 1 < n && t_ns - bk->ring[(uint64_t)(old + 1) & (JOB_STEP_RING - 1)].t_ns >= JOB_RANK_RATE_NS) old++;
    bk->rate_old = old;
}

/* job_shard.c: fold a rank's shard into its summary and the index map;
 * warns when an epoch's order repeats the previous one's. */
void job_shard_on_shard(Job *j, JobRank *r, const MsgShard *s, JobTime at);
void job_shard_done(Job *j);

#endif
