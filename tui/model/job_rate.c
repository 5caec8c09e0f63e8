/* job_rate.c — samples/s: the job's (a sliding window over the ranks'
 * summed sample counters) and each rank's (over its newest steps), both of
 * training time only: a pause (or a stall) is not a slower pace.
 *
 * Owns: Job.samples_per_s and the rate ring in Job.book. Main thread. The
 * per-message parts, job_rate_update's usual case and the rank's window
 * kept per step (job_rate_rank_push), are inline in job_priv.h.
 */
#include "model/job_priv.h"

/* Snapshot number n's slot (n within the ring's live ones): the head and
 * the count of snapshots taken move together from 0 (job_rate_pause only
 * forgets the ones kept), so snapshot n sits where the head was at n. */
static int snap_slot(int64_t n) { return (int)((uint64_t)n % JOB_RATE_RING); }

static int64_t snap_t(const JobBook *b, int64_t n) { return b->rate_t_ns[snap_slot(n)]; }

/* Sliding-window samples/s: snapshots of the summed sample counters, and the
 * rate between now and the newest snapshot at least a window old (the
 * oldest when none is). Called on every message so the figure falls to zero
 * when steps stop but beats go on (job_rate_update in job_priv.h, which
 * comes here unless the message shares the last one's time). Snapshot times
 * only grow, so the base only moves forward while it stays a window old:
 * found from the last update's in O(1) amortised, by a walk over the ring
 * only when that one is gone or too new. */
void job_rate_update_long(Job *j, int64_t now_ns)
{
    JobBook *b = j->book;
    if (job_rate_snap_due(j, now_ns)) {
        b->rate_t_ns[b->rate_head] = now_ns;
        b->rate_samples[b->rate_head] = b->samples_total;
        b->rate_head = (b->rate_head + 1) % JOB_RATE_RING;
        if (b->rate_len < JOB_RATE_RING) b->rate_len++;
        b->rate_taken++;
    }
    int64_t oldest = b->rate_taken - b->rate_len, base = b->rate_base;
    if (base < oldest || base >= b->rate_taken || now_ns - snap_t(b, base) < JOB_RATE_WINDOW_NS) {
        for (base = b->rate_taken - 1; base > oldest; base--) /* newest first */
            if (now_ns - snap_t(b, base) >= JOB_RATE_WINDOW_NS) break;
    } else {
        while (base + 1 < b->rate_taken && now_ns - snap_t(b, base + 1) >= JOB_RATE_WINDOW_NS) base++;
    }
    b->rate_base = base;
    int k = snap_slot(base);
    int64_t dt = now_ns - b->rate_t_ns[k];
    b->rate_at_ns = now_ns;
    b->rate_dt = dt;
    b->rate_base_samples = b->rate_samples[k];
    /* under a quarter window the figure is mostly noise: keep the old one */
    if (dt < JOB_RATE_WINDOW_NS / 4) return;
    double rate = (double)(b->samples_total - b->rate_samples[k]) * 1e9 / (double)dt;
    j->samples_per_s = rate > 0 ? rate : 0;
}

/* samples/s counts training time only: the window starts over at a pause
 * and at a resume, the figure is 0 while paused and the one from before the
 * pause until the new window is measurable. */
void job_rate_pause(Job *j, bool paused, bool training)
{
    JobBook *b = j->book;
    if (paused) b->rate_before_pause = j->samples_per_s;
    j->samples_per_s = paused || !training ? 0 : b->rate_before_pause;
    b->rate_len = 0;
}

double job_rank_samples_per_s(const JobRank *r, int64_t now_ns)
{
    const JobStepRec *a = job_rank_step_at(r, 0);
    if (!a) return 0;
    /* from the newest step at least a second older than a, or the oldest
     * one after the newest gap (or on the ring) */
    const JobRankBook *bk = r->book;
    int64_t n = bk->ring_pushed - 1, from = bk->ring_pushed - r->ring_len;
    if (from < bk->rate_gap) from = bk->rate_gap;
    if (from < bk->rate_old) from = bk->rate_old;
    if (from >= n) return 0;
    const JobStepRec *b = &bk->ring[from % JOB_STEP_RING];
    int steps = (int)(n - from);
    if (a->t_ns <= b->t_ns || a->samples < b->samples) return 0;
    /* no step for three step-times (and a second): the rank is not training */
    double interval = (double)(a->t_ns - b->t_ns) / steps;
    double quiet = (double)(now_ns - a->t_ns);
    if (quiet > 1e9 && quiet > 3 * interval) return 0;
    return (double)(a->samples - b->samples) * 1e9 / (double)(a->t_ns - b->t_ns);
}
